/* cli.h: shared helpers of the command-line commands. */
#ifndef CWM_CLI_H
#define CWM_CLI_H

#include <stdarg.h>

#include "cwm/partition.h"
#include "cwm/scheduler.h"
#include "cwm/search.h"

#define NOPT(o) ((int)(sizeof(o) / sizeof((o)[0])))

typedef struct {
  const char *name; /* "--workload" */
  int has_value;
  const char *value; /* filled by cli_parse; "1" for flags */
} cli_opt;

/* Parses argv (argv[0] is the command name) against opts, getopt_long-like: "--name value",
 * "--name=value", flags alone, "--" ends the options. Returns 0; or CWM_EUSAGE after a usage
 * error (one line on stderr, cli_usage); or -1 when --help (the help printed) or --list-options
 * (the table's names printed, one a line, "=" after those that take a value) was asked. A
 * command that takes no operands refuses any argument that is not an option. --json, where the
 * table has none, calls cli_json_requested (the progress lines as JSON). */
int cli_parse(int argc, char **argv, cli_opt *opts, int nopts, const char *help);
/* cli_parse for a command with operands: the arguments that are not options (and every one after
 * "--") go to operands[0..max) in order, their number to *noperands; more than max is a usage
 * error. */
int cli_parse_operands(int argc, char **argv, cli_opt *opts, int nopts, const char *help, char **operands, int max,
                       int *noperands);
/* Takes every "name" (a flag) or "name value" / "name=value" (has_value) out of argv[1..*argc)
 * up to a "--", shifting the rest down; *value is the last one given ("1" for a flag). Returns how
 * many were taken, or -1 after a usage error (printed). main's global options use it. */
int cli_take_option(int *argc, char **argv, const char *name, int has_value, const char **value);
/* The command main runs ("tune"), for the names in usage errors; cli_command is the name the last
 * cli_parse used ("dataset measure"), "" before any. */
void cli_set_command(const char *cmd);
const char *cli_command(void);
/* Called by cli_parse when a command line asks for --json; main sets it (progress.c). */
extern void (*cli_json_requested)(void);
/* Whether the argument arg is the option name, alone ("--name", *inline_value NULL) or with its
 * value ("--name=value", *inline_value the value). */
int cli_opt_is(const char *arg, const char *name, const char **inline_value);
const char *cli_get(const cli_opt *opts, int nopts, const char *name);
long cli_get_long(const cli_opt *opts, int nopts, const char *name, long def);
/* The same for an int (a value that does not fit is a usage error, not a wrapped number) and a
 * finite double; both exit with CWM_EUSAGE on a bad value. */
int cli_get_int(const cli_opt *opts, int nopts, const char *name, int def);
double cli_get_double(const cli_opt *opts, int nopts, const char *name, double def);
int cli_fail(const cwm_err *e);
/* Set by SIGINT or SIGTERM once cli_catch_stop has run: long jobs stop after the work in flight
 * (the option structs' stop pointers point here). */
extern volatile int cli_stop;
/* Progress lines of a long job on stderr, "cwm CMD: line", unless quiet: the library's progress
 * callbacks take cli_progress with a cli_say (progress.c). With --json each becomes a JSON object;
 * on a terminal a line that counts DONE/TOTAL (the first "N/M" in it, e.g. "round 3: 192/640
 * trials", "[7/120] ...") also draws a progress bar under the lines, with its rate and the
 * line's "ETA S s". */
typedef struct {
  const char *cmd;
  int quiet;
} cli_say;
void cli_progress(void *ud, const char *line);
/* First thing in main: the start time (the JSON lines' elapsed seconds) and, when stderr is a
 * terminal, the progress bar. cli_report_json: from now on every line on stderr is one JSON
 * object (cli_json_requested points here). */
void cli_report_begin(void);
void cli_report_json(void);
void cli_catch_stop(void);
/* A usage error: "cwm CMD: MESSAGE; see 'cwm CMD --help'" on stderr, one line; returns
 * CWM_EUSAGE. cmd NULL: the command of the last cli_parse; "": cwm itself. fmt NULL: prints help
 * on stdout and returns 0. */
int cli_usage(const char *cmd, const char *help, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Loads --workload (and --suite); prints the error and returns NULL on failure. */
cwm_workload *cli_workload(const char *spec, const char *suite, int *rc);
/* --name, --export and --summary checked before any work: a name the exported C can use, an export
 * directory created and writable, a summary file's directory writable. 0 or the exit status
 * (the error printed). */
int cli_check_outputs(const cli_opt *o, int nopt, const char *cmd, const char *help);
/* The workload of --workload (and --suite) and its DAG; prints the error, sets *rc and returns NULL
 * on failure. */
cwm_dag *cli_dag(const cli_opt *o, int nopt, cwm_workload **w, int *rc);
/* Step lists read from a file, one JSON list per line (blank lines and # comments skipped). */
typedef struct {
  cwm_step **lists;
  int *lens, n;
} cli_lists;
/* Reads step lists; errors name the file and line. */
int cli_read_steps(const char *path, cli_lists *l, cwm_err *err);
void cli_lists_free(cli_lists *l);
/* cli_dag and the step lists of the file path over it */
cwm_dag *cli_dag_lists(const cli_opt *o, int nopt, const char *path, cwm_workload **w, cli_lists *l, int *rc);

/* Under mpirun with more than one rank (cli/mpi.c): takes --worker-timeout and --mixed-targets out
 * of argv, starts MPI, and turns every rank but 0 into a worker that serves and finishes here
 * (*done set, the exit status returned); rank 0 goes on with a command that can use the workers,
 * else is refused. Without mpirun: only the options are taken out. */
int cli_farm_begin(int *argc, char ***argv, int *done);
/* Rank 0 of an MPI job: measure opts mo go through the workers from now on (their hosts and targets
 * checked); 0 or the exit status (printed). Nothing without mpirun. */
int cli_farm_measure(cwm_measure_opts *mo, int quiet);
/* Rank 0: the workers' report, stop them, leave MPI (also run at exit). */
void cli_farm_end(void);

int cmd_show(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_codegen(int argc, char **argv);
int cmd_measure(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_tune(int argc, char **argv);
/* `cwm tune --network`, with cmd_tune's parsed options. */
int cmd_tune_network(const cli_opt *o, int nopt, const char *help);
/* --threads, --repeats and --min-repeat-ms of cwm tune (or of another command cmd, named in the
 * usage errors) into mo (defaults kept when absent); a usage error's exit code, or 0. */
int cli_tune_protocol(const cli_opt *o, int nopt, const char *cmd, const char *help, cwm_measure_opts *mo);
int cmd_dataset(int, char **);
int cmd_train(int argc, char **argv);
/* --model's value, else the default: "world" when --model-file is given or the default model file
 * (cwm_world_default_path) exists, else "ansor". */
const char *cli_model_name(const char *given, const char *model_file);
/* The cost model of --model NAME (random, ansor with --pretrained, world with --model-file or the
 * default model; threads: those the search times with, which world's hardware columns read, 0
 * when none); NULL with e filled on failure. */
struct cwm_costmodel *cli_costmodel(const char *name, uint64_t seed, const char *pretrained, const char *model_file,
                                    int threads, cwm_err *e);
int cmd_eval(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_compile(int argc, char **argv);
/* An ONNX model imported, inferred and partitioned (errors name the node); 0 or the error code. */
struct cwm_graph;
int cli_onnx_load(const char *path, struct cwm_graph **g, cwm_partition **p, cwm_err *e);
/* The partition's tasks as a network for the task scheduler, named after the file. */
cwm_network *cli_onnx_network(const cwm_partition *p, const char *path, cwm_err *e);

/* ---- tuning logs (cmd_log.c): `cwm log`, and what `cwm export --log` shares with it ---- */
typedef struct {
  cwm_record r;
  int file;  /* index into the set's paths */
  long line; /* 1-based line of the record in that file */
} cli_logrec;
typedef struct {
  cli_logrec *v;
  int n, nbad; /* records; lines skipped as not records */
  char *const *paths;
  int npaths;
} cli_logset;
/* Reads the logs in order (paths borrowed). Lines that are not records are skipped and, per file,
 * counted on stderr with the last one's line and reason ("cwm CMD: ...") unless quiet. 0 or the
 * exit status (printed). */
int cli_logset_read(cli_logset *s, char *const *paths, int npaths, const char *cmd, int quiet);
void cli_logset_free(cli_logset *s);
/* The target string `cwm tune --threads T` gives its records on this machine (with --target). */
void cli_this_target(int threads, char *buf, size_t n);
/* The valid records (error 0, a latency) of workload key, of one target: those measured as
 * `mine` measures (cwm_record_same_target) when there are any, or only_this; else all. Their
 * indices into s->v, lowest mean latency first, ties in file order, into *idx (malloc'ed; free
 * it); their number. */
int cli_log_ranked(const cli_logset *s, const char *key, const char *mine, int only_this, int **idx);
/* --workload W of a log command: a workload key (16 hex digits), a spec (suite id, op spec, @FILE;
 * *w gets the workload when w is not NULL), or else a name the set's records give one workload.
 * 0 or the exit status (printed). */
int cli_log_workload(const cli_logset *s, const char *spec, const char *suite, char key[17], cwm_workload **w);
int cmd_log(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
