/* train_internal.h: what the world model's trainers (encoder_train.c, transition_train.c,
 * ranker_train.c) share. They reach into the model's parameters through world/'s private header:
 * training is the one user of those internals outside world/. */
#ifndef CWM_TRAIN_INTERNAL_H
#define CWM_TRAIN_INTERNAL_H

#include "../world/world_internal.h"

#include "cwm/train.h"

#define say(o, ...) cwm_progressf((o)->progress, (o)->progress_ud, __VA_ARGS__)

static inline int stopped(const cwm_train_opts *o) { return o->stop && *o->stop; }

/* Trajectories of one part of the split, in memory (at most max, 0 = all). */
int train_load_trajs(const char *path, double vf, int part, int max, cwm_traj **out, int *n, cwm_err *err);
/* The training part (at most o->max_traj) and the validation part (a quarter of that) of o->traj_path */
int train_load_split(const cwm_train_opts *o, cwm_traj **tr, int *ntr, cwm_traj **va, int *nva, cwm_err *err);

#endif
