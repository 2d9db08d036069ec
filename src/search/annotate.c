/* annotate.c: Ansor's initial-population rules. A sketch gets random even tile sizes, random
 * compute locations for its untiled stages, a fused parallel outer loop, an auto-unroll pragma
 * and a fused vectorized inner loop; then candidates are sampled and deduplicated. */
#include "cwm/sketch.h"
#include "cwm/codegen.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const int UNROLL_STEPS[] = {0, 16, 64, 512};
#define N_UNROLL ((int)(sizeof UNROLL_STEPS / sizeof UNROLL_STEPS[0]))

/* ------------------------------------------------------------------ tile sizes */

/* Ordered factorizations of an extent into `len` lengths (the outermost part is what remains),
 * counted per (remaining divisor, level) so that one can be drawn uniformly without listing
 * them all: some extents have hundreds of thousands. */
typedef struct {
  int nd;
  int *div;    /* divisors of the extent, ascending */
  long *count; /* count[i * (len + 1) + k]: ways to choose lengths k..len-1 out of div[i] */
  int len, max_inner;
} facs;

static int div_index(const facs *f, int v) {
  int lo = 0, hi = f->nd - 1;
  while (lo <= hi) {
    int m = (lo + hi) / 2;
    if (f->div[m] == v) return m;
    if (f->div[m] < v) lo = m + 1;
    else hi = m - 1;
  }
  return -1;
}

static long count_ways(facs *f, int i, int k) {
  long *c = &f->count[i * (f->len + 1) + k];
  if (*c >= 0) return *c;
  long n = 0;
  if (k == f->len) {
    n = 1;
  } else {
    int rem = f->div[i];
    for (int j = 0; j < f->nd && f->div[j] <= rem; j++) {
      int d = f->div[j];
      if (rem % d || (k == f->len - 1 && d > f->max_inner)) continue;
      n += count_ways(f, div_index(f, rem / d), k + 1);
      if (n > (1L << 40)) n = 1L << 40; /* only the draw's uniformity suffers past this */
    }
  }
  return *c = n;
}

/* Draws lengths[0..len) uniformly from the ordered factorizations of extent. */
static void draw_lengths(int extent, int len, int max_inner, cwm_rng *r, int *lengths) {
  facs f = {.len = len, .max_inner = max_inner};
  f.div = cwm_xmalloc(sizeof(int) * 2048);
  f.nd = cwm_divisors(extent, INT_MAX, f.div, 2046); /* ascending, for div_index */
  f.count = cwm_xmalloc(sizeof(long) * (size_t)f.nd * (size_t)(len + 1));
  for (int i = 0; i < f.nd * (len + 1); i++) f.count[i] = -1;
  int top = div_index(&f, extent);
  long total = count_ways(&f, top, 0);
  long pick = total > 0 ? (long)(cwm_rng_next(r) % (uint64_t)total) : 0;
  int rem = extent;
  for (int k = 0; k < len; k++) {
    lengths[k] = 1;
    for (int j = 0; j < f.nd && f.div[j] <= rem; j++) {
      int d = f.div[j];
      if (rem % d || (k == len - 1 && d > max_inner)) continue;
      long w = count_ways(&f, div_index(&f, rem / d), k + 1);
      if (pick < w) {
        lengths[k] = d;
        break;
      }
      pick -= w;
    }
    rem /= lengths[k];
  }
  free(f.div);
  free(f.count);
}

/* The innermost lengths the register-tile prior draws from for an axis that is not vectorized:
 * its divisors up to max_inner, and, for an axis of 16 or more with no divisor from 2 to 8 (a
 * prime such as 197, or 2 x 113), also those of 2 to 8 that pad it by at most an eighth of its
 * extent: codegen runs the register tile on the full tiles and guarded loops on the last. Without them such an axis only has 1 in the block, and the
 * block is one row of vectors (a 197 x 1001 x 389 product ran at 0.36 of oneDNN). Fills div
 * (room for 2048); returns the count. */
static int row_lengths(int extent, int max_inner, int *div) {
  int nd = cwm_divisors(extent, max_inner, div, 2040), small = 0;
  for (int i = 0; i < nd; i++) small |= div[i] >= 2 && div[i] <= 8;
  if (extent >= 16 && !small)
    for (int v = 2; v <= 8 && v <= max_inner; v++)
      if (((extent + v - 1) / v * v - extent) * 8 <= extent) div[nd++] = v;
  return nd;
}

/* Beyond Ansor: the register-tile prior. Ansor draws every tile size uniformly, so a tile whose
 * innermost level is a register block of a useful shape (a whole number of vectors on one axis
 * times a few rows on the others, 4 to 3/4 of the vector registers' worth of accumulators) is
 * rare: on a 3x3 convolution about one draw in ten thousand has the 32 x 7 block that reaches
 * oneDNN, and a thousand measurements found at best 16 x 7. For half of the multi-level tiled
 * stages this draws the innermost lengths of the stage's spatial axes that way (one axis, a
 * whole number of vectors or padded to one, gets one or two vectors; the others' product is bounded)
 * and the outer levels uniformly, and sets *vec_root to the axis to vectorize (init_vectorize
 * moves it innermost). Returns 1 when it drew, 0 when the stage keeps Ansor's draw. */
static int draw_register_tile(cwm_step *steps, const int *ids, int nids, int max_red,
                              const cwm_space_opts *o, cwm_rng *r, int *vec_root) {
  int lanes = o->max_vectorize / 2 >= 4 ? o->max_vectorize / 2 : 8;
  int regs = lanes >= 16 ? 32 : 16, lo = 4, hi = regs * 3 / 4;
  /* the axes that are a whole number of vectors, and those split with a remainder whose last
   * tile pads them by at most an eighth (a 1023-wide matrix; 77 columns at 16 lanes): codegen
   * runs the register tile on the full tiles and pads or guards the last. The padded ones are
   * candidates beside the whole ones, as a whole axis may be the wrong one to vectorize (a
   * batch of 8 read with a stride next to 77 contiguous columns). */
  int cand[CWM_MAX_ITERS], vl[CWM_MAX_ITERS], nc = 0, shortc[CWM_MAX_ITERS], ns = 0;
  for (int k = 0; k < nids; k++) {
    int e = steps[ids[k]].extent;
    vl[k] = lanes;
    if (e % lanes == 0 || (e >= 2 * lanes && ((e + lanes - 1) / lanes * lanes - e) * 8 <= e)) cand[nc++] = k;
    /* at 16 lanes, an axis that is a whole number of 8-lane vectors (56, a stride-2 output
     * of 112) gets 8-lane ones, as codegen then emits */
    else if (lanes > 8 && e % 8 == 0) vl[k] = 8, cand[nc++] = k;
    /* an axis that whole 8-lane vectors pad by at most a seventh (the 7, 14 and 28 wide
     * outputs of a depthwise convolution; 31 rows): the padded edge tile's lanes past it are
     * thrown away. Only where the reduction is a small window (every reduction axis at most
     * 7 long: a depthwise convolution's 3x3 to 7x7) or no other axis qualifies: where it runs
     * over channels (a 1x1 convolution over 64 or 256 of them) the whole-vector axis beside
     * it (the output channels, input broadcast) is the one to tile, and drawing the short axis
     * too halves how often it is drawn (ResNet-18's stride-2 1x1 layers measured 2.1x slower
     * at 64 trials). */
    else if ((e + 7) / 8 * 8 - e > 0 && ((e + 7) / 8 * 8 - e) * 7 <= e) vl[k] = 8, shortc[ns++] = k;
  }
  if (ns && (max_red <= 7 || nc == 0))
    for (int k = 0; k < ns; k++) cand[nc++] = shortc[k];
  if (nids < 2 || nc == 0 || cwm_rng_int(r, 2)) return 0;
  int a = cand[cwm_rng_int(r, nc)];
  cwm_step *va = &steps[ids[a]];
  int v = vl[a], padded = va->extent % v != 0;
  int nvec = ((padded ? va->extent > v : va->extent % (2 * v) == 0) && 2 * v <= o->max_innermost) ? 1 + cwm_rng_int(r, 2) : 1;
  int inner[CWM_MAX_ITERS], *div = cwm_xmalloc(sizeof(int) * 2048), ok = 0;
  for (int tries = 0; tries < 64 && !ok; tries++) {
    long prod = nvec;
    for (int k = 0; k < nids; k++) {
      if (k == a) continue;
      int nd = row_lengths(steps[ids[k]].extent, o->max_innermost, div);
      inner[k] = div[cwm_rng_int(r, nd)];
      prod *= inner[k];
    }
    ok = prod >= lo && prod <= hi;
  }
  free(div);
  if (!ok) return 0;
  inner[a] = nvec * v;
  for (int k = 0; k < nids; k++) {
    cwm_step *st = &steps[ids[k]];
    int outer[CWM_MAX_SPLIT];
    draw_lengths((st->extent + inner[k] - 1) / inner[k], st->n - 1, st->extent, r, outer);
    for (int l = 0; l < st->n - 1; l++) st->v[l] = outer[l];
    st->v[st->n - 1] = inner[k];
  }
  *vec_root = a;
  return 1;
}

/* What the register-tile prior drew for a stage: the spatial axis to vectorize (-1: it did
 * not draw; -2: considered, kept Ansor's draw), the tile's element count, and whether the
 * stage's reduction splits keep the whole reduction inside the tile. */
typedef struct {
  int vec_root[CWM_MAX_STAGES];
  long tile[CWM_MAX_STAGES];
  int whole_red[CWM_MAX_STAGES];
} reg_draw;

/* InitFillTileSize: fills every unknown SP of the step list and replays it, so that the FSP
 * steps follow the drawn sizes.
 *
 * Beyond Ansor: where the register-tile prior drew a stage, half the time its reduction splits
 * put the whole reduction in the inner level (Ansor bounds every innermost length by 64, so a
 * product over 389 or 512 reloads and stores its accumulators every 64 or fewer FMAs at best).
 * The tile's accumulators then stay in registers from the first FMA to the one store, as in a
 * BLAS micro-kernel; on AVX2 a 197 x 1001 x 389 product went from 7.2 to 2.7-3.7 ms with the
 * same 6 x 16 tile (report/heldout-avx2-hand.txt). */
static int fill_tile_sizes(const cwm_state *sk, const cwm_space_opts *o, cwm_rng *r,
                           reg_draw *rd, cwm_state **out, cwm_err *err) {
  cwm_step *steps = cwm_xmalloc(sizeof *steps * (size_t)(sk->nsteps ? sk->nsteps : 1));
  memcpy(steps, sk->steps, sizeof *steps * (size_t)sk->nsteps);
  int *vec_root = rd->vec_root;
  for (int p = 0; p < CWM_MAX_STAGES; p++) vec_root[p] = -1, rd->tile[p] = 0, rd->whole_red[p] = 0;
  for (int i = 0; i < sk->nsteps; i++) {
    cwm_step *st = &steps[i];
    if (st->kind != CWM_S_SP) continue;
    int unknown = 0;
    for (int k = 0; k < st->n; k++) unknown |= st->v[k] == 0;
    if (!unknown) continue;
    if (st->extent <= 0) {
      free(steps);
      return cwm_fail(err, CWM_ESTEP, "step %d: SP with unknown lengths has no extent", i);
    }
    /* the multi-level tiling of a stage: its spatial axes' SP steps, 3 lengths each (SSRSRS),
     * in axis order, taken together the first time one is met */
    if (o->register_tile && st->n == 3 && st->stage >= 0 && st->stage < CWM_MAX_STAGES &&
        vec_root[st->stage] == -1) {
      int ids[CWM_MAX_ITERS], nids = 0;
      for (int j = i; j < sk->nsteps && nids < CWM_MAX_ITERS; j++)
        if (steps[j].kind == CWM_S_SP && steps[j].stage == st->stage && steps[j].n == 3 &&
            steps[j].v[0] == 0 && steps[j].extent > 0)
          ids[nids++] = j;
      vec_root[st->stage] = -2; /* considered */
      const cwm_op *op = cwm_dag_tensor(sk->dag, sk->stages[st->stage].body_tid);
      int max_red = 0;
      for (int k = 0; op && k < op->nred; k++)
        if (op->red_extent[k] > max_red) max_red = op->red_extent[k];
      if (draw_register_tile(steps, ids, nids, max_red, o, r, &vec_root[st->stage])) {
        long t = 1;
        for (int k = 0; k < nids; k++) t *= steps[ids[k]].v[steps[ids[k]].n - 1];
        rd->tile[st->stage] = t;
        rd->whole_red[st->stage] = cwm_rng_int(r, 2);
        continue;
      }
    }
    if (st->n == 1 && st->stage >= 0 && st->stage < CWM_MAX_STAGES && rd->whole_red[st->stage] &&
        cwm_splits_reduction(sk, i)) {
      st->v[0] = st->extent;
      continue;
    }
    draw_lengths(st->extent, st->n, o->max_innermost, r, st->v);
  }
  int rc = cwm_state_replay(sk->dag, steps, sk->nsteps, out, NULL, err);
  free(steps);
  return rc;
}

/* ------------------------------------------------------------------ the other rules */

static int usable(const cwm_state *s, int p) {
  return !cwm_stage_is_placeholder(s, p) && s->stages[p].loc != CWM_LOC_INLINE;
}

static int has_reduce_iter(const cwm_state *s, int p) {
  const cwm_stage *sg = &s->stages[p];
  for (int i = 0; i < sg->niters; i++)
    if (sg->nodes[sg->iters[i]].kind != CWM_IT_SPATIAL) return 1;
  return 0;
}

/* InitChangeComputeLocation: consumers first (last stage to first), each untiled stage that
 * needs no tiling goes to root or to one of its consumer's loops. */
static int change_compute_location(cwm_state *s, cwm_rng *r, cwm_err *err) {
  for (int p = s->nstages - 1; p >= 0; p--) {
    if (!usable(s, p)) continue;
    if (cwm_stage_is_tiled(s, p) || cwm_needs_tiling(s, p)) continue;
    int target, cand[CWM_MAX_ITERS];
    int n = cwm_compute_location_candidates(s, p, &target, cand);
    int choice = cwm_rng_int(r, n + 2);
    cwm_step st;
    if (choice == 0) {
      /* As Ansor: inline only a stage that is attached at this point. The walk visits each
       * stage once and sketches attach only tiled stages, so this keeps the stage in place;
       * kept for the draw sequence and in case sketches change. */
      if (has_reduce_iter(s, p) || s->stages[p].loc != CWM_LOC_ITER) continue;
      st = cwm_step_of(CWM_S_CI, p);
    } else if (choice == 1) {
      if (s->stages[p].loc == CWM_LOC_ROOT) continue; /* a CR here would change nothing */
      st = cwm_step_of(CWM_S_CR, p);
    } else {
      st = cwm_step_of(CWM_S_CA, p);
      st.a = target;
      st.b = cand[choice - 2];
    }
    if (cwm_state_apply(s, &st, err)) return err ? err->code : CWM_ESTEP;
  }
  return 0;
}

/* Ansor's annotate_parallel: fuse outer spatial loops until the product exceeds 16 * cores or a
 * loop with attached stages is reached; through an extent-1 attach point it recurses into the
 * attached stages and the rest of this one. */
static int annotate_parallel(cwm_state *s, int p, int off, int cores, int depth, cwm_err *err) {
  if (depth > CWM_MAX_STAGES) return 0;
  const cwm_stage *sg = &s->stages[p];
  long degree = 1;
  int ids[CWM_MAX_ITERS], n = 0, i;
  for (i = off; i < sg->niters; i++) {
    const cwm_node *nd = &sg->nodes[sg->iters[i]];
    if (nd->kind != CWM_IT_SPATIAL || nd->ann != CWM_ANN_NONE) break;
    ids[n++] = i;
    degree *= nd->extent;
    if (degree > 16L * cores) break;
    if (cwm_attached_count(s, p, i)) break;
  }
  if (degree == 1 && i < sg->niters && cwm_attached_count(s, p, i)) {
    int node = sg->iters[i], att[CWM_MAX_STAGES], na = 0;
    for (int q = 0; q < s->nstages; q++)
      if (s->stages[q].loc == CWM_LOC_ITER && s->stages[q].attach_stage == p &&
          s->stages[q].attach_node == node)
        att[na++] = q;
    for (int k = 0; k < na; k++)
      if (annotate_parallel(s, att[k], 0, cores, depth + 1, err)) return err ? err->code : CWM_ESTEP;
    if (annotate_parallel(s, p, i + 1, cores, depth + 1, err)) return err ? err->code : CWM_ESTEP;
  }
  if (n == 0) return 0;
  if (n > 1) {
    cwm_step fu = cwm_step_of(CWM_S_FU, p);
    for (int k = 0; k < n; k++) fu.v[fu.n++] = ids[k];
    if (cwm_state_apply(s, &fu, err)) return err ? err->code : CWM_ESTEP;
  }
  cwm_step an = cwm_step_of(CWM_S_AN, p);
  an.iter = ids[0];
  an.a = CWM_ANN_PARALLEL;
  return cwm_state_apply(s, &an, err) ? (err ? err->code : CWM_ESTEP) : 0;
}

static int init_parallel(cwm_state *s, const cwm_space_opts *o, cwm_err *err) {
  for (int p = 0; p < s->nstages; p++)
    if (usable(s, p) && s->stages[p].loc == CWM_LOC_ROOT)
      if (annotate_parallel(s, p, 0, o->cores, 0, err)) return err ? err->code : CWM_ESTEP;
  return 0;
}

/* InitUnroll: every stage with a reduction loop gets auto_unroll_max_step from the CPU set.
 * Beyond Ansor: where the register-tile prior drew the stage, from the steps that unroll its
 * tile (codegen keeps a tile in registers only when asked to unroll all of it), so that the
 * prior's draw is not thrown away three times in four. */
static int init_unroll(cwm_state *s, const reg_draw *rd, cwm_rng *r, cwm_err *err) {
  for (int p = 0; p < s->nstages; p++) {
    if (!usable(s, p) || !has_reduce_iter(s, p)) continue;
    cwm_step pr = cwm_step_of(CWM_S_PR, p);
    pr.iter = 0;
    int lo = 0;
    long t = p < CWM_MAX_STAGES ? rd->tile[p] : 0;
    while (t > 0 && lo < N_UNROLL - 1 && UNROLL_STEPS[lo] < t) lo++;
    pr.a = UNROLL_STEPS[lo + cwm_rng_int(r, N_UNROLL - lo)];
    if (cwm_state_apply(s, &pr, err)) return err ? err->code : CWM_ESTEP;
  }
  return 0;
}

/* Beyond Ansor: in a tiled stage, one time in three, a spatial loop of the innermost tile level
 * other than the last (extent > 1) is moved innermost, so that it is the one vectorized. A
 * convolution in NCHW then vectorizes its output channels (the weight rewritten contiguous, the
 * input broadcast, the register tile storing with a stride) where its last axis is short (7, 14)
 * or read with a stride (stride 2). */
/* want_root >= 0: the register-tile prior drew this stage's tiles for that axis, which is then
 * always the one moved innermost (if it is not already). */
static int vectorize_reorder(cwm_state *s, int p, int want_root, cwm_rng *r, cwm_err *err) {
  const cwm_stage *sg = &s->stages[p];
  int cand[CWM_MAX_ITERS], nc = 0;
  for (int it = sg->niters - 1; it >= 0; it--) {
    const cwm_node *nd = &sg->nodes[sg->iters[it]];
    if (nd->kind != CWM_IT_SPATIAL || nd->ann != CWM_ANN_NONE || cwm_attached_count(s, p, it)) break;
    if (want_root >= 0) {
      if (cwm_node_root(sg, sg->iters[it]) != want_root) continue;
      if (it == sg->niters - 1) return 0;
      cand[nc++] = it;
      break;
    }
    if (it < sg->niters - 1 && nd->extent > 1) cand[nc++] = it;
  }
  if (!nc || (want_root < 0 && cwm_rng_int(r, 3))) return 0;
  int mv = cand[want_root >= 0 ? 0 : cwm_rng_int(r, nc)];
  cwm_step re = cwm_step_of(CWM_S_RE, p);
  for (int i = 0; i < sg->niters; i++)
    if (i != mv) re.v[re.n++] = i;
  re.v[re.n++] = mv;
  return cwm_state_apply(s, &re, err) ? (err ? err->code : CWM_ESTEP) : 0;
}

/* InitVectorization: count the fusable spatial loops from the innermost outwards (product
 * <= max_vectorize; only one if the stage is tiled, as its inner two loops are not contiguous),
 * then fuse a random number of them and vectorize. */
static int init_vectorize(cwm_state *s, const cwm_space_opts *o, const int *vec_root, cwm_rng *r,
                          cwm_err *err) {
  for (int p = 0; p < s->nstages; p++) {
    if (!usable(s, p)) continue;
    int want = p < CWM_MAX_STAGES ? vec_root[p] : -1;
    if (cwm_stage_is_tiled(s, p) && (o->vectorize_reorder || want >= 0) &&
        vectorize_reorder(s, p, want, r, err))
      return err ? err->code : CWM_ESTEP;
    const cwm_stage *sg = &s->stages[p];
    int tiled = cwm_stage_is_tiled(s, p), num = 0;
    long prod = 1;
    while (num < sg->niters) {
      int it = sg->niters - 1 - num;
      if (cwm_attached_count(s, p, it)) break;
      const cwm_node *nd = &sg->nodes[sg->iters[it]];
      if (nd->kind != CWM_IT_SPATIAL || nd->ann != CWM_ANN_NONE) break;
      if (tiled && num != 0) break;
      prod *= nd->extent;
      if (prod > o->max_vectorize) break;
      num++;
    }
    if (num > 1) num = 1 + cwm_rng_int(r, num - 1);
    if (num == 0) continue;
    int first = sg->niters - num;
    if (num > 1) {
      cwm_step fu = cwm_step_of(CWM_S_FU, p);
      for (int k = first; k < sg->niters; k++) fu.v[fu.n++] = k;
      if (cwm_state_apply(s, &fu, err)) return err ? err->code : CWM_ESTEP;
    }
    cwm_step an = cwm_step_of(CWM_S_AN, p);
    an.iter = first;
    an.a = CWM_ANN_VECTORIZE;
    if (cwm_state_apply(s, &an, err)) return err ? err->code : CWM_ESTEP;
  }
  return 0;
}

int cwm_annotate(const cwm_state *sketch, const cwm_space_opts *o, cwm_rng *r, cwm_state **out,
                 cwm_err *err) {
  cwm_space_opts def;
  o = cwm_space_opts_or_default(o, &def);
  *out = NULL;
  cwm_state *s = NULL;
  reg_draw rd;
  int rc = fill_tile_sizes(sketch, o, r, &rd, &s, err);
  if (rc) return rc;
  if ((rc = change_compute_location(s, r, err)) || (rc = init_parallel(s, o, err)) ||
      (rc = init_unroll(s, &rd, r, err)) || (rc = init_vectorize(s, o, rd.vec_root, r, err))) {
    cwm_state_free(s);
    return rc;
  }
  if (cwm_has_nested_parallel(s)) {
    cwm_state_free(s);
    return cwm_fail(err, CWM_ESTEP, "annotation made nested parallel loops");
  }
  if (!cwm_state_is_complete(s)) {
    cwm_state_free(s);
    return cwm_fail(err, CWM_EINTERNAL, "annotation left unknown split lengths");
  }
  *out = s;
  return 0;
}

/* ------------------------------------------------------------------ initial population */

int cwm_sample_initial(const cwm_dag *d, const cwm_space_opts *o, cwm_rng *r, int n,
                       cwm_state ***out, int *nout, cwm_err *err) {
  *out = NULL;
  *nout = 0;
  cwm_state **sk = NULL;
  int nsk = 0;
  int rc = cwm_sketches(d, &sk, &nsk, err);
  if (rc) return rc;
  if (nsk == 0) {
    cwm_states_free(sk, nsk);
    return cwm_fail(err, CWM_ENOSCHED, "the search cannot schedule this workload: it has no sketch");
  }
  cwm_state **v = cwm_xcalloc((size_t)(n > 0 ? n : 1), sizeof *v);
  char **text = cwm_xcalloc((size_t)(n > 0 ? n : 1), sizeof *text);
  uint64_t *hash = cwm_xcalloc((size_t)(n > 0 ? n : 1), sizeof *hash);
  int kept = 0, misses = 0;
  cwm_err last = {0};
  /* Ansor gives up after rounds that find nothing new; here a run of fruitless draws ends it,
   * long enough that a space with fewer than n programs is exhausted in practice */
  int max_misses = 50 + 20 * n;
  while (kept < n && misses < max_misses) {
    cwm_state *s = NULL;
    if (cwm_annotate(sk[cwm_rng_int(r, nsk)], o, r, &s, &last)) {
      misses++;
      continue;
    }
    char *t = cwm_state_print(s);
    uint64_t h = cwm_hash64(t, strlen(t));
    int dup = 0;
    for (int i = 0; i < kept && !dup; i++) dup = hash[i] == h && !strcmp(text[i], t);
    if (dup) {
      misses++;
      free(t);
      cwm_state_free(s);
      continue;
    }
    misses = 0;
    v[kept] = s;
    text[kept] = t;
    hash[kept] = h;
    kept++;
  }
  for (int i = 0; i < kept; i++) free(text[i]);
  free(text);
  free(hash);
  cwm_states_free(sk, nsk);
  if (kept == 0 && n > 0) {
    free(v);
    return cwm_fail(err, CWM_ENOSCHED, "the search cannot schedule this workload: no valid candidate in %d draws "
                    "(last: %s)", max_misses, last.msg);
  }
  *out = v;
  *nout = kept;
  return 0;
}
