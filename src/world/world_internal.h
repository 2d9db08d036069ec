/* world_internal.h: what world.c, transition.c and train.c share inside src/world. */
#ifndef CWM_WORLD_INTERNAL_H
#define CWM_WORLD_INTERNAL_H

#include "cwm/world.h"

typedef struct {
  uint64_t key;
  int slot; /* -1 empty */
} wm_slot;

/* A hash map from a 64-bit key to a row of `width` floats. */
typedef struct {
  wm_slot *slots;
  int cap, n, width;
  float *rows;
  int rows_cap;
} wm_map;

void wm_map_init(wm_map *m, int width);
void wm_map_free(wm_map *m);
void wm_map_clear(wm_map *m);
float *wm_map_get(wm_map *m, uint64_t key);
float *wm_map_put(wm_map *m, uint64_t key); /* a new (or the existing) row */

struct cwm_world {
  cwm_world_config cfg;
  int D;
  cwm_vocab *vocab;
  cwm_encoder *enc;
  cwm_params tp; /* transition parameters: act.emb, act.fc.w/b, act.u.w/b, act.d.w/b, and the
                    value head val.w1/b1/w2 */
  cwm_ranker *ranker;
  char *notes;
  wm_map act_cache; /* action hash -> [w (unit normal) | d] */
  wm_map z0_cache;  /* workload key hash -> z0 */
  wm_map zs_cache;  /* static-final ablation: printed final state hash -> E(text) */
};

/* Transition parameter indices in w->tp. */
enum { TP_EMB, TP_FC_W, TP_FC_B, TP_U_W, TP_U_B, TP_D_W, TP_D_B, TP_V_W1, TP_V_B1, TP_V_W2, TP__COUNT };

/* The value head: a score of how fast the program of a latent state runs, read from the change
 * the schedule made, x = z - z_0: v = w2 . gelu(W1 x + b1), W1 [H, D]. Trained through the
 * rollout with a pairwise ranking loss on measured records (as a world model's reward head),
 * so the action embeddings learn what their steps do to the running time, not only to the text. */
#define WM_VALUE_HIDDEN 64
/* x [N, D] -> pre, act [N, H] (kept for the backward), s [N]. */
void wm_value_forward(const cwm_world *w, const float *x, int N, float *pre, float *act, float *s);
/* ds [N] -> gradients into w->tp's value head and dx [N, D] (accumulated). */
void wm_value_backward(cwm_world *w, const float *x, const float *pre, const float *act, const float *ds, int N,
                       float *dx);
/* Initializes just the value head (a model file of version 1 has none). */
void wm_value_init(cwm_params *tp, uint64_t seed);

void wm_transition_params(cwm_params *tp, int D);
void wm_transition_init(cwm_params *tp, uint64_t seed);

/* Batched action network over N steps, kept for the backward. */
typedef struct {
  int N, D, cap;
  float *e, *pre, *h, *u, *d; /* [N, D] each */
  int *ids, *nids;            /* [N, CWM_ACT_MAXF], [N] */
} wm_act_batch;

void wm_act_batch_free(wm_act_batch *b);
void wm_act_forward(cwm_world *w, const cwm_step *const *steps, int N, wm_act_batch *b);
/* du, dd [N, D]: accumulates into w->tp's gradients. */
void wm_act_backward(cwm_world *w, const wm_act_batch *b, const float *du, const float *dd);

/* Tokenizes and encodes texts with the encoder (inference or training forward). */
int wm_encode_texts(cwm_world *w, const char *const *texts, int n, float *out, int keep, cwm_err *err);

/* The transition vectors of every step of these states, computed once into the action cache. */
void wm_prefetch_actions(cwm_world *w, cwm_state *const *states, int n);
/* The layout of the model's rows: its mode, the static ablation's being the rollout's. */
int wm_row_mode(const cwm_world *w);
/* One ranker row (cwm_world_row; world.c); with_value 0 leaves the value column to wm_rows_value. */
void wm_row_fill(cwm_world *w, const float *z0, const float *zT, int mode, const cwm_step *steps, int n,
                 const cwm_state *final, const cwm_hwinfo *hw, float *row, int with_value);
/* The value column of n rows of the model's layout in one batched pass (world.c; z0s as there). */
void wm_rows_value(cwm_world *w, float *rows, int n, const float *z0s);
/* z_0 of the workload a dag holds (E of its initial state), cached by workload key. */
const float *wm_z0(cwm_world *w, const cwm_dag *d, cwm_err *err);

/* The cost model's scoring without the cost-model object (eval's speed figure); the hardware
 * columns this machine's. */
int wm_score_states(cwm_world *w, cwm_state *const *states, int n, double *scores, cwm_err *err);

#endif
