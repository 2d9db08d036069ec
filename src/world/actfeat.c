/* actfeat.c: the ranker's features besides the latent state: what the step list did (counts per
 * step kind, length), what the final program does in parallel, in SIMD and unrolled, and the
 * machine it runs on (cores, SIMD width, cache sizes). The column layout is in ranker.h. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/codegen.h"
#include "cwm/ranker.h"
#include "cwm/record.h"

_Static_assert(CWM_S__COUNT == CWM_ACT_LEN - CWM_ACT_KIND, "one count column per step kind");

/* ------------------------------------------------------------------ the machine */

/* "32K", "1024K", "32M", "49152" (bytes) -> KiB; <= 0 if unreadable. */
static double parse_size_kib(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0)) return -1;
  while (*end == ' ') end++;
  if (*end == 'K' || *end == 'k') return v;
  if (*end == 'M' || *end == 'm') return v * 1024;
  if (*end == 'G' || *end == 'g') return v * 1024 * 1024;
  return v / 1024;
}

static int read_line(const char *dir, int idx, const char *name, char *out, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/index%d/%s", dir, idx, name);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(out, (int)n, f) != NULL;
  fclose(f);
  if (ok) out[strcspn(out, "\r\n")] = 0;
  return ok;
}

static int simd_floats(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx")) return 8;
#endif
  return 4; /* SSE, NEON */
}

void cwm_hwinfo_read(cwm_hwinfo *hw, const char *cache_dir) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  hw->cores = n > 0 ? (int)n : 1;
  hw->vector_floats = simd_floats();
  hw->l1_kib = hw->l2_kib = hw->l3_kib = -1;
  if (!cache_dir) cache_dir = "/sys/devices/system/cpu/cpu0/cache";
  for (int i = 0; i < 16; i++) {
    char level[16], type[32], size[32];
    if (!read_line(cache_dir, i, "level", level, sizeof level) || !read_line(cache_dir, i, "type", type, sizeof type) ||
        !read_line(cache_dir, i, "size", size, sizeof size))
      continue;
    if (!strcmp(type, "Instruction")) continue;
    double kib = parse_size_kib(size);
    if (kib <= 0) continue;
    int lv = atoi(level);
    double *slot = lv == 1 ? &hw->l1_kib : lv == 2 ? &hw->l2_kib : lv == 3 ? &hw->l3_kib : NULL;
    if (slot && kib > *slot) *slot = kib;
  }
#ifdef _SC_LEVEL1_DCACHE_SIZE
  /* glibc's answers (0 where it does not know) */
  long s1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), s2 = sysconf(_SC_LEVEL2_CACHE_SIZE), s3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (hw->l1_kib <= 0 && s1 > 0) hw->l1_kib = s1 / 1024.0;
  if (hw->l2_kib <= 0 && s2 > 0) hw->l2_kib = s2 / 1024.0;
  if (hw->l3_kib <= 0 && s3 > 0) hw->l3_kib = s3 / 1024.0;
#endif
  if (hw->l1_kib <= 0) hw->l1_kib = CWM_HW_L1_KIB;
  if (hw->l2_kib <= 0) hw->l2_kib = CWM_HW_L2_KIB;
  if (hw->l3_kib <= 0) hw->l3_kib = CWM_HW_L3_KIB;
}

static cwm_hwinfo host;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static void read_host(void) { cwm_hwinfo_read(&host, NULL); }

const cwm_hwinfo *cwm_hwinfo_host(void) {
  pthread_once(&host_once, read_host);
  return &host;
}

void cwm_hwinfo_set_vector_floats(int n) {
  pthread_once(&host_once, read_host);
  host.vector_floats = n > 0 ? n : simd_floats();
}

void cwm_hwinfo_of_target(cwm_hwinfo *hw, const char *target) {
  *hw = *cwm_hwinfo_host();
  if (!target || !target[0]) return;
  char threads[32];
  if (cwm_target_string_field(target, "threads", threads, sizeof threads)) {
    int t = atoi(threads);
    if (t > 0) hw->cores = t;
  }
  /* the instruction set's vector, else the -vec= bytes of a string that names none */
  const cwm_isa *isa = cwm_target_string_isa(target);
  char vec[32];
  int bytes = isa ? isa->vec_bytes : cwm_target_string_field(target, "vec", vec, sizeof vec) ? atoi(vec) : 0;
  if (bytes >= 4) hw->vector_floats = bytes / 4;
}

/* ------------------------------------------------------------------ the row */

/* The busy fraction of `width` lanes when `extent` iterations are dealt to them in rounds. */
static double occupancy(double extent, double width) {
  if (extent <= 0 || width <= 0) return 0;
  return extent / (ceil(extent / width) * width);
}

/* CWM_ACT_REDUNDANCY, CWM_ACT_SCALAR_RED and the register-tile columns of a final state (see
 * ranker.h). */
static void work_features(const cwm_state *s, float *row) {
  cwm_work w;
  if (cwm_lower_work(s, &w) != 0) {
    row[CWM_ACT_REDUNDANCY] = row[CWM_ACT_SCALAR_RED] = NAN;
    row[CWM_ACT_TILE_ACC] = row[CWM_ACT_TILE_REUSE] = row[CWM_ACT_RED_INNER] = NAN;
    return;
  }
  row[CWM_ACT_TILE_ACC] = w.tile_acc > 0 ? (float)log2(w.tile_acc) : 0;
  row[CWM_ACT_TILE_REUSE] = w.tile_loads > 0 ? (float)(w.tile_acc / w.tile_loads) : 0;
  row[CWM_ACT_RED_INNER] = w.red_inner > 0 ? (float)log2(w.red_inner) : 0;
  row[CWM_ACT_REDUNDANCY] = w.minimal > 0 && w.execs > 0 ? (float)log2(w.execs / w.minimal) : 0;
  row[CWM_ACT_SCALAR_RED] = w.execs > 0 ? (float)(w.serial / w.execs) : 0;
}

void cwm_action_features(const cwm_step *steps, int n, const cwm_state *final, const cwm_hwinfo *hw, float *row) {
  if (!hw) hw = cwm_hwinfo_host();
  for (int i = 0; i < CWM_ACT_NFEAT; i++) row[i] = 0;
  int par_loops = 0, vec_loops = 0, unroll_loops = 0, unroll = 0, ca = 0, ci = 0;
  for (int i = 0; i < n; i++) {
    const cwm_step *st = &steps[i];
    if ((int)st->kind >= 0 && st->kind < CWM_S__COUNT) row[CWM_ACT_KIND + st->kind] += 1;
    if (st->kind == CWM_S_AN) {
      par_loops += st->a == CWM_ANN_PARALLEL;
      vec_loops += st->a == CWM_ANN_VECTORIZE;
      unroll_loops += st->a == CWM_ANN_UNROLL;
    } else if (st->kind == CWM_S_PR && st->a > unroll) {
      unroll = st->a;
    }
    ca += st->kind == CWM_S_CA;
    ci += st->kind == CWM_S_CI;
  }
  row[CWM_ACT_LEN] = (float)n;
  if (final) {
    double par_extent = 1, vec_len = 0;
    int stages = 0;
    par_loops = vec_loops = unroll_loops = unroll = ca = ci = 0;
    for (int s = 0; s < final->nstages; s++) {
      if (cwm_stage_is_placeholder(final, s)) continue;
      const cwm_stage *sg = &final->stages[s];
      stages++;
      if (sg->loc == CWM_LOC_INLINE) {
        ci++;
        continue; /* its loops do not exist */
      }
      ca += sg->loc == CWM_LOC_ITER;
      if (sg->auto_unroll > unroll) unroll = sg->auto_unroll;
      double par = 1;
      for (int k = 0; k < sg->niters; k++) {
        const cwm_node *nd = &sg->nodes[sg->iters[k]];
        if (nd->ann == CWM_ANN_PARALLEL) {
          par *= nd->extent;
          par_loops++;
        } else if (nd->ann == CWM_ANN_VECTORIZE) {
          if (nd->extent > vec_len) vec_len = nd->extent;
          vec_loops++;
        } else if (nd->ann == CWM_ANN_UNROLL) {
          unroll_loops++;
        }
      }
      if (par > par_extent) par_extent = par;
    }
    row[CWM_ACT_PAR_EXTENT] = (float)par_extent;
    row[CWM_ACT_PAR_EFF] = (float)occupancy(par_extent, hw->cores);
    row[CWM_ACT_VEC_LEN] = (float)vec_len;
    row[CWM_ACT_VEC_EFF] = (float)occupancy(vec_len, hw->vector_floats);
    row[CWM_ACT_STAGES] = (float)stages;
    work_features(final, row);
  } else {
    row[CWM_ACT_PAR_EXTENT] = row[CWM_ACT_PAR_EFF] = row[CWM_ACT_VEC_LEN] = row[CWM_ACT_VEC_EFF] = NAN;
    row[CWM_ACT_STAGES] = row[CWM_ACT_REDUNDANCY] = row[CWM_ACT_SCALAR_RED] = NAN;
    row[CWM_ACT_TILE_ACC] = row[CWM_ACT_TILE_REUSE] = row[CWM_ACT_RED_INNER] = NAN;
  }
  row[CWM_ACT_PAR_LOOPS] = (float)par_loops;
  row[CWM_ACT_VEC_LOOPS] = (float)vec_loops;
  row[CWM_ACT_UNROLL] = (float)unroll;
  row[CWM_ACT_UNROLL_LOOPS] = (float)unroll_loops;
  row[CWM_ACT_COMPUTE_AT] = (float)ca;
  row[CWM_ACT_INLINED] = (float)ci;
  row[CWM_ACT_CORES] = (float)hw->cores;
  row[CWM_ACT_VEC_WIDTH] = (float)hw->vector_floats;
  row[CWM_ACT_L1] = (float)hw->l1_kib;
  row[CWM_ACT_L2] = (float)hw->l2_kib;
  row[CWM_ACT_L3] = (float)hw->l3_kib;
}
