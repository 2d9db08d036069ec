/* test_golden.c: the code generator's output pinned byte for byte. For committed step lists of
 * every op of the suite (small shapes), the printed state, the generated C (8- and 16-lane tiles,
 * and the reference kernel of the initial state), the kernel's argument table and the analyses
 * (cwm_lower_stores, cwm_lower_work) must equal tests/golden/<case>.txt. Refactors of
 * src/codegen must leave them unchanged; a deliberate change regenerates them with
 * CWM_GOLDEN_WRITE=1 (the step lists stored in the files are kept; delete a file to redraw it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cwm/codegen.h"
#include "cwm/sketch.h"
#include "testlib.h"

/* Where a case's step list comes from when its file does not exist yet: the initial state, a
 * hand-made list (what the sampler never draws: explicit unroll, a register tile at an uneven
 * edge, guards taken as loop bounds), or cwm_sample_initial's first state from a seed. After
 * that the file is the source: sampling may change without moving the golden lists. */
typedef struct {
  const char *name, *spec;
  int seed;          /* > 0: sampled */
  const char *steps; /* hand-made, or NULL */
} gcase;

#define DENSE "dense M=16 N=48 K=32 bias=1 act=gelu"
#define BMM "batch_matmul B=2 M=16 N=32 K=16"
#define CONV "conv2d C=8 H=10 W=10 K=16 R=3 S=3 stride=2 pad=1 bias=1 act=relu"
#define DWCONV "dwconv2d C=16 H=12 W=12 R=3 S=3 stride=1 pad=1"
#define SOFTMAX "softmax B=2 M=4 N=40"
#define LAYERNORM "layernorm M=4 N=64"
#define MATMUL "matmul M=31 N=33 K=17"

static const gcase CASES[] = {
    {"dense_init", DENSE, 0, NULL},
    {"dense_s2", DENSE, 2, NULL},
    {"dense_s3", DENSE, 3, NULL},
    {"dense_s9", DENSE, 9, NULL},
    {"bmm_init", BMM, 0, NULL},
    {"bmm_s5", BMM, 5, NULL},
    {"bmm_s6", BMM, 6, NULL},
    {"bmm_s9", BMM, 9, NULL},
    {"conv_init", CONV, 0, NULL},
    {"conv_s1", CONV, 1, NULL},
    {"conv_s2", CONV, 2, NULL},
    {"conv_s9", CONV, 9, NULL},
    {"dwconv_init", DWCONV, 0, NULL},
    {"dwconv_s1", DWCONV, 1, NULL},
    {"dwconv_s5", DWCONV, 5, NULL},
    {"softmax_init", SOFTMAX, 0, NULL},
    {"softmax_s1", SOFTMAX, 1, NULL},
    {"softmax_s4", SOFTMAX, 4, NULL},
    {"softmax_s6", SOFTMAX, 6, NULL},
    {"layernorm_init", LAYERNORM, 0, NULL},
    {"layernorm_s1", LAYERNORM, 1, NULL},
    {"layernorm_s3", LAYERNORM, 3, NULL},
    {"matmul_init", MATMUL, 0, NULL},
    {"matmul_s1", MATMUL, 1, NULL},
    {"matmul_s4", MATMUL, 4, NULL},
    /* a 2 x 16 register tile, the rows unrolled by annotation, over edges that 2 and 16 do not
     * divide: the tile where it lies inside, the guarded loops at the edge */
    {"matmul_tile_edge", MATMUL, 0,
     "[[\"SP\",2,0,31,[2],1],[\"SP\",2,2,33,[16],1],[\"RE\",2,[0,2,4,1,3]],[\"AN\",2,0,3],"
     "[\"AN\",2,3,1],[\"AN\",2,4,2]]"},
    /* guards that become loop bounds (test_codegen's uneven_bounds) */
    {"matmul_bounds", "matmul M=15 N=17 K=13", 0,
     "[[\"CHW\",2,\"local\"],[\"SP\",2,0,15,[1,4,1],1],[\"SP\",2,4,17,[2,2,8],1],[\"SP\",2,8,13,[4],1],"
     "[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",3,0,1,1],[\"FSP\",3,2,2,1],[\"RE\",3,[0,2,1,3]],"
     "[\"CA\",2,3,1],[\"FU\",3,[0,1]],[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$64\"],[\"AN\",2,9,2]]"},
    /* a 4 x 16 register tile of a cache-write stage over 37 x 133: the edge tiles run whole,
     * their row reads clamped, the packed columns zero-padded; with the reduction split outside
     * the tile, the local buffer is zeroed first */
    {"matmul_padded_edge", "matmul M=37 N=133 K=12", 0,
     "[[\"CHW\",2,\"local\"],[\"SP\",2,0,37,[1,1,4],1],[\"SP\",2,4,133,[1,1,16],1],[\"SP\",2,8,12,[12],1],"
     "[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",3,0,1,2],[\"FSP\",3,3,2,2],[\"RE\",3,[0,3,1,4,2,5]],"
     "[\"CA\",2,3,3],[\"FU\",3,[0]],[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$512\"],[\"AN\",2,9,2],"
     "[\"AN\",3,5,2]]"},
    {"matmul_padded_split", "matmul M=37 N=133 K=12", 0,
     "[[\"CHW\",2,\"local\"],[\"SP\",2,0,37,[1,1,4],1],[\"SP\",2,4,133,[1,1,16],1],[\"SP\",2,8,12,[3],1],"
     "[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",3,0,1,2],[\"FSP\",3,3,2,2],[\"RE\",3,[0,3,1,4,2,5]],"
     "[\"CA\",2,3,3],[\"FU\",3,[0]],[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$512\"],[\"AN\",2,9,2],"
     "[\"AN\",3,5,2]]"},
    {"dense_bounds", "dense M=9 N=20 K=11 bias=1 act=relu", 0,
     "[[\"SP\",3,0,9,[4],1],[\"SP\",3,2,20,[8],1],[\"SP\",3,4,11,[3],1],[\"RE\",3,[0,2,4,1,5,3]],"
     "[\"AN\",3,5,2]]"},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* What the whole set must exercise, so that it keeps meaning something when lists are redrawn. */
enum { F_CA, F_CHW, F_RF, F_FU, F_PR, F_PAR, F_VEC, F_UNROLL, F_PACKED, F_RUNTIME_PACK, F_TR8, F_TILE8,
       F_TILE16, F_TILE_EDGE, F_PADDED_EDGE, F_PADDED_ZERO, F_LOOP_BOUND, F__COUNT };
static const char *FEATURE[F__COUNT] = {"compute_at", "cache_write", "rfactor", "fuse", "auto_unroll pragma",
                                        "parallel", "vectorize", "unroll", "packed weight", "runtime pack",
                                        "8x8 transpose", "8-lane register tile", "16-lane register tile",
                                        "register tile at an uneven edge", "padded edge tile",
                                        "zeroed buffer of a padded edge tile", "guard as loop bound"};
static int seen[F__COUNT];

static const char *golden_dir(void) {
  static char dir[4096];
  const char *src = getenv("CWM_SOURCE_DIR");
  struct stat sb;
  if (src) snprintf(dir, sizeof dir, "%s/tests/golden", src);
  else if (stat("tests/golden", &sb) == 0 || stat("tests", &sb) == 0) snprintf(dir, sizeof dir, "tests/golden");
  else snprintf(dir, sizeof dir, "../tests/golden");
  return dir;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  cwm_buf b;
  cwm_buf_init(&b);
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) cwm_buf_append(&b, chunk, n);
  fclose(f);
  return b.s ? cwm_buf_take(&b) : cwm_xstrdup("");
}

/* The line after "==== <section>" in text, owned; NULL when absent. */
static char *section_line(const char *text, const char *section) {
  char mark[64];
  snprintf(mark, sizeof mark, "==== %s\n", section);
  const char *p = strstr(text, mark);
  if (!p) return NULL;
  p += strlen(mark);
  size_t n = strcspn(p, "\n");
  char *out = cwm_xmalloc(n + 1);
  memcpy(out, p, n);
  out[n] = 0;
  return out;
}

/* Appends text with the version in the kernel's header comment replaced, so that a release does
 * not move every golden file. */
static void put_versionless(cwm_buf *o, const char *text) {
  const char *tag = "(generated by cwm " CWM_VERSION ")";
  for (const char *p = text; *p;) {
    const char *q = strstr(p, tag);
    if (!q) {
      cwm_buf_puts(o, p);
      break;
    }
    cwm_buf_append(o, p, (size_t)(q - p));
    cwm_buf_puts(o, "(generated by cwm VERSION)");
    p = q + strlen(tag);
  }
}

static void put_kernel(cwm_buf *o, const cwm_state *s, const char *title, int reference, int lanes) {
  cwm_codegen_opts co = {.reference = reference, .vec_lanes = lanes};
  cwm_kernel k;
  cwm_err e = {0};
  cwm_buf_printf(o, "==== %s\n", title);
  if (cwm_codegen(s, &co, &k, &e)) {
    cwm_buf_printf(o, "error %d: %s\n", (int)e.code, e.msg);
    return;
  }
  cwm_buf_printf(o, "fn %s entry %s nargs %d red_len %ld npacked %d pack_entry %s\n", k.fn, k.entry, k.nargs,
                 k.red_len, k.npacked, k.pack_entry);
  for (int a = 0; a < k.nargs; a++)
    cwm_buf_printf(o, "arg %d %s tid %d len %ld src_len %ld pack_fn %s layout %s\n", a, k.arg_name[a], k.arg_tid[a],
                   k.arg_len[a], k.src_len[a], k.pack_fn[a], k.layout[a]);
  put_versionless(o, k.body);
  if (!reference) {
    seen[F_PACKED] |= k.npacked > 0;
    seen[F_RUNTIME_PACK] |= strstr(k.body, "copied into the layout the loops walk") != NULL;
    seen[F_TR8] |= strstr(k.body, "cwm_tr8(r__);") != NULL;
    seen[F_TILE8] |= strstr(k.body, "cwm_v8f acc__0") != NULL;
    seen[F_TILE16] |= strstr(k.body, "cwm_v16f acc__0") != NULL;
    seen[F_TILE_EDGE] |= strstr(k.body, "lies inside the guards") != NULL;
    seen[F_PADDED_EDGE] |= strstr(k.body, "padded at the edge */") != NULL;
    seen[F_PADDED_ZERO] |= strstr(k.body, "past the tensor's edge */") != NULL;
    seen[F_LOOP_BOUND] |= strstr(k.body, "_n0 = ") != NULL;
  }
  cwm_kernel_free(&k);
}

static void put_analyses(cwm_buf *o, const cwm_state *s) {
  cwm_work w;
  int rc = cwm_lower_work(s, &w);
  cwm_buf_printf(o, "==== work\nrc %d execs %.17g minimal %.17g serial %.17g tile_acc %.17g tile_loads %.17g "
                    "red_inner %.17g\n",
                 rc, w.execs, w.minimal, w.serial, w.tile_acc, w.tile_loads, w.red_inner);
  cwm_store *st = NULL;
  int n = 0;
  cwm_err e = {0};
  cwm_buf_puts(o, "==== stores\n");
  if (cwm_lower_stores(s, &st, &n, &e)) {
    cwm_buf_printf(o, "error %d: %s\n", (int)e.code, e.msg);
    return;
  }
  for (int i = 0; i < n; i++) {
    const cwm_store *x = &st[i];
    cwm_buf_printf(o, "stage %d tid %d init %d reduce %d auto_unroll %d loops", x->stage, x->tid, x->is_init,
                   x->reduce, x->auto_unroll);
    for (int l = 0; l < x->nloops; l++)
      cwm_buf_printf(o, " %d/%d/%d/%d", x->extent[l], x->ann[l], x->unrolled[l], x->is_reduce[l]);
    cwm_buf_printf(o, " ops %d %d %d %d %d %d %d %d\n", x->fadd, x->fmul, x->fdiv, x->fmath, x->fcmp, x->select,
                   x->int_ops, x->bool_ops);
    for (int a = 0; a < x->nacc; a++) {
      const cwm_access *ac = &x->acc[a];
      cwm_buf_printf(o, "  tid %d local %d w %d r %d elems %ld strides", ac->tid, ac->is_local, ac->is_write,
                     ac->is_read, ac->elems);
      for (int l = 0; l < x->nloops; l++) cwm_buf_printf(o, " %ld", ac->stride[l]);
      cwm_buf_puts(o, "\n");
    }
  }
  free(st);
}

/* The step list of a case: from its golden file, else from the table (see gcase). Owned. */
static char *case_steps(const gcase *g, const char *old, const cwm_workload *w) {
  char *t = old ? section_line(old, "steps") : NULL;
  if (t) return t;
  if (g->steps) return cwm_xstrdup(g->steps);
  if (g->seed <= 0) return cwm_xstrdup("[]");
  cwm_space_opts so = {.cores = 4, .max_innermost = 64, .max_vectorize = 32, .vectorize_reorder = 1,
                       .register_tile = 1};
  cwm_rng r;
  cwm_rng_seed(&r, (uint64_t)g->seed);
  cwm_state **v = NULL;
  int nv = 0;
  cwm_err e = {0};
  /* a DAG of its own: the sketches add tensors to the one they run on, and the stores' tensor
   * ids must be those of a plain replay */
  cwm_dag *d = cwm_dag_new(w, &e);
  if (!d || cwm_sample_initial(d, &so, &r, 1, &v, &nv, &e) || nv < 1) {
    CHECKF(0, "%s: sampling failed: %s", g->name, e.msg);
    cwm_dag_free(d);
    return cwm_xstrdup("[]");
  }
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_steps_print(v[0]->steps, v[0]->nsteps, &b);
  cwm_states_free(v, nv);
  cwm_dag_free(d);
  return cwm_buf_take(&b);
}

/* Everything a case pins, as the golden file holds it; NULL (and a failed check) when the case
 * does not replay. */
static char *render(const gcase *g, const char *old) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(g->spec, NULL, &e);
  CHECKF(w != NULL, "%s: %s", g->name, e.msg);
  if (!w) return NULL;
  cwm_dag *d = cwm_dag_new(w, &e);
  char *steps_text = case_steps(g, old, w);
  cwm_step *steps = NULL;
  int n = 0;
  cwm_state *s = NULL;
  int rc = cwm_steps_parse(steps_text, &steps, &n, &e);
  if (!rc) rc = cwm_state_replay(d, steps, n, &s, NULL, &e);
  CHECKF(rc == 0, "%s: the steps do not replay: %s\n  %s", g->name, e.msg, steps_text);
  char *out = NULL;
  if (!rc) {
    cwm_buf o;
    cwm_buf_init(&o);
    cwm_buf_printf(&o, "==== workload\n%s\n==== steps\n", g->spec);
    cwm_steps_print(s->steps, s->nsteps, &o); /* the list as the printer writes it */
    cwm_buf_puts(&o, "\n==== state\n");
    char *text = cwm_state_print(s);
    cwm_buf_puts(&o, text);
    free(text);
    if (s->nsteps == 0) put_kernel(&o, s, "c reference", 1, 8);
    put_kernel(&o, s, "c lanes 8", 0, 8);
    put_kernel(&o, s, "c lanes 16", 0, 16);
    put_analyses(&o, s);
    out = cwm_buf_take(&o);
    for (int i = 0; i < s->nsteps; i++) {
      const cwm_step *st = &s->steps[i];
      seen[F_CA] |= st->kind == CWM_S_CA;
      seen[F_CHW] |= st->kind == CWM_S_CHW;
      seen[F_RF] |= st->kind == CWM_S_RF;
      seen[F_FU] |= st->kind == CWM_S_FU;
      seen[F_PR] |= st->kind == CWM_S_PR;
      seen[F_PAR] |= st->kind == CWM_S_AN && st->a == CWM_ANN_PARALLEL;
      seen[F_VEC] |= st->kind == CWM_S_AN && st->a == CWM_ANN_VECTORIZE;
      seen[F_UNROLL] |= st->kind == CWM_S_AN && st->a == CWM_ANN_UNROLL;
    }
  }
  cwm_state_free(s);
  free(steps);
  free(steps_text);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return out;
}

/* Reports the first line where got differs from want. */
static void report_diff(const char *name, const char *want, const char *got) {
  int line = 1;
  const char *a = want, *b = got, *section = "(start)";
  const char *sec_a = NULL;
  while (*a && *b) {
    size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
    if (!strncmp(a, "==== ", 5)) sec_a = a;
    if (na != nb || memcmp(a, b, na)) break;
    a += na + (a[na] ? 1 : 0);
    b += nb + (b[nb] ? 1 : 0);
    line++;
  }
  char sec[80] = "";
  if (sec_a) snprintf(sec, sizeof sec, "%.*s", (int)strcspn(sec_a, "\n"), sec_a);
  else snprintf(sec, sizeof sec, "%s", section);
  CHECKF(0, "%s: differs from the golden file at line %d (in \"%s\"):\n  golden: %.*s\n  now:    %.*s", name, line,
         sec, (int)strcspn(a, "\n"), *a ? a : "(end of file)", (int)strcspn(b, "\n"), *b ? b : "(end of output)");
}

int main(void) {
  const char *dir = golden_dir();
  int write = getenv("CWM_GOLDEN_WRITE") && !strcmp(getenv("CWM_GOLDEN_WRITE"), "1");
  if (write) mkdir(dir, 0755);
  size_t total = 0;
  for (int i = 0; i < NCASES; i++) {
    const gcase *g = &CASES[i];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.txt", dir, g->name);
    char *old = read_file(path);
    CHECKF(old || write, "%s: no golden file (CWM_GOLDEN_WRITE=1 writes it)", path);
    if (!old && !write) continue;
    char *old_spec = old ? section_line(old, "workload") : NULL;
    CHECKF(!old_spec || !strcmp(old_spec, g->spec), "%s: the file is of workload \"%s\", the case of \"%s\"", path,
           old_spec, g->spec);
    free(old_spec);
    char *got = render(g, old);
    if (got && write) {
      FILE *f = fopen(path, "wb");
      CHECKF(f != NULL, "cannot write %s", path);
      if (f) {
        fputs(got, f);
        fclose(f);
      }
      if (!old || strcmp(old, got)) fprintf(stderr, "wrote %s\n", path);
    } else if (got && strcmp(old, got)) {
      report_diff(path, old, got);
    }
    total += got ? strlen(got) : 0;
    free(got);
    free(old);
  }
  for (int f = 0; f < F__COUNT; f++) CHECKF(seen[f], "no golden case exercises: %s", FEATURE[f]);
  fprintf(stderr, "%d golden cases, %zu bytes\n", NCASES, total);
  return test_done();
}
