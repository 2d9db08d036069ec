/* env.h: the one place the cwm programs read their environment. The library reads none; these
 * turn each variable into the setter or option field that carries it (the benches use them too). */
#ifndef CWM_CLI_ENV_H
#define CWM_CLI_ENV_H
#include "cwm/measure.h"
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
/* The number of ranks of the MPI job this process was started in (mpirun sets it), 0 if none. */
int cli_env_job_size(void);
#endif
