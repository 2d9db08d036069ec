/* encoder.c: the world model's text encoder (contract: nn.h). All windows of all texts of a batch
 * are stacked into one [rows, width] matrix so that every linear layer is a single product;
 * attention runs per (window, head) pair on the pool's threads, each pair writing its own columns
 * of its own rows, so the result does not depend on the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/nn.h"

typedef struct {
  int ln1g, ln1b, qkvw, qkvb, projw, projb, ln2g, ln2b, fcw, fcb, fc2w, fc2b;
} layer_ix;

/* Where one layer's activations live. In inference mode every layer shares one set and the
 * residual stream is updated in place (res == mid == the next layer's res). */
typedef struct {
  float *res, *ln1, *m1, *r1, *qkv, *att, *ao, *mid, *ln2, *m2, *r2, *h, *g;
} layer_act;

struct cwm_encoder {
  cwm_enc_config c;
  cwm_params ps;
  int tok, pos, lnfg, lnfb;
  layer_ix *L;

  /* The last forward's layout. Windows of a text are consecutive rows. */
  int batch, nwin, N, kept;
  int *win_row0, *win_len;
  size_t *win_att; /* offset of window w's [H,T,T] probabilities in the att slot */
  int *text_row0, *text_rows;
  int *row_id, *row_pos;
  int cap_win, cap_text, cap_rows;

  layer_act *la; /* [layers] */
  float *resL, *lnf, *mf, *rf;

  float *act, *grad, *scratch;
  size_t cap_act, cap_grad, cap_scratch;
  size_t scratch_per; /* attention scratch floats per thread */
};

static void *grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  *cap = c;
  return cwm_xrealloc(p, (size_t)c * elem);
}

static void grow_floats(float **p, size_t *cap, size_t need) {
  if (need <= *cap) return;
  free(*p);
  *p = cwm_xmalloc(need * sizeof(float));
  *cap = need;
}

/* ---- Construction -------------------------------------------------------------------------- */

static int add(cwm_encoder *e, const char *name, int d0, int d1, int decay) {
  int shape[2] = {d0, d1};
  return cwm_params_add(&e->ps, name, d1 ? 2 : 1, shape, decay);
}

cwm_encoder *cwm_encoder_new(const cwm_enc_config *cfg, uint64_t seed, cwm_err *err) {
  cwm_enc_config c = *cfg;
  if (!c.width) c.width = 128;
  if (!c.heads) c.heads = 4;
  if (!c.layers) c.layers = 2;
  if (!c.ff) c.ff = 4 * c.width;
  if (!c.window) c.window = 128;
  if (!c.overlap) c.overlap = c.window / 4;
  if (c.overlap < 0) c.overlap = 0;
  if (c.vocab < 1 || c.width < 1 || c.heads < 1 || c.layers < 1 || c.ff < 1 || c.window < 1) {
    cwm_fail(err, CWM_EUSAGE, "encoder config: vocab %d, width %d, heads %d, layers %d, ff %d, "
             "window %d: each must be positive",
             c.vocab, c.width, c.heads, c.layers, c.ff, c.window);
    return NULL;
  }
  if (c.width % c.heads) {
    cwm_fail(err, CWM_EUSAGE, "encoder config: width %d is not a multiple of heads %d", c.width,
             c.heads);
    return NULL;
  }
  if (c.overlap >= c.window) {
    cwm_fail(err, CWM_EUSAGE, "encoder config: overlap %d must be smaller than window %d",
             c.overlap, c.window);
    return NULL;
  }
  if (c.vocab > (1 << 24) || c.width > 8192 || c.ff > 65536 || c.window > 65536 ||
      c.layers > 256 || (double)c.vocab * c.width > 1e9) {
    cwm_fail(err, CWM_EUSAGE, "encoder config: sizes too large (vocab %d, width %d, ff %d, "
             "window %d, layers %d)", c.vocab, c.width, c.ff, c.window, c.layers);
    return NULL;
  }

  cwm_encoder *e = cwm_xcalloc(1, sizeof *e);
  e->c = c;
  int D = c.width, F = c.ff;
  cwm_params_init(&e->ps);
  e->tok = add(e, "tok_emb", c.vocab, D, 1);
  e->pos = add(e, "pos_emb", c.window, D, 1);
  e->L = cwm_xcalloc((size_t)c.layers, sizeof *e->L);
  e->la = cwm_xcalloc((size_t)c.layers, sizeof *e->la);
  char nm[CWM_PARAM_NAME];
#define P(field, suffix, d0, d1, decay)                  \
  snprintf(nm, sizeof nm, "l%d.%s", l, suffix);         \
  e->L[l].field = add(e, nm, d0, d1, decay)
  for (int l = 0; l < c.layers; l++) {
    P(ln1g, "ln1.g", D, 0, 0);
    P(ln1b, "ln1.b", D, 0, 0);
    P(qkvw, "attn.qkv.w", 3 * D, D, 1);
    P(qkvb, "attn.qkv.b", 3 * D, 0, 0);
    P(projw, "attn.proj.w", D, D, 1);
    P(projb, "attn.proj.b", D, 0, 0);
    P(ln2g, "ln2.g", D, 0, 0);
    P(ln2b, "ln2.b", D, 0, 0);
    P(fcw, "mlp.fc.w", F, D, 1);
    P(fcb, "mlp.fc.b", F, 0, 0);
    P(fc2w, "mlp.proj.w", D, F, 1);
    P(fc2b, "mlp.proj.b", D, 0, 0);
  }
#undef P
  e->lnfg = add(e, "lnf.g", D, 0, 0);
  e->lnfb = add(e, "lnf.b", D, 0, 0);
  cwm_params_alloc(&e->ps);

  /* GPT-2's scheme: small normal weights, residual projections scaled down by depth. */
  cwm_rng rng;
  cwm_rng_seed(&rng, seed);
  float resid_std = 0.02f / sqrtf(2.0f * (float)c.layers);
  for (int i = 0; i < e->ps.n; i++) {
    cwm_param *p = &e->ps.p[i];
    const char *nmx = p->name;
    size_t len = strlen(nmx);
    if (len >= 2 && !strcmp(nmx + len - 2, ".g"))
      cwm_param_init_const(p, 1.0f);
    else if (len >= 2 && !strcmp(nmx + len - 2, ".b"))
      cwm_param_init_const(p, 0.0f);
    else if (strstr(nmx, "proj.w"))
      cwm_param_init_normal(p, &rng, resid_std);
    else
      cwm_param_init_normal(p, &rng, 0.02f);
  }
  return e;
}

void cwm_encoder_free(cwm_encoder *e) {
  if (!e) return;
  cwm_params_free(&e->ps);
  free(e->L);
  free(e->la);
  free(e->win_row0);
  free(e->win_len);
  free(e->win_att);
  free(e->text_row0);
  free(e->text_rows);
  free(e->row_id);
  free(e->row_pos);
  free(e->act);
  free(e->grad);
  free(e->scratch);
  free(e);
}

const cwm_enc_config *cwm_encoder_config(const cwm_encoder *e) { return &e->c; }
cwm_params *cwm_encoder_params(cwm_encoder *e) { return &e->ps; }
int cwm_encoder_nparams(const cwm_encoder *e) { return e->ps.n; }
cwm_param *cwm_encoder_param(cwm_encoder *e, int i) {
  return i >= 0 && i < e->ps.n ? &e->ps.p[i] : NULL;
}
void cwm_encoder_zero_grad(cwm_encoder *e) { cwm_params_zero_grad(&e->ps); }

/* ---- Layout -------------------------------------------------------------------------------- */

/* Hands out n floats (rounded up to 64 bytes) at *off from base; with base NULL only counts. */
static float *take(float *base, size_t *off, size_t n) {
  float *p = base ? base + *off : NULL;
  *off += (n + 15) & ~(size_t)15;
  return p;
}

/* Places the activations of N rows (A floats of attention probabilities per layer) in base and
 * returns the floats needed. */
static size_t place_acts(cwm_encoder *e, float *base, size_t N, size_t A, int keep) {
  size_t D = (size_t)e->c.width, F = (size_t)e->c.ff, off = 0;
  int nset = keep ? e->c.layers : 1;
  for (int l = 0; l < nset; l++) {
    layer_act *a = &e->la[l];
    a->res = take(base, &off, N * D);
    a->ln1 = take(base, &off, N * D);
    a->m1 = take(base, &off, N);
    a->r1 = take(base, &off, N);
    a->qkv = take(base, &off, N * 3 * D);
    a->att = take(base, &off, A);
    a->ao = take(base, &off, N * D);
    a->mid = keep ? take(base, &off, N * D) : a->res;
    a->ln2 = keep ? take(base, &off, N * D) : a->ln1;
    a->m2 = take(base, &off, N);
    a->r2 = take(base, &off, N);
    a->h = take(base, &off, N * F);
    a->g = take(base, &off, N * F);
  }
  for (int l = nset; l < e->c.layers; l++) e->la[l] = e->la[0];
  e->resL = keep ? take(base, &off, N * D) : e->la[0].res;
  e->lnf = e->la[0].ln1; /* free by the time the final norm runs, in both modes */
  if (keep) e->lnf = take(base, &off, N * D);
  e->mf = take(base, &off, N);
  e->rf = take(base, &off, N);
  return off;
}

/* Cuts the texts into windows and fills the row tables; fails on an id outside the vocabulary. */
static int plan(cwm_encoder *e, const int *const *ids, const int *lens, int batch, cwm_err *err) {
  int W = e->c.window, stride = e->c.window - e->c.overlap, H = e->c.heads;
  long nwin = 0, N = 0;
  for (int b = 0; b < batch; b++) {
    int L = lens[b];
    if (L < 0) return cwm_fail(err, CWM_EUSAGE, "encoder: text %d has length %d", b, L);
    if (L > 0 && !ids[b]) return cwm_fail(err, CWM_EUSAGE, "encoder: text %d has no ids", b);
    for (int k = 0; k < L; k++)
      if (ids[b][k] < 0 || ids[b][k] >= e->c.vocab)
        return cwm_fail(err, CWM_EMODEL,
                        "encoder: text %d token %d: id %d is outside the vocabulary [0, %d)", b, k,
                        ids[b][k], e->c.vocab);
    if (L > 0) nwin += L <= W ? 1 : 1 + (L - W + stride - 1) / stride;
    N += L <= W ? L : (long)W * (1 + (L - W + stride - 1) / stride);
  }
  if (N > (1L << 30) || nwin * H > (1L << 30))
    return cwm_fail(err, CWM_EUSAGE, "encoder: batch too large (%ld rows, %ld windows)", N, nwin);
  int cap = e->cap_win; /* the tables grow in pairs, only when a batch is larger than any before */
  e->win_row0 = grow(e->win_row0, &e->cap_win, (int)nwin + 1, sizeof(int));
  if (cap != e->cap_win) {
    e->win_len = cwm_xrealloc(e->win_len, (size_t)e->cap_win * sizeof(int));
    e->win_att = cwm_xrealloc(e->win_att, (size_t)e->cap_win * sizeof(size_t));
  }
  cap = e->cap_text;
  e->text_row0 = grow(e->text_row0, &e->cap_text, batch + 1, sizeof(int));
  if (cap != e->cap_text) e->text_rows = cwm_xrealloc(e->text_rows, (size_t)e->cap_text * sizeof(int));
  cap = e->cap_rows;
  e->row_id = grow(e->row_id, &e->cap_rows, (int)N + 1, sizeof(int));
  if (cap != e->cap_rows) e->row_pos = cwm_xrealloc(e->row_pos, (size_t)e->cap_rows * sizeof(int));

  int w = 0, r = 0;
  size_t att = 0;
  for (int b = 0; b < batch; b++) {
    int L = lens[b];
    e->text_row0[b] = r;
    for (int start = 0; start < L; start += stride) {
      int len = L - start < W ? L - start : W;
      e->win_row0[w] = r;
      e->win_len[w] = len;
      e->win_att[w] = att;
      att += (size_t)H * len * len;
      for (int k = 0; k < len; k++, r++) {
        e->row_id[r] = ids[b][start + k];
        e->row_pos[r] = k;
      }
      w++;
      if (start + W >= L) break;
    }
    e->text_rows[b] = r - e->text_row0[b];
  }
  e->batch = batch;
  e->nwin = w;
  e->N = r;
  e->win_att[w] = att; /* total */
  return CWM_OK;
}

/* ---- Forward ------------------------------------------------------------------------------- */

static float *W_(cwm_encoder *e, int i) { return e->ps.p[i].w; }
static float *G_(cwm_encoder *e, int i) { return e->ps.p[i].g; }

/* rows [r0, r1) of the first residual stream: token + position embedding */
static void embed_part(void *ctx, int r0, int r1, int part) {
  cwm_encoder *e = ctx;
  int D = e->c.width;
  const float *tok = W_(e, e->tok), *pos = W_(e, e->pos);
  for (int r = r0; r < r1; r++) {
    const float *a = tok + (size_t)e->row_id[r] * D, *p = pos + (size_t)e->row_pos[r] * D;
    float *o = e->la[0].res + (size_t)r * D;
    for (int j = 0; j < D; j++) o[j] = a[j] + p[j];
  }
}

/* Attention of (window, head) pairs [p0, p1) of one layer; pair p is window p / H, head p % H. */
typedef struct {
  cwm_encoder *e;
  layer_act *a;
  float *dqkv, *dao;
} att_job;

static long att_work(const cwm_encoder *e) {
  return (long)(e->win_att[e->nwin] / e->c.heads) * 4 * e->c.width; /* sum T^2 * 2 products */
}

/* attention of (window, head) pairs p0..p1: forward, or backward when the job has gradients */
static void att_part(void *ctx, int p0, int p1, int part) {
  const att_job *j = ctx;
  const cwm_encoder *e = j->e;
  int D = e->c.width, H = e->c.heads;
  float *scratch = e->scratch + (size_t)part * e->scratch_per;
  for (int p = p0; p < p1; p++) {
    int w = p / H, h = p % H, T = e->win_len[w];
    size_t r0 = (size_t)e->win_row0[w];
    float *att = j->a->att + e->win_att[w] + (size_t)h * T * T;
    if (j->dqkv)
      cwm_attention_head_backward(j->dqkv + r0 * 3 * D, j->dao + r0 * D, j->a->qkv + r0 * 3 * D, att, NULL, T, D,
                                  H, h, scratch);
    else
      cwm_attention_head_forward(j->a->ao + r0 * D, att, j->a->qkv + r0 * 3 * D, NULL, T, D, H, h, scratch);
  }
}

int cwm_encoder_forward(cwm_encoder *e, const int *const *ids, const int *lens, int batch,
                        float *out, int keep_for_backward, cwm_err *err) {
  e->kept = 0;
  if (batch < 0) return cwm_fail(err, CWM_EUSAGE, "encoder: batch %d", batch);
  int rc = plan(e, ids, lens, batch, err);
  if (rc) return rc;
  int D = e->c.width, F = e->c.ff, H = e->c.heads, N = e->N, nwin = e->nwin;
  int keep = keep_for_backward != 0;
  size_t need = place_acts(e, NULL, (size_t)N, e->win_att[nwin], keep);
  grow_floats(&e->act, &e->cap_act, need);
  place_acts(e, e->act, (size_t)N, e->win_att[nwin], keep);

  e->scratch_per = cwm_attention_scratch(e->c.window, D, H);
  grow_floats(&e->scratch, &e->cap_scratch, (size_t)cwm_nn_threads() * e->scratch_per);
  cwm_parallel_for(N, 2L * N * D, embed_part, e);

  for (int l = 0; l < e->c.layers; l++) {
    layer_ix *ix = &e->L[l];
    layer_act *a = &e->la[l];
    float *next = l + 1 < e->c.layers ? e->la[l + 1].res : e->resL;
    cwm_layernorm_forward(a->ln1, a->m1, a->r1, a->res, W_(e, ix->ln1g), W_(e, ix->ln1b), N, D);
    cwm_linear_forward(a->qkv, a->ln1, W_(e, ix->qkvw), W_(e, ix->qkvb), N, D, 3 * D, 0);
    att_job aj = {e, a, NULL, NULL};
    cwm_parallel_for(nwin * H, att_work(e), att_part, &aj);
    if (a->mid != a->res) memcpy(a->mid, a->res, (size_t)N * D * sizeof(float));
    cwm_linear_forward(a->mid, a->ao, W_(e, ix->projw), W_(e, ix->projb), N, D, D, 1);
    cwm_layernorm_forward(a->ln2, a->m2, a->r2, a->mid, W_(e, ix->ln2g), W_(e, ix->ln2b), N, D);
    cwm_linear_forward(a->h, a->ln2, W_(e, ix->fcw), W_(e, ix->fcb), N, D, F, 0);
    cwm_gelu_forward(a->g, a->h, (size_t)N * F);
    if (next != a->mid) memcpy(next, a->mid, (size_t)N * D * sizeof(float));
    cwm_linear_forward(next, a->g, W_(e, ix->fc2w), W_(e, ix->fc2b), N, F, D, 1);
  }
  cwm_layernorm_forward(e->lnf, e->mf, e->rf, e->resL, W_(e, e->lnfg), W_(e, e->lnfb), N, D);
  for (int b = 0; b < batch; b++)
    cwm_meanpool_forward(out + (size_t)b * D, e->lnf + (size_t)e->text_row0[b] * D, NULL,
                         e->text_rows[b], D);
  e->kept = keep;
  return CWM_OK;
}

/* ---- Backward ------------------------------------------------------------------------------ */

int cwm_encoder_backward(cwm_encoder *e, const float *dout, cwm_err *err) {
  if (!e->kept)
    return cwm_fail(err, CWM_EUSAGE,
                    "encoder: backward needs a forward with keep_for_backward just before it");
  int D = e->c.width, F = e->c.ff, H = e->c.heads, N = e->N, nwin = e->nwin;
  size_t ND = (size_t)N * D, NF = (size_t)N * F;
  grow_floats(&e->grad, &e->cap_grad, 3 * ND + 3 * ND + 2 * NF + 1);
  float *dres = e->grad, *dln = dres + ND, *dao = dln + ND, *dqkv = dao + ND;
  float *dg = dqkv + 3 * ND, *dh = dg + NF;
  grow_floats(&e->scratch, &e->cap_scratch, (size_t)cwm_nn_threads() * e->scratch_per);

  memset(dln, 0, ND * sizeof(float));
  for (int b = 0; b < e->batch; b++)
    cwm_meanpool_backward(dln + (size_t)e->text_row0[b] * D, dout + (size_t)b * D, NULL,
                          e->text_rows[b], D);
  memset(dres, 0, ND * sizeof(float));
  cwm_layernorm_backward(dres, G_(e, e->lnfg), G_(e, e->lnfb), dln, e->resL, e->mf, e->rf,
                         W_(e, e->lnfg), N, D);

  for (int l = e->c.layers - 1; l >= 0; l--) {
    layer_ix *ix = &e->L[l];
    layer_act *a = &e->la[l];
    /* next = mid + proj(gelu(fc(ln2(mid)))): dres is d(next) and becomes d(mid) */
    memset(dg, 0, NF * sizeof(float));
    cwm_linear_backward(dg, G_(e, ix->fc2w), G_(e, ix->fc2b), dres, a->g, W_(e, ix->fc2w), N, F, D);
    memset(dh, 0, NF * sizeof(float));
    cwm_gelu_backward(dh, a->h, dg, NF);
    memset(dln, 0, ND * sizeof(float));
    cwm_linear_backward(dln, G_(e, ix->fcw), G_(e, ix->fcb), dh, a->ln2, W_(e, ix->fcw), N, D, F);
    cwm_layernorm_backward(dres, G_(e, ix->ln2g), G_(e, ix->ln2b), dln, a->mid, a->m2, a->r2,
                           W_(e, ix->ln2g), N, D);
    /* mid = res + proj(attn(qkv(ln1(res)))): dres becomes d(res) */
    memset(dao, 0, ND * sizeof(float));
    cwm_linear_backward(dao, G_(e, ix->projw), G_(e, ix->projb), dres, a->ao, W_(e, ix->projw), N,
                        D, D);
    memset(dqkv, 0, 3 * ND * sizeof(float));
    att_job aj = {e, a, dqkv, dao};
    cwm_parallel_for(nwin * H, 2 * att_work(e), att_part, &aj);
    memset(dln, 0, ND * sizeof(float));
    cwm_linear_backward(dln, G_(e, ix->qkvw), G_(e, ix->qkvb), dqkv, a->ln1, W_(e, ix->qkvw), N,
                        D, 3 * D);
    cwm_layernorm_backward(dres, G_(e, ix->ln1g), G_(e, ix->ln1b), dln, a->res, a->m1, a->r1,
                           W_(e, ix->ln1g), N, D);
  }
  cwm_embedding_backward(G_(e, e->tok), dres, e->row_id, N, D);
  cwm_embedding_backward(G_(e, e->pos), dres, e->row_pos, N, D);
  return CWM_OK;
}
