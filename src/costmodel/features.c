/* features.c: Ansor's 164 per-store features (TVM auto_scheduler/feature.cc), computed from the
 * store list of cwm_lower_stores instead of TVM's lowered IR. One row per buffer written, every
 * value through slog(x) = sign(x)*log2(|x|+1) except the one-hot entries, as in Ansor.
 *
 * Where our store information differs from TVM's IR, the approximations are:
 *  - Op counts. float_mad is 0 (Ansor never counts it either); float_other_func, int_mad,
 *    int_divmod, int_math/other_func are 0. Ansor counts the integer arithmetic of the load
 *    indices; our accesses carry flattened strides only, so int_addsub adds (moving loops - 1)
 *    and int_mul the moving loops with |stride| > 1 for every read, plus the body's own integer
 *    ops (int_ops). Every comparison / and / or / not of the body (bool_ops) is a bool_op.
 *  - Unrolled loops are those our code generator unrolls (annotation or auto_unroll_max_step);
 *    Ansor sees only explicitly unrolled loops (the auto-unroll pass runs after extraction).
 *  - Annotation positions follow Ansor's intended GetAnnotationPosEncoding (its released code
 *    always writes kPosMixed): a loop of an enclosing stage is outer-spatial, a fused loop is
 *    mixed, otherwise inner/middle/outer among the stage's own spatial or reduce loops.
 *  - Loop identities are rebuilt from the state (attach chain + the stage's leaves, the init
 *    nest separate) and checked against the store's loop list; if they do not match, cross-store
 *    terms (serial reuse, reuse distance in bytes) use the store alone.
 *  - Strides: cwm_lower_stores reports 0 for a fused loop (its index parts are div/mod); such a
 *    loop counts as moving the access with stride 1, except for a local buffer allocated inside
 *    it. An unknown stride (-1) moves with stride 2 (Ansor's CoefficientExtractor default).
 *  - Touched region of a buffer under loops i.. (the rest fixed): min(product of the moving
 *    loops' extents, span + 1, buffer size), span = sum (extent-1)*|stride| over those loops
 *    (skipped if a stride is unknown). Ansor bounds every index dimension with an analyzer.
 *  - unique_lines divides by the contiguous run of the touched region (from the sorted strides)
 *    capped at 64 bytes, where Ansor uses the innermost fully covered dimension. lines uses the
 *    product of the invariant inner loops' extents (Ansor multiplies the innermost extent once
 *    per such loop, a known slip). Elements are 4-byte floats; cache lines are 64 bytes.
 *  - Allocation: buffers other than the workload output; a local buffer is allocated at its
 *    attach point (outer prod = the enclosing loops), other intermediates at the root.
 *  - auto_unroll_max_step: the stage's own, else the nearest enclosing stage's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/costmodel.h"

#define NF CWM_ANSOR_NFEAT
#define MAXL CWM_STORE_MAX_LOOPS
#define MAXB CWM_STORE_MAX_ACC
#define NBUF 5
#define ELEM_BYTES 4.0
#define CACHE_LINE 64.0
#define AI_N 10

enum { POS_NONE, POS_IN_SP, POS_MID_SP, POS_OUT_SP, POS_IN_RED, POS_MID_RED, POS_OUT_RED, POS_MIXED };
enum { ACC_READ, ACC_WRITE, ACC_RW };
enum { REUSE_LOOP, REUSE_SERIAL, REUSE_NONE };

static float slog(double x) { return (float)(x < 0 ? -log2(-x + 1) : log2(x + 1)); }

typedef struct {
  int tid, type, is_local;
  double elems;
  int moves[MAXL];     /* the loop moves the access */
  int known[MAXL];     /* exact stride known */
  double sval[MAXL];   /* |stride| (estimate when not known) */
  double region[MAXL + 1]; /* elements touched by loops i.. with the outer ones fixed; [L] = 1 */
  int nread_terms, nread_muls; /* index arithmetic of its reads (for int op counts) */
} buf_t;

typedef struct {
  const cwm_store *so;
  int L;
  double ext[MAXL];
  double outer_prod;
  int nbuf;
  buf_t buf[MAXB];
  int has_id;
  int id[MAXL];
  int fused[MAXL];
  int chain;           /* loops of enclosing stages (the stage's own loops start here) */
} sinfo_t;

/* ------------------------------------------------------------------ loop identities */

static int loop_id(int stage, int node, int init) { return (stage * CWM_MAX_NODES + node) * 2 + init; }

static int node_fused(const cwm_stage *st, int node) {
  return st->nodes[node].is_fuse && st->nodes[node].nsub > 1;
}

/* Loops enclosing stage p's nest (its attach chain), appended at n; returns the new count or -1. */
static int chain_loops(const cwm_state *s, int p, int *id, int *fused, int n, int depth) {
  const cwm_stage *st = &s->stages[p];
  if (st->loc != CWM_LOC_ITER) return n;
  int a = st->attach_stage;
  if (depth > CWM_MAX_STAGES || a < 0 || a >= s->nstages) return -1;
  n = chain_loops(s, a, id, fused, n, depth + 1);
  if (n < 0) return -1;
  const cwm_stage *sa = &s->stages[a];
  for (int k = 0; k < sa->niters; k++) {
    if (n >= MAXL) return -1;
    id[n] = loop_id(a, sa->iters[k], 0);
    fused[n] = node_fused(sa, sa->iters[k]);
    n++;
    if (sa->iters[k] == st->attach_node) return n;
  }
  return -1;
}

static int stage_chain_len(const cwm_state *s, int p) {
  int id[MAXL], fu[MAXL];
  return p >= 0 && p < s->nstages ? chain_loops(s, p, id, fu, 0, 0) : -1;
}

static int stage_of_tid(const cwm_state *s, int tid) {
  for (int p = 0; p < s->nstages; p++)
    if (s->stages[p].tid == tid && !cwm_stage_is_placeholder(s, p)) return p;
  return -1;
}

/* Rebuilds the identities of the store's loops, as the code generator opens them; 1 if they
 * match the store's loop list (count, annotations, reduction flags). */
static int rebuild_ids(const cwm_state *s, const cwm_store *so, int *id, int *fused, int *chain) {
  int p = so->stage;
  if (p < 0 || p >= s->nstages) return 0;
  int n = chain_loops(s, p, id, fused, 0, 0);
  if (n < 0) return 0;
  *chain = n;
  const cwm_stage *st = &s->stages[p];
  const cwm_op *b = cwm_stage_body_op(s, p);
  int first_red = -1;
  if (so->is_init && b && b->reduce != CWM_RED_NONE)
    for (int k = 0; k < st->niters; k++)
      if (st->nodes[st->iters[k]].kind == CWM_IT_REDUCE) { first_red = k; break; }
  for (int k = 0; k < st->niters; k++) {
    int node = st->iters[k];
    int init_inst = first_red >= 0 && k >= first_red;
    if (init_inst && st->nodes[node].kind != CWM_IT_SPATIAL) continue;
    if (n >= MAXL) return 0;
    id[n] = loop_id(p, node, init_inst);
    fused[n] = node_fused(st, node);
    n++;
  }
  if (n != so->nloops) return 0;
  /* check against what the generator recorded */
  for (int l = 0; l < n; l++) {
    int stg = id[l] / 2 / CWM_MAX_NODES, node = id[l] / 2 % CWM_MAX_NODES, init_inst = id[l] % 2;
    const cwm_node *nd = &s->stages[stg].nodes[node];
    int ann = nd->ann;
    if (init_inst && ann == CWM_ANN_PARALLEL) ann = CWM_ANN_NONE; /* as the generator opens it */
    if (ann != so->ann[l]) return 0;
    if ((nd->kind == CWM_IT_REDUCE) != (so->is_reduce[l] != 0)) return 0;
  }
  return 1;
}

/* ------------------------------------------------------------------ per-store analysis */

static void analyse_store(const cwm_state *s, const cwm_store *so, sinfo_t *si) {
  memset(si, 0, sizeof *si);
  si->so = so;
  si->L = so->nloops < MAXL ? so->nloops : MAXL;
  si->outer_prod = 1;
  for (int l = 0; l < si->L; l++) {
    si->ext[l] = so->extent[l] > 0 ? so->extent[l] : 1;
    si->outer_prod *= si->ext[l];
  }
  si->has_id = rebuild_ids(s, so, si->id, si->fused, &si->chain);
  if (!si->has_id) {
    memset(si->fused, 0, sizeof si->fused);
    for (int l = 0; l < MAXL; l++) si->id[l] = -1;
    si->chain = 0;
  }
  int nacc = so->nacc < MAXB ? so->nacc : MAXB;
  for (int a = 0; a < nacc; a++) {
    const cwm_access *ac = &so->acc[a];
    int is_write = a == 0 ? 1 : ac->is_write;
    buf_t *b = NULL;
    for (int k = 0; k < si->nbuf; k++)
      if (si->buf[k].tid == ac->tid) b = &si->buf[k];
    int fresh = b == NULL;
    if (fresh) {
      b = &si->buf[si->nbuf++];
      memset(b, 0, sizeof *b);
      b->tid = ac->tid;
      b->type = is_write ? ACC_WRITE : ACC_READ;
      b->is_local = ac->is_local;
      b->elems = ac->elems > 0 ? (double)ac->elems : 1;
    } else if (b->type != (is_write ? ACC_WRITE : ACC_READ)) {
      b->type = ACC_RW;
    }
    /* loops outside a local buffer's allocation never move it */
    int alloc_depth = 0;
    if (ac->is_local && si->has_id) {
      int q = stage_of_tid(s, ac->tid);
      int c = q >= 0 ? stage_chain_len(s, q) : -1;
      alloc_depth = c > 0 ? c : 0;
    }
    int terms = 0, muls = 0;
    for (int l = 0; l < si->L; l++) {
      long st = ac->stride[l];
      int mv = 0, kn = 0;
      double v = 0;
      if (st > 0 || st < -1) { mv = 1; kn = 1; v = (double)labs(st); }
      else if (st == -1) { mv = 1; v = 2; }
      else if (si->fused[l] && l >= alloc_depth) { mv = 1; v = 1; }
      if (mv) {
        terms++;
        if (v != 1) muls++;
      }
      if (!mv) continue;
      if (!b->moves[l]) {
        b->moves[l] = 1;
        b->known[l] = kn;
        b->sval[l] = v;
      } else {
        if (!kn) b->known[l] = 0;
        if (v < b->sval[l]) b->sval[l] = v;
      }
    }
    if (!is_write) {
      b->nread_terms += terms > 1 ? terms - 1 : 0;
      b->nread_muls += muls;
    }
  }
  for (int k = 0; k < si->nbuf; k++) {
    buf_t *b = &si->buf[k];
    double prod = 1, span = 0;
    int span_ok = 1;
    b->region[si->L] = 1;
    for (int i = si->L - 1; i >= 0; i--) {
      if (b->moves[i]) {
        prod *= si->ext[i];
        if (b->known[i]) span += (si->ext[i] - 1) * b->sval[i];
        else span_ok = 0;
      }
      double r = prod;
      if (span_ok && span + 1 < r) r = span + 1;
      if (r > b->elems) r = b->elems;
      b->region[i] = r;
    }
  }
}

static int store_has_loop(const sinfo_t *sk, int level, int id) {
  return sk->has_id && level < sk->L && sk->id[level] == id;
}

static const buf_t *find_buf(const sinfo_t *sk, int tid) {
  for (int k = 0; k < sk->nbuf; k++)
    if (sk->buf[k].tid == tid) return &sk->buf[k];
  return NULL;
}

/* Bytes touched under loop level i of store c by the stores seen so far that share that loop
 * (Ansor's for_touch_regions); per_entry: count one element per buffer access instead. */
static double touched_bytes(const sinfo_t *si, int c, int i, int per_entry) {
  double t = 0;
  for (int k = 0; k <= c; k++) {
    const sinfo_t *sk = &si[k];
    if (k != c && !(si[c].has_id && store_has_loop(sk, i, si[c].id[i]))) continue;
    for (int b = 0; b < sk->nbuf; b++) t += (per_entry ? 1 : sk->buf[b].region[i]) * ELEM_BYTES;
  }
  return t;
}

static void compute_reuse(const sinfo_t *si, int c, const buf_t *b, int *type, double *dis_iter,
                          double *dis_bytes, double *ct) {
  const sinfo_t *cur = &si[c];
  double di = 1, db = -1;
  for (int i = cur->L - 1; i >= 0; i--) {
    if (b->moves[i]) {
      di *= cur->ext[i];
      db = touched_bytes(si, c, i, 0);
    } else {
      if (db < 0) db = touched_bytes(si, c, i, 1);
      *type = REUSE_LOOP;
      *dis_iter = di;
      *dis_bytes = db;
      *ct = cur->ext[i];
      return;
    }
    /* serial reuse: earlier stores under the same loop access the buffer too */
    if (!cur->has_id) continue;
    int entries = 0;
    double min_touch = 0;
    for (int k = 0; k <= c; k++) {
      if (k != c && !store_has_loop(&si[k], i, cur->id[i])) continue;
      const buf_t *bk = find_buf(&si[k], b->tid);
      if (!bk) continue;
      if (entries == 0 || bk->region[i] < min_touch) min_touch = bk->region[i];
      entries++;
    }
    if (entries > 1) {
      *type = REUSE_SERIAL;
      *dis_iter = min_touch / cur->ext[i];
      *dis_bytes = touched_bytes(si, c, i, 0) / cur->ext[i];
      *ct = entries - 1;
      return;
    }
  }
  *type = REUSE_NONE;
  *dis_iter = *dis_bytes = *ct = 0;
}

/* Contiguous run (elements) of the region touched by all loops. */
static double contiguous_run(const sinfo_t *si, const buf_t *b) {
  int idx[MAXL], n = 0;
  for (int l = 0; l < si->L; l++)
    if (b->moves[l] && b->known[l]) idx[n++] = l;
  /* insertion sort by stride */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && b->sval[idx[j]] < b->sval[idx[j - 1]]; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  double run = 1;
  for (int i = 0; i < n; i++) {
    double st = b->sval[idx[i]];
    if (st > run) break;
    run += (si->ext[idx[i]] - 1) * st;
  }
  return run < b->elems ? run : b->elems;
}

typedef struct {
  int type;
  double bytes, unique_bytes, lines, unique_lines;
  int reuse_type;
  double reuse_dis_iter, reuse_dis_bytes, reuse_ct;
  double stride;
} accfeat_t;

static void access_features(const sinfo_t *si, int c, const buf_t *b, accfeat_t *f) {
  const sinfo_t *cur = &si[c];
  f->type = b->type;
  f->bytes = cur->outer_prod * ELEM_BYTES;
  if (cur->L == 0) {
    f->unique_bytes = ELEM_BYTES;
    f->stride = 0;
    f->lines = 1;
    f->unique_lines = 1;
  } else {
    f->unique_bytes = b->region[0] * ELEM_BYTES;
    double stride = 0, reduce_ratio = 1;
    int i;
    for (i = cur->L - 1; i >= 0; i--) {
      if (b->moves[i]) {
        stride = b->sval[i];
        break;
      }
      reduce_ratio *= cur->ext[i];
    }
    double frac = stride * ELEM_BYTES / CACHE_LINE;
    f->lines = cur->outer_prod / reduce_ratio * (frac < 1 ? frac : 1);
    if (f->lines < 1) f->lines = 1;
    f->stride = i == cur->L - 1 ? stride : 0;
    double run = contiguous_run(cur, b) * ELEM_BYTES;
    f->unique_lines = f->unique_bytes / (run < CACHE_LINE ? run : CACHE_LINE);
    if (f->unique_lines < 1) f->unique_lines = 1;
  }
  compute_reuse(si, c, b, &f->reuse_type, &f->reuse_dis_iter, &f->reuse_dis_bytes, &f->reuse_ct);
}

/* Annotation position of loop l (Ansor's AnnotationPosType). */
static int ann_position(const sinfo_t *si, int l) {
  const cwm_store *so = si->so;
  if (si->has_id && l < si->chain) return POS_OUT_SP;
  if (si->fused[l]) return POS_MIXED;
  int red = so->is_reduce[l] != 0;
  int first = -1, last = -1;
  for (int k = si->chain; k < si->L; k++) {
    if ((so->is_reduce[k] != 0) != red) continue;
    if (first < 0) first = k;
    last = k;
  }
  if (l == last) return red ? POS_IN_RED : POS_IN_SP;
  if (l == first) return red ? POS_OUT_RED : POS_OUT_SP;
  return red ? POS_MID_RED : POS_MID_SP;
}

static void ann_features(const sinfo_t *si, int which, float *out) {
  const cwm_store *so = si->so;
  int num = 0, inner = -1;
  double prod = 1;
  for (int l = 0; l < si->L; l++) {
    int hit = which == CWM_ANN_UNROLL ? (so->unrolled[l] || so->ann[l] == CWM_ANN_UNROLL) : so->ann[l] == which;
    if (!hit) continue;
    num++;
    prod *= si->ext[l];
    inner = l;
  }
  out[0] = slog(num);
  out[1] = slog(num ? prod : 0);
  out[2] = slog(inner >= 0 ? si->ext[inner] : 0);
  int pos = inner >= 0 ? ann_position(si, inner) : POS_NONE;
  for (int k = 0; k < 8; k++) out[3 + k] = k == pos;
}

static int effective_auto_unroll(const cwm_state *s, int p) {
  for (int depth = 0; p >= 0 && p < s->nstages && depth <= CWM_MAX_STAGES; depth++) {
    if (s->stages[p].auto_unroll) return s->stages[p].auto_unroll;
    if (s->stages[p].loc != CWM_LOC_ITER) break;
    p = s->stages[p].attach_stage;
  }
  return 0;
}

static double float_ops(const cwm_store *so) {
  return (double)so->fadd + so->fmul + so->fdiv + so->fcmp + so->fmath;
}

/* ------------------------------------------------------------------ rows */

/* Ansor's arithmetic intensity curve of a store: compute ops against bytes touched, loop by loop
 * outward, sampled at AI_N evenly spaced points of the compute. */
static void intensity_curve(const sinfo_t *cur, const cwm_store *so, float *out) {
  double cops = float_ops(so);
  if (cops > 0 && cur->L > 0) {
    double clist[MAXL], mlist[MAXL];
    int n = 0;
    for (int i = cur->L - 1; i >= 0; i--) {
      double mem = 0;
      for (int b = 0; b < cur->nbuf; b++) mem += cur->buf[b].region[i] * ELEM_BYTES;
      cops *= cur->ext[i];
      clist[n] = cops;
      mlist[n] = mem > 0 ? mem : ELEM_BYTES;
      n++;
    }
    int pt = 0;
    for (int i = 0; i < AI_N; i++) {
      double target = clist[n - 1] * (i + 1) / AI_N;
      while (pt < n - 1 && clist[pt] < target - 1e-4) pt++;
      double v;
      if (pt == 0) {
        v = clist[0] / mlist[0];
      } else {
        double base = clist[pt - 1] / mlist[pt - 1];
        double dc = clist[pt] - clist[pt - 1];
        double slope = dc > 0 ? (clist[pt] / mlist[pt] - base) / dc : 0;
        v = base + slope * (target - clist[pt - 1]);
      }
      out[i] = slog(v);
    }
  }
}

static void fill_row(const cwm_state *s, const sinfo_t *si, int last, float *row) {
  const sinfo_t *cur = &si[last];
  const cwm_store *so = cur->so;
  int tid = so->acc[0].tid;
  memset(row, 0, sizeof(float) * NF);

  /* Group 1: op counts summed over the buffer's stores, each times its outer_prod */
  double ops[16] = {0};
  for (int k = 0; k <= last; k++) {
    const cwm_store *sk = si[k].so;
    if (sk->nacc < 1 || sk->acc[0].tid != tid) continue;
    double P = si[k].outer_prod;
    double iadd = sk->int_ops, imul = 0;
    for (int b = 0; b < si[k].nbuf; b++) {
      iadd += si[k].buf[b].nread_terms;
      imul += si[k].buf[b].nread_muls;
    }
    ops[1] += P * sk->fadd;
    ops[2] += P * sk->fmul;
    ops[3] += P * sk->fdiv;
    ops[4] += P * sk->fcmp;
    ops[5] += P * sk->fmath;
    ops[8] += P * iadd;
    ops[9] += P * imul;
    ops[14] += P * sk->bool_ops;
    ops[15] += P * sk->select;
  }
  for (int k = 0; k < 16; k++) row[CWM_AF_OPS + k] = slog(ops[k]);
  ann_features(cur, CWM_ANN_VECTORIZE, row + CWM_AF_VEC);
  ann_features(cur, CWM_ANN_UNROLL, row + CWM_AF_UNROLL);
  ann_features(cur, CWM_ANN_PARALLEL, row + CWM_AF_PARALLEL);
  /* GPU entries stay 0 */

  /* Group 2: buffers sorted by (lines, bytes) descending, top 5 */
  accfeat_t af[MAXB];
  int order[MAXB];
  for (int b = 0; b < cur->nbuf; b++) {
    access_features(si, last, &cur->buf[b], &af[b]);
    order[b] = b;
  }
  for (int i = 1; i < cur->nbuf; i++)
    for (int j = i; j > 0; j--) {
      const accfeat_t *x = &af[order[j]], *y = &af[order[j - 1]];
      if (!(x->lines > y->lines || (x->lines == y->lines && x->bytes > y->bytes))) break;
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int nb = cur->nbuf < NBUF ? cur->nbuf : NBUF;
  for (int i = 0; i < nb; i++) {
    const accfeat_t *f = &af[order[i]];
    float *o = row + CWM_AF_BUF + CWM_AF_BUF_W * i;
    for (int j = 0; j < 3; j++) o[j] = j == f->type;
    o[3] = slog(f->bytes);
    o[4] = slog(f->unique_bytes);
    o[5] = slog(f->lines);
    o[6] = slog(f->unique_lines);
    for (int j = 0; j < 3; j++) o[7 + j] = j == f->reuse_type;
    o[10] = slog(f->reuse_dis_iter);
    o[11] = slog(f->reuse_dis_bytes);
    o[12] = slog(f->reuse_ct);
    double d = f->reuse_ct > 0.5 ? 1.0 / f->reuse_ct : 2.0; /* no reuse: Ansor's magic factor 2 */
    o[13] = slog(f->bytes * d);
    o[14] = slog(f->unique_bytes * d);
    o[15] = slog(f->lines * d);
    o[16] = slog(f->unique_lines * d);
    o[17] = slog(f->stride);
  }

  /* Group 3: arithmetic intensity curve (compute ops vs touched bytes, loop by loop outward) */
  intensity_curve(cur, so, row + CWM_AF_AI);

  /* Group 4: allocation (intermediate buffers only) */
  const cwm_workload *w = cwm_dag_workload(s->dag);
  if (tid != w->output) {
    int p = so->stage;
    int depth = cur->has_id ? cur->chain : -1;
    if (depth < 0) {
      int own = p >= 0 && p < s->nstages ? s->stages[p].niters : 0;
      depth = so->acc[0].is_local ? cur->L - own : 0;
      if (depth < 0) depth = 0;
    }
    if (!so->acc[0].is_local) depth = 0;
    double outer = 1;
    for (int l = 0; l < depth && l < cur->L; l++) outer *= cur->ext[l];
    double size = cur->buf[0].elems;
    row[CWM_AF_ALLOC + 0] = slog(size * ELEM_BYTES);
    row[CWM_AF_ALLOC + 1] = slog(size * outer);
    row[CWM_AF_ALLOC + 2] = slog(outer);
    row[CWM_AF_ALLOC + 3] = slog(cur->outer_prod / outer);
  }

  /* Group 5: outer scope */
  row[CWM_AF_OUTER + 0] = slog(cur->outer_prod);
  row[CWM_AF_OUTER + 1] = slog(so->nloops);
  row[CWM_AF_OUTER + 2] = slog(effective_auto_unroll(s, so->stage));
}

int cwm_ansor_features(const cwm_state *s, float **rows, int *nrows, cwm_err *err) {
  *rows = NULL;
  *nrows = 0;
  cwm_store *st = NULL;
  int n = 0;
  int rc = cwm_lower_stores(s, &st, &n, err);
  if (rc) {
    free(st);
    return rc;
  }
  if (n <= 0) {
    free(st);
    return cwm_fail(err, CWM_EINTERNAL, "the lowered program has no stores");
  }
  sinfo_t *si = cwm_xcalloc((size_t)n, sizeof *si);
  for (int k = 0; k < n; k++) analyse_store(s, &st[k], &si[k]);
  /* one row per written buffer, in order of first store; its last store gives the row */
  int *last = cwm_xmalloc(sizeof(int) * (size_t)n);
  int nb = 0;
  for (int k = 0; k < n; k++) {
    int tid = st[k].nacc > 0 ? st[k].acc[0].tid : -1 - k;
    int j = 0;
    while (j < nb && (st[last[j]].nacc > 0 ? st[last[j]].acc[0].tid : -1 - last[j]) != tid) j++;
    if (j == nb) nb++;
    last[j] = k;
  }
  float *out = cwm_xcalloc((size_t)nb * NF, sizeof(float));
  for (int j = 0; j < nb; j++) {
    float *row = out + (size_t)j * NF;
    if (st[last[j]].nacc > 0) fill_row(s, si, last[j], row);
    for (int f = 0; f < NF; f++)
      if (!isfinite(row[f])) row[f] = 0;
  }
  free(last);
  free(si);
  free(st);
  *rows = out;
  *nrows = nb;
  return CWM_OK;
}
