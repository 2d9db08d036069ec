/* env.h: the one place the cwm programs read their environment. The library reads none; these
 * turn each variable into the setter or option field that carries it (the benches use them too). */
#ifndef CWM_CLI_ENV_H
#define CWM_CLI_ENV_H
#include "cwm/measure.h"
#include "cwm/record.h"
#include "cwm/sketch.h"
#include "cwm/world.h"

/* Process-wide settings: CWM_XGBOOST_LIB, CWM_OPENBLAS_LIB, CWM_MODEL, CWM_SUITE, CWM_VEC_LANES.
 * Call it first thing in main, before any thread starts. */
void cli_env_apply(void);
/* Takes --cache-dir DIR and --cache-max-mb N (or --opt=value) out of argv, wherever they stand,
 * for cli_env_measure; CWM_EUSAGE (printed) on a bad value. */
int cli_cache_opts(int *argc, char **argv);
/* CC, the cache directory (--cache-dir, else CWM_CACHE_DIR, else $HOME/.cache/cwm) and
 * --cache-max-mb into measure options just defaulted. */
void cli_env_measure(cwm_measure_opts *mo);
/* CWM_REGISTER_TILE=0 into sampling options just defaulted. */
void cli_env_space(cwm_space_opts *so);
/* CWM_WORLD_HANDOFF=0 into the world cost model's options just defaulted. */
void cli_env_world_cm(cwm_world_cm_opts *o);
/* Takes --target NAME (or --target=NAME) out of argv wherever it stands: "native" (the default),
 * or an instruction set of cwm_isa_list, which sets the code generator's tile width and the world
 * model's vector width for the process. "list" prints the targets and returns -1; CWM_EUSAGE
 * (printed) on an unknown name. */
int cli_target_opts(int *argc, char **argv);
/* The instruction set of --target, or NULL for native. */
const cwm_isa *cli_target_isa(void);
/* base (compiler flags) with the target's instruction-set flags in place of -march=native; base
 * itself for native. The result lives as long as the process. */
const char *cli_target_cflags(const char *base);
/* 0 if this machine can time the target's kernels, else CWM_EUSAGE with a line naming what it
 * lacks (cmd names the command). */
int cli_target_runs_here(const char *cmd);

/* TERM unset or "dumb": a terminal that cannot redraw a line (no progress bar). */
int cli_env_plain_terminal(void);
/* The number of ranks of the MPI job this process was started in (mpirun sets it), 0 if none. */
int cli_env_job_size(void);
#endif
