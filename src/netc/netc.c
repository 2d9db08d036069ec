/* netc.c: a partitioned graph as a C library. With the storage planned (plan.c), it writes the
 * header, the library (the glue runtime, each task's kernel, create/free, one call per step in the
 * run function, glue.c's code for the glue steps), the runner, the build files and the weights. */
#define _POSIX_C_SOURCE 200809L
#include "netc_internal.h"

#include "cwm/codegen.h"
#include "cwm/measure.h"
#include "cwm/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char cwm_netrt_source[];

void cwm_netc_opts_default(cwm_netc_opts *o) {
  memset(o, 0, sizeof *o);
  o->prefix = "model";
  o->cc = "cc";
  o->cflags = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math";
}

/* ---- the library --------------------------------------------------------------------------------- */

int cwm_netc_name_ok(const char *s) {
  if (!s || !s[0] || strlen(s) > 40 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
    return 0;
  for (const char *q = s; *q; q++)
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_')) return 0;
  return 1;
}

static void dims_comment(const cwm_value *v, cwm_buf *b) {
  char sh[256];
  cwm_value_shape_str(v, sh, sizeof sh);
  cwm_buf_printf(b, "%s %s", v->dtype == CWM_DT_INT64 ? "int64" : "float32", sh);
}

static int write(const char *dir, const char *file, const cwm_buf *b, cwm_err *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  return cwm_write_file_atomic(path, b->s ? b->s : "", b->len, err);
}

/* What the emitters share while one library is written. */
typedef struct {
  const cwm_partition *p;
  const cwm_graph *g;
  const cwm_netc_sched *sched;
  const cwm_netc_opts *o;
  const char *P;       /* the API's prefix */
  char src[200];       /* the model's name, safe for comments */
  plan pl;
  cwm_kernel *ks;      /* per task */
  int *have;           /* ks[t] was generated */
  int npk;             /* packed weights: (task, argument, value) converted at create time */
  int (*pk)[3];
  uint64_t wh;         /* the weights' checksum */
  cwm_netc_result *res;
  cwm_err *err;
} wctx;

/* Every task's kernel: its schedule from the log replayed, or the untransformed nest. */
static int build_kernels(wctx *w) {
  const cwm_partition *p = w->p;
  const char *P = w->P;
  const cwm_netc_sched *sched = w->sched;
  const cwm_netc_opts *o = w->o;
  cwm_kernel *ks = w->ks;
  int *have = w->have;
  cwm_netc_result *res = w->res;
  cwm_err *err = w->err;
  int rc = 0;
  for (int t = 0; t < p->ntasks && !rc; t++) {
    cwm_dag *d = cwm_dag_new(p->tasks[t].w, err);
    if (!d) {
      return err->code;
    }
    cwm_state *s = NULL;
    if (sched && sched[t].from_log) {
      rc = cwm_state_replay(d, sched[t].steps, sched[t].nsteps, &s, NULL, err);
      res->tuned++;
    } else {
      s = cwm_state_init(d);
    }
    if (!rc) {
      char fn[96];
      snprintf(fn, sizeof fn, "%s_k%d", P, t);
      cwm_codegen_opts co = {.fn_name = fn, .vec_lanes = o->vec_lanes};
      rc = cwm_codegen(s, &co, &ks[t], err);
      have[t] = !rc;
    }
    cwm_state_free(s);
    cwm_dag_free(d);
  }
  return rc;
}

/* The weights each kernel takes in its own layout (one buffer per kernel argument and value),
 * and the check that every step gives its kernel arguments of the sizes it takes. */
static int collect_packs(wctx *w) {
  const cwm_partition *p = w->p;
  const cwm_graph *g = w->g;
  const plan *pl = &w->pl;
  const cwm_kernel *ks = w->ks;
  cwm_netc_result *res = w->res;
  cwm_err *err = w->err;
  /* packed weights: one buffer per (kernel argument, value), converted at create time */
  int npk = 0, pkcap = 16, rc = 0;
  int(*pk)[3] = malloc(sizeof *pk * (size_t)pkcap); /* task, arg, value */
  for (int s = 0; s < p->nsteps && !rc; s++) {
    const cwm_gstep *st = &p->steps[s];
    if (st->kind != CWM_GS_KERNEL) continue;
    res->kernel_steps++;
    const cwm_kernel *k = &ks[st->task];
    if (k->nargs != st->nargs) {
      rc = cwm_fail(err, CWM_EINTERNAL, "task %s: the kernel takes %d arguments, the step gives %d", p->tasks[st->task].name,
                    k->nargs, st->nargs);
      break;
    }
    for (int a = 0; a < k->nargs && !rc; a++) {
      int v = st->args[a];
      long want = k->src_len[a] ? k->src_len[a] : k->arg_len[a];
      if (cwm_value_numel(&g->values[v]) != want)
        rc = cwm_fail(err, CWM_EINTERNAL, "task %s: argument %d has %lld elements, the kernel wants %ld",
                      p->tasks[st->task].name, a, (long long)cwm_value_numel(&g->values[v]), want);
      if (!k->src_len[a]) continue;
      if (pl->loc[pl->root[v]] != LOC_CONST) {
        rc = cwm_fail(err, CWM_EINTERNAL, "task %s: a packed argument is not a constant", p->tasks[st->task].name);
        break;
      }
      int seen = 0;
      for (int i = 0; i < npk; i++) seen |= pk[i][0] == st->task && pk[i][1] == a && pk[i][2] == v;
      if (seen) continue;
      if (npk == pkcap) pk = cwm_xrealloc(pk, sizeof *pk * (size_t)(pkcap *= 2));
      pk[npk][0] = st->task, pk[npk][1] = a, pk[npk][2] = v;
      npk++;
      res->packed_bytes += (long long)k->arg_len[a] * 4;
    }
  }
  w->npk = npk;
  w->pk = pk;
  return rc;
}

/* the header comment's list of inputs or outputs: index, name, dims */
static void io_comment(const cwm_graph *g, const char *title, const int *vals, int n, cwm_buf *h) {
  cwm_buf_puts(h, title);
  for (int i = 0; i < n; i++) {
    char nm[200];
    cwm_codegen_safe_name(g->values[vals[i]].name, nm, sizeof nm);
    cwm_buf_printf(h, " *   %d  %-20s ", i, nm);
    dims_comment(&g->values[vals[i]], h);
    cwm_buf_puts(h, "\n");
  }
}

static void emit_header(const wctx *w, cwm_buf *h) {
  const cwm_graph *g = w->g;
  const char *P = w->P;
  const char *src = w->src;
  const plan *pl = &w->pl;
  cwm_buf_printf(h, "/* %s.h: the network %s compiled by cwm %s.\n *\n", P, src, CWM_VERSION);
  io_comment(g, " * Inputs (in this order, row-major contiguous arrays):\n", g->inputs, g->ninputs, h);
  io_comment(g, " * Outputs:\n", g->outputs, g->noutputs, h);
  cwm_buf_printf(h,
                 " *\n * %s_create reads the weights file (%s_weights.bin, %lld bytes, checked against the\n"
                 " * size and checksum it was compiled with) and returns NULL with errno set on failure\n"
                 " * (ENOENT, EINVAL for a file of another compile, ENOMEM, ENOTSUP when this CPU lacks an\n"
                 " * instruction set the library was compiled for: %s_cpu_missing() names it). %s_run computes the outputs\n"
                 " * from the inputs: 0 on success, 2 when an index input is out of range. One model\n"
                 " * object runs one inference at a time (its arena holds the intermediate tensors:\n"
                 " * %lld bytes). Kernels use OpenMP: link with -fopenmp; OMP_NUM_THREADS sets the threads.\n */\n",
                 P, P, (long long)pl->w.len, P, P, pl->arena);
  cwm_buf_printf(h, "#ifndef %s_H\n#define %s_H\n\n", P, P);
  cwm_buf_printf(h, "#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n", P, g->ninputs, P, g->noutputs);
  cwm_buf_printf(h, "/* bytes of each input and output */\nstatic const long long %s_input_bytes[] = {", P);
  for (int i = 0; i < g->ninputs; i++) cwm_buf_printf(h, "%s%lld", i ? ", " : "", netc_vbytes(g, g->inputs[i]));
  cwm_buf_printf(h, "%s};\nstatic const long long %s_output_bytes[] = {", g->ninputs ? "" : "0", P);
  for (int i = 0; i < g->noutputs; i++) cwm_buf_printf(h, "%s%lld", i ? ", " : "", netc_vbytes(g, g->outputs[i]));
  cwm_buf_printf(h, "};\n\ntypedef struct %s %s;\n", P, P);
  cwm_buf_printf(h, "%s *%s_create(const char *weights_path);\n", P, P);
  cwm_buf_printf(h, "/* The first instruction set the library needs that this CPU lacks (\"avx512f\" ...), or NULL. */\n"
                    "const char *%s_cpu_missing(void);\n", P);
  cwm_buf_printf(h, "int %s_run(%s *m, const void *const *inputs, void *const *outputs);\n", P, P);
  cwm_buf_printf(h, "void %s_free(%s *m);\n\n#endif\n", P, P);

}

/* The library up to its run function: the runtime, the kernels, create and free. */
static void emit_library(const wctx *w, cwm_buf *c) {
  const cwm_partition *p = w->p;
  const char *P = w->P;
  const char *src = w->src;
  const plan *pl = &w->pl;
  const cwm_kernel *ks = w->ks;
  const cwm_netc_sched *sched = w->sched;
  const cwm_netc_opts *o = w->o;
  int npk = w->npk;
  int(*pk)[3] = w->pk;
  uint64_t wh = w->wh;
  cwm_netc_result *res = w->res;
  cwm_buf_printf(c, "/* %s.c: the network %s compiled by cwm %s: %d tasks (%d tuned), %d steps.\n", P, src, CWM_VERSION,
                 p->ntasks, res->tuned, p->nsteps);
  cwm_buf_printf(c, " * Build: see Makefile (%s %s). */\n", o->cc, o->cflags);
  cwm_buf_puts(c, "#define _POSIX_C_SOURCE 200809L\n");
  cwm_buf_printf(c, "#include \"%s.h\"\n#include <errno.h>\n#include <stdio.h>\n", P);
  cwm_buf_puts(c, cwm_measure_prelude());
  cwm_buf_puts(c, cwm_netrt_source);
  for (int t = 0; t < p->ntasks; t++) {
    char wn[200];
    cwm_codegen_safe_name(p->tasks[t].spec, wn, sizeof wn);
    cwm_buf_printf(c, "\n/* ---- task %s: %s, run %g times; %s */\n", p->tasks[t].name, wn, p->tasks[t].weight,
                   sched && sched[t].from_log ? "tuned schedule from the log" : "untuned (no record in the log)");
    cwm_buf_puts(c, ks[t].body);
  }
  cwm_buf_printf(c, "\nstruct %s {\n  unsigned char *w, *arena;\n  float *pk[%d];\n};\n\n", P, npk ? npk : 1);
  cwm_buf_printf(c, "void %s_free(%s *m) {\n  if (!m) return;\n  for (int i = 0; i < %d; i++) free(m->pk[i]);\n"
                     "  free(m->w);\n  free(m->arena);\n  free(m);\n}\n\n", P, P, npk);
  cwm_buf_printf(c, "static unsigned long long %s_hash(const unsigned char *p, size_t n) {\n", P);
  cwm_buf_puts(c, "  /* the same FNV-1a as cwm_hash64 */\n  unsigned long long h = 1469598103934665603ULL;\n"
                   "  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;\n  return h;\n}\n\n");
  /* the instruction sets the library was compiled for (-march), checked before anything else runs,
   * in code compiled for the baseline so that the check itself cannot fault; -DCWM_PRETEND_MISSING=
   * '"name"' makes it report a feature missing (how the check is tested) */
  char fn[160];
  snprintf(fn, sizeof fn, "%s_cpu_missing", P);
  cwm_codegen_cpu_check(c, fn);
  cwm_buf_puts(c, "\n");
  cwm_buf_printf(c, "%s *%s_create(const char *weights_path) {\n", P, P);
  cwm_buf_printf(c, "  if (%s_cpu_missing()) { errno = ENOTSUP; return NULL; }\n", P);
  cwm_buf_printf(c, "  %s *m = calloc(1, sizeof *m);\n  if (!m) return NULL;\n", P);
  cwm_buf_printf(c, "  FILE *f = fopen(weights_path, \"rb\");\n  if (!f) { free(m); return NULL; }\n");
  cwm_buf_printf(c, "  char magic[16];\n  unsigned long long hdr[2];\n"
                     "  m->w = aligned_alloc(64, %lldULL);\n"
                     "  int ok = m->w && fread(magic, 1, 16, f) == 16 && !memcmp(magic, \"CWM-WEIGHTS-v1\\n\", 16) &&\n"
                     "           fread(hdr, 8, 2, f) == 2 && hdr[0] == %lldULL && hdr[1] == %lluULL &&\n"
                     "           fread(m->w, 1, %lldULL, f) == %lldULL && fgetc(f) == EOF;\n  fclose(f);\n",
                 ((long long)pl->w.len + 63) / 64 * 64 + 64, (long long)pl->w.len, (unsigned long long)wh,
                 (long long)pl->w.len, (long long)pl->w.len);
  cwm_buf_printf(c, "  if (!ok || %s_hash(m->w, %lldULL) != %lluULL) { %s_free(m); errno = EINVAL; return NULL; }\n", P,
                 (long long)pl->w.len, (unsigned long long)wh, P);
  cwm_buf_printf(c, "  m->arena = aligned_alloc(64, %lldULL);\n  if (!m->arena) { %s_free(m); errno = ENOMEM; return NULL; }\n",
                 pl->arena + 64, P);
  for (int i = 0; i < npk; i++) {
    const cwm_kernel *k = &ks[pk[i][0]];
    int a = pk[i][1];
    cwm_buf_printf(c, "  if (!(m->pk[%d] = aligned_alloc(64, %ldULL))) { %s_free(m); errno = ENOMEM; return NULL; }\n", i,
                   (k->arg_len[a] * 4 + 63) / 64 * 64, P);
    cwm_buf_printf(c, "  %s(", k->pack_fn[a]);
    netc_vptr(pl, pk[i][2], "const float", c);
    cwm_buf_printf(c, ", m->pk[%d]);\n", i);
  }
  cwm_buf_puts(c, "  return m;\n}\n\n");
}

/* The run function: one call per step, and (-DCWM_PROFILE) the time of each. */
static int emit_run(wctx *w, cwm_buf *c) {
  const cwm_partition *p = w->p;
  const cwm_graph *g = w->g;
  const char *P = w->P;
  plan *pl = &w->pl;
  const cwm_kernel *ks = w->ks;
  int npk = w->npk;
  int(*pk)[3] = w->pk;
  int rc = 0;
  /* -DCWM_PROFILE: seconds per step, summed over runs (the runner's -p prints them) */
  cwm_buf_printf(c, "#ifdef CWM_PROFILE\n#include <time.h>\ndouble %s_prof_sec[%d];\nconst char *const %s_prof_name[%d] = {\n", P,
                 p->nsteps + 1, P, p->nsteps + 1);
  for (int s = 0; s < p->nsteps; s++) {
    const cwm_gstep *st = &p->steps[s];
    char nm[200], what[300];
    cwm_codegen_safe_name(st->node >= 0 ? g->nodes[st->node].name : "", nm, sizeof nm);
    if (st->kind == CWM_GS_KERNEL) snprintf(what, sizeof what, "%s at %s", p->tasks[st->task].name, nm);
    else if (st->kind == CWM_GS_NODE) snprintf(what, sizeof what, "%s %s", g->nodes[st->node].op_type, nm);
    else snprintf(what, sizeof what, "%s %s", st->kind == CWM_GS_GELU ? "gelu" : "layout transpose", nm);
    cwm_buf_printf(c, "  \"%s\",\n", what);
  }
  cwm_buf_printf(c, "  \"output copies\"};\nconst int %s_prof_steps = %d;\n", P, p->nsteps + 1);
  cwm_buf_puts(c, "static double prof_now(void) {\n  struct timespec t;\n  clock_gettime(CLOCK_MONOTONIC, &t);\n"
                   "  return t.tv_sec + t.tv_nsec * 1e-9;\n}\n");
  cwm_buf_printf(c, "#define PROF_START double prof_t = prof_now()\n"
                     "#define PROF(i) do { double t_ = prof_now(); %s_prof_sec[i] += t_ - prof_t; prof_t = t_; } while (0)\n"
                     "#else\n#define PROF_START\n#define PROF(i)\n#endif\n\n", P);
  cwm_buf_printf(c, "int %s_run(%s *m, const void *const *in, void *const *out) {\n", P, P);
  cwm_buf_puts(c, "  (void)in; (void)out;\n  PROF_START;\n");
  for (int s = 0; s < p->nsteps && !rc; s++) {
    const cwm_gstep *st = &p->steps[s];
    if (s) cwm_buf_printf(c, "  PROF(%d);\n", s - 1);
    const char *nname = st->node >= 0 ? g->nodes[st->node].name : "";
    char nm[200];
    cwm_codegen_safe_name(nname, nm, sizeof nm);
    if (st->kind == CWM_GS_KERNEL) {
      const cwm_kernel *k = &ks[st->task];
      cwm_buf_printf(c, "  /* %s at %s */\n  %s((float *const[]){", p->tasks[st->task].name, nm, k->entry);
      for (int a = 0; a < st->nargs; a++) {
        if (a) cwm_buf_puts(c, ", ");
        int slot = -1;
        for (int i = 0; i < npk && k->src_len[a]; i++)
          if (pk[i][0] == st->task && pk[i][1] == a && pk[i][2] == st->args[a]) slot = i;
        if (slot >= 0) cwm_buf_printf(c, "m->pk[%d]", slot);
        else netc_vptr(pl, st->args[a], "float", c);
      }
      cwm_buf_puts(c, "});\n");
    } else if (st->kind == CWM_GS_TRANSPOSE) {
      const cwm_value *x = &g->values[st->args[0]];
      cwm_buf_printf(c, "  /* layout for %s */\n  rt_transpose(%d, ", nm, x->ndim);
      netc_ints(c, x->shape, x->ndim);
      cwm_buf_puts(c, ", (const int[]){");
      for (int d = 0; d < x->ndim; d++) cwm_buf_printf(c, "%s%d", d ? ", " : "", st->perm[d]);
      cwm_buf_puts(c, "}, ");
      netc_vptr(pl, st->args[0], "void", c);
      cwm_buf_puts(c, ", ");
      netc_vptr(pl, st->args[1], "void", c);
      cwm_buf_puts(c, ", 4);\n");
    } else if (st->kind == CWM_GS_GELU) {
      cwm_buf_printf(c, "  /* gelu at %s */\n  rt_unary(RT_GELU, %lld, ", nm, (long long)cwm_value_numel(&g->values[st->args[0]]));
      netc_vptr(pl, st->args[0], "float", c);
      cwm_buf_puts(c, ", ");
      netc_vptr(pl, st->args[1], "float", c);
      cwm_buf_puts(c, ", 0, 0);\n");
    } else {
      if (!netc_is_view(g->nodes[st->node].op_type)) cwm_buf_printf(c, "  /* %s (%s) */\n", nm, g->nodes[st->node].op_type);
      rc = netc_glue(pl, st->node, c);
    }
  }
  if (p->nsteps) cwm_buf_printf(c, "  PROF(%d);\n", p->nsteps - 1);
  /* outputs not written in place: copied */
  for (int i = 0; i < g->noutputs && !rc; i++) {
    int v = g->outputs[i];
    if (pl->loc[pl->root[v]] == LOC_OUTPUT && pl->slot[pl->root[v]] == i) continue;
    cwm_buf_printf(c, "  memcpy(out[%d], ", i);
    netc_vptr(pl, v, "void", c);
    cwm_buf_printf(c, ", %lldULL);\n", netc_vbytes(g, v));
  }
  cwm_buf_printf(c, "  PROF(%d);\n  return 0;\n}\n", p->nsteps);
  return rc;
}

static void emit_runner(const wctx *w, cwm_buf *r) {
  const cwm_graph *g = w->g;
  const char *P = w->P;
  cwm_buf_printf(r,
                 "/* %s_runner.c: runs the compiled network. usage: %s_runner WEIGHTS [-i INPUTS] [-o OUTPUTS] [-n RUNS] [-p]\n"
                 " * INPUTS: every input's bytes in order (as numpy's tofile writes them); OUTPUTS likewise.\n"
                 " * Without -i the inputs are zeros. -n times RUNS runs after 3 warm-up runs and prints the median.\n"
                 " * -p (with a library built with -DCWM_PROFILE) prints the milliseconds of each step per run. */\n",
                 P, P);
  cwm_buf_printf(r, "#define _POSIX_C_SOURCE 200809L\n#include \"%s.h\"\n#include <errno.h>\n#include <stdio.h>\n"
                     "#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n", P);
  cwm_buf_printf(r, "#ifdef CWM_PROFILE\nextern double %s_prof_sec[];\nextern const char *const %s_prof_name[];\nextern const int %s_prof_steps;\n#endif\n", P, P, P);
  cwm_buf_puts(r, "static double now(void) {\n  struct timespec t;\n  clock_gettime(CLOCK_MONOTONIC, &t);\n"
                   "  return t.tv_sec + t.tv_nsec * 1e-9;\n}\n\nstatic int cmp(const void *a, const void *b) {\n"
                   "  double x = *(const double *)a, y = *(const double *)b;\n  return x < y ? -1 : x > y;\n}\n\n");
  cwm_buf_printf(r, "int main(int argc, char **argv) {\n  const char *wpath = NULL, *ipath = NULL, *opath = NULL;\n  long runs = 0;\n  int profile = 0;\n"
                     "  for (int i = 1; i < argc; i++) {\n"
                     "    if (!strcmp(argv[i], \"-i\") && i + 1 < argc) ipath = argv[++i];\n"
                     "    else if (!strcmp(argv[i], \"-o\") && i + 1 < argc) opath = argv[++i];\n"
                     "    else if (!strcmp(argv[i], \"-n\") && i + 1 < argc) runs = strtol(argv[++i], NULL, 10);\n"
                     "    else if (!strcmp(argv[i], \"-p\")) profile = 1;\n"
                     "    else if (!strcmp(argv[i], \"-h\") || !strcmp(argv[i], \"--help\")) {\n"
                     "      printf(\"usage: %%s WEIGHTS [-i INPUTS] [-o OUTPUTS] [-n RUNS] [-p]\\n\", argv[0]);\n      return 0;\n    }\n"
                     "    else if (argv[i][0] != '-' && !wpath) wpath = argv[i];\n"
                     "    else { fprintf(stderr, \"%%s: unexpected argument '%%s' (see --help)\\n\", argv[0], argv[i]); return 2; }\n"
                     "  }\n  if (!wpath || runs < 0) { fprintf(stderr, \"usage: %%s WEIGHTS [-i INPUTS] [-o OUTPUTS] [-n RUNS]\\n\", argv[0]); return 2; }\n");
  cwm_buf_printf(r, "  if (%s_cpu_missing()) {\n    fprintf(stderr, \"%%s: this CPU lacks %%s, which the library was compiled "
                     "for; rebuild it with flags for this CPU (make CFLAGS=...)\\n\", argv[0], %s_cpu_missing());\n"
                     "    return 1;\n  }\n", P, P);
  cwm_buf_printf(r, "  %s *m = %s_create(wpath);\n  if (!m) { fprintf(stderr, \"%%s: %%s: %%s\\n\", argv[0], wpath, "
                     "errno == EINVAL ? \"not the weights this library was compiled with\" : strerror(errno)); return 1; }\n",
                 P, P);
  cwm_buf_printf(r, "  void *in[%d + 1], *out[%d + 1];\n", g->ninputs, g->noutputs);
  cwm_buf_printf(r, "  FILE *f = ipath ? fopen(ipath, \"rb\") : NULL;\n"
                     "  if (ipath && !f) { fprintf(stderr, \"%%s: %%s: %%s\\n\", argv[0], ipath, strerror(errno)); return 1; }\n"
                     "  for (int i = 0; i < %s_NUM_INPUTS; i++) {\n    in[i] = calloc(1, (size_t)%s_input_bytes[i] + 1);\n"
                     "    if (f && fread(in[i], 1, (size_t)%s_input_bytes[i], f) != (size_t)%s_input_bytes[i]) {\n"
                     "      fprintf(stderr, \"%%s: %%s: too short for input %%d\\n\", argv[0], ipath, i);\n      return 1;\n    }\n  }\n"
                     "  if (f && fgetc(f) != EOF) { fprintf(stderr, \"%%s: %%s: longer than the inputs\\n\", argv[0], ipath); return 1; }\n"
                     "  if (f) fclose(f);\n",
                 P, P, P, P);
  cwm_buf_printf(r, "  for (int i = 0; i < %s_NUM_OUTPUTS; i++) out[i] = calloc(1, (size_t)%s_output_bytes[i] + 1);\n", P, P);
  cwm_buf_printf(r, "  int rc = %s_run(m, (const void *const *)in, out);\n"
                     "  if (rc) { fprintf(stderr, \"%%s: run failed (%%d: an index out of range)\\n\", argv[0], rc); return 1; }\n", P);
  cwm_buf_printf(r, "  if (runs > 0) {\n    double *t = malloc(sizeof(double) * (size_t)runs);\n"
                     "    for (int i = 0; i < 3; i++) %s_run(m, (const void *const *)in, out);\n"
                     "    for (long i = 0; i < runs; i++) {\n      double t0 = now();\n      %s_run(m, (const void *const *)in, out);\n"
                     "      t[i] = now() - t0;\n    }\n    qsort(t, (size_t)runs, sizeof *t, cmp);\n"
                     "    printf(\"%s: median %%.3f ms over %%ld runs (min %%.3f, max %%.3f)\\n\", t[runs / 2] * 1e3, runs, t[0] * 1e3, t[runs - 1] * 1e3);\n"
                     "    free(t);\n  }\n", P, P, P);
  cwm_buf_printf(r, "#ifdef CWM_PROFILE\n  if (profile && runs > 0) {\n    double tot = 0;\n"
                     "    for (int i = 0; i < %s_prof_steps; i++) tot += %s_prof_sec[i];\n"
                     "    for (int i = 0; i < %s_prof_steps; i++)\n"
                     "      printf(\"%%4d %%9.3f ms %%5.1f%%%%  %%s\\n\", i, %s_prof_sec[i] * 1e3 / (runs + 4), 100 * %s_prof_sec[i] / tot, %s_prof_name[i]);\n"
                     "  }\n#else\n  if (profile) fprintf(stderr, \"%%s: -p needs a build with -DCWM_PROFILE\\n\", argv[0]);\n#endif\n",
                 P, P, P, P, P, P);
  cwm_buf_printf(r, "  if (opath) {\n    FILE *g = fopen(opath, \"wb\");\n    int ok = g != NULL;\n"
                     "    for (int i = 0; ok && i < %s_NUM_OUTPUTS; i++) ok = fwrite(out[i], 1, (size_t)%s_output_bytes[i], g) == (size_t)%s_output_bytes[i];\n"
                     "    if (g && fclose(g)) ok = 0;\n"
                     "    if (!ok) { fprintf(stderr, \"%%s: %%s: %%s\\n\", argv[0], opath, strerror(errno)); return 1; }\n  }\n",
                 P, P, P);
  cwm_buf_printf(r, "  for (int i = 0; i < %s_NUM_INPUTS; i++) free(in[i]);\n  for (int i = 0; i < %s_NUM_OUTPUTS; i++) free(out[i]);\n"
                     "  %s_free(m);\n  return 0;\n}\n", P, P, P);
}

static void emit_build_files(const wctx *w, cwm_buf *mk, cwm_buf *cm) {
  const char *P = w->P;
  const cwm_netc_opts *o = w->o;
  cwm_buf_printf(mk, "# Builds lib%s.a and %s_runner. make CC=... CFLAGS=... to change the compiler or flags.\n", P, P);
  cwm_buf_printf(mk, "CC ?= %s\nCFLAGS ?= %s\n\nall: lib%s.a %s_runner\n\n", o->cc, o->cflags, P, P);
  cwm_buf_printf(mk, "%s.o: %s.c %s.h\n\t$(CC) $(CFLAGS) -c %s.c -o $@\n\n", P, P, P, P);
  cwm_buf_printf(mk, "lib%s.a: %s.o\n\tar rcs $@ %s.o\n\n", P, P, P);
  cwm_buf_printf(mk, "%s_runner: %s_runner.c lib%s.a\n\t$(CC) $(CFLAGS) %s_runner.c lib%s.a -lm -o $@\n\n", P, P, P, P, P);
  cwm_buf_printf(mk, "clean:\n\trm -f %s.o lib%s.a %s_runner\n\n.PHONY: all clean\n", P, P, P);
  cwm_buf_printf(cm, "# add_subdirectory-free use: include(%s.cmake) from a CMakeLists.txt, then link %s.\n", P, P);
  cwm_buf_printf(cm, "find_package(OpenMP REQUIRED COMPONENTS C)\n");
  cwm_buf_printf(cm, "add_library(%s STATIC ${CMAKE_CURRENT_LIST_DIR}/%s.c)\n", P, P);
  cwm_buf_printf(cm, "target_include_directories(%s PUBLIC ${CMAKE_CURRENT_LIST_DIR})\n", P);
  cwm_buf_printf(cm, "target_compile_options(%s PRIVATE -O3 -march=native -fno-math-errno -fno-trapping-math)\n", P);
  cwm_buf_printf(cm, "target_link_libraries(%s PUBLIC OpenMP::OpenMP_C m)\n", P);
}

/* The weights file (magic, size, checksum, data) and the sources, each written atomically. */
static int write_files(const wctx *w, const char *dir, const cwm_buf *h, const cwm_buf *c, const cwm_buf *r,
                       const cwm_buf *mk, const cwm_buf *cm) {
  const char *P = w->P;
  const plan *pl = &w->pl;
  uint64_t wh = w->wh;
  cwm_err *err = w->err;
  int rc;
  char name[256];
  cwm_buf wf;
  cwm_buf_init(&wf);
  cwm_buf_puts(&wf, "CWM-WEIGHTS-v1\n");
  cwm_buf_putc(&wf, 0);
  unsigned long long hdr[2] = {(unsigned long long)pl->w.len, (unsigned long long)wh};
  cwm_buf_append(&wf, hdr, sizeof hdr);
  cwm_buf_append(&wf, pl->w.s ? pl->w.s : "", pl->w.len);
  snprintf(name, sizeof name, "%s_weights.bin", P);
  rc = write(dir, name, &wf, err);
  cwm_buf_free(&wf);
  snprintf(name, sizeof name, "%s.h", P);
  if (!rc) rc = write(dir, name, h, err);
  snprintf(name, sizeof name, "%s.c", P);
  if (!rc) rc = write(dir, name, c, err);
  snprintf(name, sizeof name, "%s_runner.c", P);
  if (!rc) rc = write(dir, name, r, err);
  if (!rc) rc = write(dir, "Makefile", mk, err);
  snprintf(name, sizeof name, "%s.cmake", P);
  if (!rc) rc = write(dir, name, cm, err);
  return rc;
}

int cwm_netc_write(const cwm_partition *p, const cwm_netc_sched *sched, const char *dir, const cwm_netc_opts *o,
                   cwm_netc_result *res, cwm_err *err) {
  memset(res, 0, sizeof *res);
  wctx w;
  memset(&w, 0, sizeof w);
  w.p = p, w.g = p->g, w.sched = sched, w.o = o, w.res = res, w.err = err;
  w.P = o->prefix ? o->prefix : "model";
  if (!cwm_netc_name_ok(w.P))
    return cwm_fail(err, CWM_EUSAGE, "the library name '%s' is not a C identifier (at most 40 characters)", w.P);
  w.pl.p = p, w.pl.g = p->g, w.pl.o = o, w.pl.err = err;
  cwm_codegen_safe_name(o->source ? o->source : p->g->name, w.src, sizeof w.src);
  w.ks = calloc((size_t)p->ntasks + 1, sizeof *w.ks);
  w.have = calloc((size_t)p->ntasks + 1, sizeof(int));
  res->ntasks = p->ntasks;
  res->nsteps = p->nsteps;
  cwm_buf c, h, r, mk, cm;
  cwm_buf_init(&c);
  cwm_buf_init(&h);
  cwm_buf_init(&r);
  cwm_buf_init(&mk);
  cwm_buf_init(&cm);
  int rc = netc_plan_storage(&w.pl);
  if (!rc) rc = build_kernels(&w);
  if (!rc) rc = collect_packs(&w);
  w.wh = cwm_hash64(w.pl.w.s ? w.pl.w.s : "", w.pl.w.len);
  if (!rc) {
    emit_header(&w, &h);
    emit_library(&w, &c);
    rc = emit_run(&w, &c);
  }
  if (!rc) {
    emit_runner(&w, &r);
    emit_build_files(&w, &mk, &cm);
  }
  if (!rc) rc = cwm_mkdir_p(dir, err);
  if (!rc) rc = write_files(&w, dir, &h, &c, &r, &mk, &cm);
  res->arena_bytes = w.pl.arena;
  res->weight_bytes = (long long)w.pl.w.len;
  for (int v = 0; w.pl.used && v < p->g->nvalues; v++)
    if (w.pl.loc && w.pl.loc[v] == LOC_ARENA) res->naive_bytes += (netc_vbytes(p->g, v) + 63) / 64 * 64;
  for (int t = 0; t < p->ntasks; t++)
    if (w.have[t]) cwm_kernel_free(&w.ks[t]);
  free(w.ks);
  free(w.have);
  free(w.pk);
  cwm_buf_free(&c);
  cwm_buf_free(&h);
  cwm_buf_free(&r);
  cwm_buf_free(&mk);
  cwm_buf_free(&cm);
  netc_plan_free(&w.pl);
  return rc;
}
