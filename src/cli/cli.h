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

/* Parses argv (argv[0] is the command name) against opts; returns 0, or prints the problem and
 * the help text and returns CWM_EUSAGE; returns -1 when --help was asked (help printed). */
int cli_parse(int argc, char **argv, cli_opt *opts, int nopts, const char *help);
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
 * callbacks take cli_progress with a cli_say. */
typedef struct {
  const char *cmd;
  int quiet;
} cli_say;
void cli_progress(void *ud, const char *line);
void cli_catch_stop(void);
int cli_usage(const char *cmd, const char *help, const char *fmt, ...);
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
/* The cost model of --model NAME (random, ansor with --pretrained, world with --model-file or the
 * default model); NULL with e filled on failure. */
struct cwm_costmodel *cli_costmodel(const char *name, uint64_t seed, const char *pretrained, const char *model_file,
                                    cwm_err *e);
int cmd_eval(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_compile(int argc, char **argv);
/* An ONNX model imported, inferred and partitioned (errors name the node); 0 or the error code. */
struct cwm_graph;
int cli_onnx_load(const char *path, struct cwm_graph **g, cwm_partition **p, cwm_err *e);
/* The partition's tasks as a network for the task scheduler, named after the file. */
cwm_network *cli_onnx_network(const cwm_partition *p, const char *path, cwm_err *e);

#endif
