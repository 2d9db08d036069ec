/* world.h: the compiler world model (DESIGN.md, "The world model in detail"): the tokenizer and
 * transformer encoder E (text of a state -> z), the action embedding and TransH transition F
 * (z_{t-1}, a_t -> z_t), the value head (a reward head on z_T - z_0, trained through the rollout
 * on measured records), and the LambdaMART ranker on the rolled-out change, its value and action
 * and hardware features; one versioned model file holding all of it; training from trajectory
 * files and tuning logs; and the cost model "world" the search uses.
 *
 * At search time E runs once per workload (z_0, cached by workload key); scoring a candidate is
 * T TransH steps (each action's normal and translation are cached by the action's fields) and
 * one tree-ensemble prediction, so no intermediate program is built or printed. */
#ifndef CWM_WORLD_H
#define CWM_WORLD_H

#include "cwm/costmodel.h"
#include "cwm/nn.h"
#include "cwm/ranker.h"
#include "cwm/state.h"
#include "cwm/tokenizer.h"

/* Model file format version of the world model (inside the container's own version). */
#define CWM_WORLD_VERSION 6 /* 2: the value head (val.*) and rows [z - z_0 | value | ...];
                              * 3: two more action features (redundant work, serial reductions);
                              * 4: three more (the main reduction's register tile);
                              * 5: act_round (action numbers bucketed by round(log2));
                              * 6: the paper mode (paper, paper_margin) and hw_target */

typedef struct {
  cwm_enc_config enc; /* vocab is set from the vocabulary */
  int no_transition;  /* ablation: the ranker sees z_0 (no rollout) instead of z_T */
  int static_final;   /* ablation: z_T is E(printed final state), not the rollout (slow: prints
                       * and encodes every candidate) */
  float margin;       /* rollout margin-ranking gamma, on distances divided by width; 0.1 */
  int act_round;      /* numbers in actions bucketed by round(log2) (1023 and 1024 alike); 0 in
                       * files before version 5: floor(log2) + 1 */
  int ranker_z0;      /* the ranker's latent columns hold z_0 (the workload), and the rollout
                       * reaches the trees only through the value head's score (CWM_MODE_VALUE);
                       * absent (0) in older files: they hold z_T - z_0 */
  int paper;          /* CWM_MODE_PAPER: the ranker's latent columns hold the predicted z_T, and no
                       * feature reads the final program (no lowering, no encoding of its text) */
  int paper_margin;   /* in the paper mode, the value head's score of the rollout is the trees'
                       * base margin (1) or left out of the row (0, the default: on the held-out
                       * workloads it picked better first programs, models/README.md) */
  int hw_target;      /* the hardware columns describe the machine each record was measured on
                       * (its target) and, in a search, the search's threads and vector width; 0
                       * in files before version 6: this machine's, at training and scoring */
} cwm_world_config;

void cwm_world_config_default(cwm_world_config *c);

typedef struct cwm_world cwm_world;

/* A fresh, untrained model over vocab (ownership passes to the model). */
cwm_world *cwm_world_new(const cwm_world_config *c, cwm_vocab *vocab, uint64_t seed, cwm_err *err);
/* Loads a model file; CWM_EMODEL naming the file and what is wrong (truncated, altered, another
 * version, missing or misshapen tensors); CWM_EDEP without OpenBLAS. */
cwm_world *cwm_world_load(const char *path, cwm_err *err);
/* Writes the model (atomically: temporary name, then rename). */
int cwm_world_save(cwm_world *w, const char *path, cwm_err *err);
void cwm_world_free(cwm_world *w);

const cwm_world_config *cwm_world_get_config(const cwm_world *w);
int cwm_world_width(const cwm_world *w);
const cwm_vocab *cwm_world_vocab(const cwm_world *w);
cwm_encoder *cwm_world_encoder(cwm_world *w);
cwm_ranker *cwm_world_ranker(cwm_world *w); /* NULL until a ranker is trained or loaded */
void cwm_world_set_ranker(cwm_world *w, cwm_ranker *r); /* takes ownership, frees the old one */
void cwm_world_set_no_transition(cwm_world *w, int on);
/* Which z_T the ranker sees: CWM_MODE_ROLLOUT (the world model: z_T - z_0 and the value head's
 * score of it), CWM_MODE_NO_TRANSITION (z_0 and the action features only), CWM_MODE_STATIC (the
 * encoding of the real final text), CWM_MODE_VALUE (the world model read through its value
 * head only: z_0, the value head's score of the rollout, the action features) or CWM_MODE_PAPER
 * (the design's ranker: the predicted z_T, the action features computed from the step list
 * alone, the hardware; nothing of the final program). Kept in the model file; the ranker must be
 * trained in the same mode (cwm train ranker --mode). */
enum { CWM_MODE_ROLLOUT = 0, CWM_MODE_NO_TRANSITION = 1, CWM_MODE_STATIC = 2, CWM_MODE_VALUE = 3, CWM_MODE_PAPER = 4 };
void cwm_world_set_mode(cwm_world *w, int mode);
int cwm_world_mode(const cwm_world *w);
/* The paper mode's value column: the value head's score as the base margin (1) or none (0). */
void cwm_world_set_paper_margin(cwm_world *w, int on);
/* "rollout", "value", "paper", "no-transition" or "static" to a mode; -1 for anything else. */
int cwm_world_mode_parse(const char *s);
const char *cwm_world_mode_name(int mode);
/* Free-form provenance kept in the model file ("trained on ... in ... s"). */
void cwm_world_set_notes(cwm_world *w, const char *notes);
const char *cwm_world_notes(const cwm_world *w);

/* E: encodes n state texts into out [n, width] (inference; batched internally). */
int cwm_world_encode(cwm_world *w, const char *const *texts, int n, float *out, cwm_err *err);

/* F: rolls z0 forward through steps[0..n) into zT [width] (all intermediate states into
 * trace [n, width] when not NULL). Uses the action cache. */
int cwm_world_rollout(cwm_world *w, const float *z0, const cwm_step *steps, int n, float *zT, float *trace);

/* The ranker's feature row of a candidate, by `mode` (a CWM_MODE_*): [z_T - z_0 (width) | the
 * value head's score of z_T (1) | action features (CWM_ACT_NFEAT)] (rollout, static): the change
 * the schedule made, not the absolute state, so that the trees compare schedules rather than
 * tell workloads apart; [z_0 | that value | action features] (value); [z_0 | 0 | action
 * features] (no transition); [z_T | that value, or NaN without paper_margin | action features
 * of the step list alone, the (state) columns NaN] (paper: `final` is not read). The hardware
 * columns are hw's (NULL: this machine's). */
int cwm_world_nfeat(const cwm_world *w);
void cwm_world_row(cwm_world *w, const float *z0, const float *zT, int mode, const cwm_step *steps, int n,
                   const cwm_state *final, const cwm_hwinfo *hw, float *row);

/* ---- action embedding + TransH, for training (transition.c) ---------------------------------- */

/* The fields of one step as ids into the action embedding table; returns how many (<= 48).
 * Extents, split lengths, unroll and factor values enter as log2 buckets: round(log2 v) when
 * round is set (a shape one off a power of two lands with it), floor(log2 v) + 1 otherwise (model
 * files before version 5). */
#define CWM_ACT_MAXF 48
int cwm_action_ids(const cwm_step *s, int round, int *ids);
int cwm_action_vocab(void);

/* ---- feature rows (the ranker's input, for training and evaluation: train.h) --------------- */

/* Feature rows of measured records for the ranker: mode 0 the model's own, 1 no transition
 * (z_0), 2 static final state (E of the real final text), otherwise the rollout (z_T); the row's
 * layout is the model's mode (cwm_world_row) except for mode 1. targets[i] is record i's target
 * string (targets or an entry NULL: none), read for the hardware columns when the model's
 * hw_target is set. rows [n, nfeat], the caller's. */
int cwm_world_record_rows(cwm_world *w, const cwm_dag *d, const cwm_step *const *steps, const int *nsteps,
                          const char *const *targets, int n, int mode, float *rows, cwm_err *err);

/* ---- the cost model ------------------------------------------------------------------------ */

/* handoff: from the second round the candidates' scores blend in Ansor's model trained from
 * scratch on the workload's own measurements (architecture.md); 0 keeps the world model alone. */
typedef struct {
  int handoff; /* default 1 */
  int threads; /* threads the search times with: the hardware columns' cores when the model's
                * hw_target is set (the vector width is cwm_hwinfo_host's, which follows the
                * target); 0 (default): this machine's online CPUs */
} cwm_world_cm_opts;
void cwm_world_cm_opts_default(cwm_world_cm_opts *o);

/* The world model as the search's cost model; takes ownership of w (NULL o: the defaults).
 * update() boosts the ranker with the records measured so far for their workload (one query
 * group) after every round. */
cwm_costmodel *cwm_costmodel_world(cwm_world *w, const cwm_world_cm_opts *o, cwm_err *err);
/* The default model file: the one set by cwm_world_set_default_path, else the installed or source
 * tree's default model (cwm_data_file: share/cwm/default.cwm, models/default.cwm); NULL if none. */
const char *cwm_world_default_path(void);
/* Sets the file cwm_world_default_path returns (NULL or "": back to the search above); copied. */
void cwm_world_set_default_path(const char *path);

#endif
