/* models.c: the cost model a command asked for by name (random, ansor, world). */
#include "cli.h"
#include "env.h"

#include "cwm/world.h"

#include <string.h>

const char *cli_model_name(const char *given, const char *model_file) {
  if (given) return given;
  /* the world model is the default whenever a model file is at hand (the shipped one is found
   * beside the binary or in the source tree); without one, Ansor's online model still tunes */
  return model_file || cwm_world_default_path() ? "world" : "ansor";
}

cwm_costmodel *cli_costmodel(const char *name, uint64_t seed, const char *pretrained, const char *model_file,
                             int threads, cwm_err *e) {
  if (!strcmp(name, "random")) return cwm_costmodel_random(seed);
  if (!strcmp(name, "ansor")) return cwm_costmodel_ansor(seed, pretrained, e);
  if (!strcmp(name, "world")) {
    const char *path = model_file ? model_file : cwm_world_default_path();
    if (!path) {
      cwm_fail(e, CWM_EMODEL,
               "--model world: no model file (give --model-file MODEL, set CWM_MODEL, or train one with cwm train all)");
      return NULL;
    }
    cwm_world *w = cwm_world_load(path, e);
    if (!w) return NULL;
    cwm_world_cm_opts wo;
    cwm_world_cm_opts_default(&wo);
    cli_env_world_cm(&wo);
    wo.threads = threads;
    return cwm_costmodel_world(w, &wo, e);
  }
  cwm_fail(e, CWM_EUSAGE, "unknown --model '%s' (random, ansor, world)", name);
  return NULL;
}
