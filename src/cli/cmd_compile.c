/* cmd_compile.c: whole networks from ONNX. `cwm import` shows what a model becomes (tasks with
 * their weights, glue steps), `cwm compile` writes the C library of a model with the best
 * schedules of a tuning log, and `cwm tune --onnx` (cmd_tune_network.c) tunes its tasks through
 * cli_onnx_network below. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "env.h"
#include "cwm/netc.h"
#include "cwm/scheduler.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int cli_onnx_load(const char *path, cwm_graph **g, cwm_partition **p, cwm_err *e) {
  *g = NULL;
  *p = NULL;
  cwm_graph *gr = cwm_onnx_load(path, e);
  if (!gr) return e->code ? e->code : CWM_EPARSE;
  cwm_partition *pa = NULL;
  if (cwm_graph_infer(gr, e) || !(pa = cwm_graph_partition(gr, e))) {
    /* messages past the loader name the node; the file goes in front */
    char msg[sizeof e->msg];
    snprintf(msg, sizeof msg, "%s", e->msg);
    snprintf(e->msg, sizeof e->msg, "%.200s: %.300s", path, msg);
    cwm_graph_free(gr);
    return e->code ? e->code : CWM_EPARSE;
  }
  *g = gr;
  *p = pa;
  return 0;
}

cwm_network *cli_onnx_network(const cwm_partition *p, const char *path, cwm_err *e) {
  cwm_network *net = calloc(1, sizeof *net);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  snprintf(net->name, sizeof net->name, "%s", base);
  char *dot = strrchr(net->name, '.');
  if (dot && dot != net->name) *dot = 0;
  net->sub = calloc((size_t)p->ntasks + 1, sizeof *net->sub);
  for (int t = 0; t < p->ntasks; t++) {
    cwm_subgraph *s = &net->sub[net->n];
    const cwm_gtask *gt = &p->tasks[t];
    snprintf(s->name, sizeof s->name, "%s", gt->name);
    snprintf(s->op, sizeof s->op, "%s", gt->op);
    snprintf(s->spec, sizeof s->spec, "%s", gt->spec);
    s->weight = gt->weight;
    char *text = cwm_workload_print(gt->w);
    s->w = cwm_workload_parse(text, e);
    free(text);
    if (!s->w) {
      cwm_network_free(net);
      return NULL;
    }
    snprintf(s->w->name, sizeof s->w->name, "%s", gt->name);
    net->n++;
  }
  return net;
}

static const char *IMPORT_HELP =
    "usage: cwm import MODEL.onnx [--steps]\n"
    "Reads an ONNX model (opset 11-17, float32, fixed shapes), infers its shapes, folds constants\n"
    "(BatchNorm into the conv before it, the shape arithmetic of reshapes) and cuts it into tasks:\n"
    "anchor ops (Conv, Gemm/MatMul, batched MatMul, Softmax, LayerNorm) with their elementwise\n"
    "neighbours fused (bias, ReLU, GELU), identical ones merged with a weight; the rest is glue the\n"
    "compiled network runs with plain loops. Prints the inputs, outputs and tasks (name, weight,\n"
    "op-library spec), and with --steps every step in run order.\n"
    "Errors name the node, its op type and the reason (exit 3), or the file (exit 5).\n";

int cmd_import(int argc, char **argv) {
  const char *path = NULL;
  if (argc > 1 && argv[1][0] != '-') path = argv[1], argv++, argc--;
  cli_opt o[] = {{"--steps", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), IMPORT_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  if (!path) return cli_usage("import", IMPORT_HELP, "the model file is missing (cwm import MODEL.onnx)");
  cwm_err e = {0};
  cwm_graph *g;
  cwm_partition *p;
  if ((rc = cli_onnx_load(path, &g, &p, &e))) return cli_fail(&e);
  int live = 0, glue = 0;
  for (int n = 0; n < g->nnodes; n++) live += !g->nodes[n].dead;
  for (int s = 0; s < p->nsteps; s++) glue += p->steps[s].kind != CWM_GS_KERNEL;
  printf("model %s: opset %lld, %d nodes after folding, %d tasks, %d steps (%d kernels, %d glue)\n", path,
         (long long)g->opset, live, p->ntasks, p->nsteps, p->nsteps - glue, glue);
  for (int i = 0; i < g->ninputs; i++) {
    char sh[256];
    cwm_value_shape_str(&g->values[g->inputs[i]], sh, sizeof sh);
    printf("input  %s %s %s\n", g->values[g->inputs[i]].name, g->values[g->inputs[i]].dtype == CWM_DT_INT64 ? "int64" : "float32", sh);
  }
  for (int i = 0; i < g->noutputs; i++) {
    char sh[256];
    cwm_value_shape_str(&g->values[g->outputs[i]], sh, sizeof sh);
    printf("output %s float32 %s\n", g->values[g->outputs[i]].name, sh);
  }
  double flops = 0;
  for (int t = 0; t < p->ntasks; t++) flops += p->tasks[t].weight * cwm_workload_flops(p->tasks[t].w);
  printf("tasks (%.4g GFLOP per inference):\n", flops * 1e-9);
  for (int t = 0; t < p->ntasks; t++) {
    printf("  %-16s x%-3g %s  [%s]\n", p->tasks[t].name, p->tasks[t].weight, p->tasks[t].spec, p->tasks[t].key);
  }
  if (cli_get(o, NOPT(o), "--steps")) {
    printf("steps:\n");
    for (int s = 0; s < p->nsteps; s++) {
      const cwm_gstep *st = &p->steps[s];
      const char *nn = st->node >= 0 ? g->nodes[st->node].name : "";
      if (st->kind == CWM_GS_KERNEL) printf("  %4d kernel %-16s at %s\n", s, p->tasks[st->task].name, nn);
      else if (st->kind == CWM_GS_TRANSPOSE) printf("  %4d glue   transpose (layout for %s)\n", s, nn);
      else if (st->kind == CWM_GS_GELU) printf("  %4d glue   gelu at %s\n", s, nn);
      else printf("  %4d glue   %-16s %s\n", s, g->nodes[st->node].op_type, nn);
    }
  }
  cwm_partition_free(p);
  cwm_graph_free(g);
  return 0;
}

static const char *COMPILE_HELP =
    "usage: cwm compile MODEL.onnx --out DIR [--log LOG] [--name NAME] [--build] [--quiet]\n"
    "Writes the model as a C library into DIR: NAME.c (every task's kernel: the fastest schedule\n"
    "of the task in LOG, the untransformed loop nest where LOG has none; the glue; the buffer plan),\n"
    "NAME.h (NAME_create(weights) / NAME_run(model, inputs, outputs) / NAME_free), NAME_weights.bin,\n"
    "NAME_runner.c (reads inputs from a file, runs, writes the outputs, times -n runs), a Makefile\n"
    "and NAME.cmake. --build runs make in DIR. NAME defaults to model.\n"
    "LOG is the log of `cwm tune --onnx MODEL.onnx --log LOG`: records are matched to tasks by\n"
    "their workload key, so a log of other runs (or other models sharing layers) serves too.\n"
    "Prints the tasks with their schedule's logged latency, the arena against the sum of the\n"
    "intermediate tensors, and the weights' size.\n";

static int run_make(const char *dir) {
  char *argv[] = {"make", "-s", "-C", (char *)dir, NULL};
  pid_t pid;
  if (posix_spawnp(&pid, "make", NULL, NULL, argv, environ)) return -1;
  int st;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int cmd_compile(int argc, char **argv) {
  const char *path = NULL;
  if (argc > 1 && argv[1][0] != '-') path = argv[1], argv++, argc--;
  cli_opt o[] = {{"--out", 1, NULL}, {"--log", 1, NULL}, {"--name", 1, NULL}, {"--build", 0, NULL}, {"--quiet", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), COMPILE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  if (!path) return cli_usage("compile", COMPILE_HELP, "the model file is missing (cwm compile MODEL.onnx --out DIR)");
  const char *dir = cli_get(o, NOPT(o), "--out");
  if (!dir || !*dir) return cli_usage("compile", COMPILE_HELP, "--out DIR is required");
  cwm_netc_opts no;
  cwm_netc_opts_default(&no);
  /* --target: the library's flags and its kernels' tile width (records of a log tuned for another
   * target still give their schedules; the kernels are generated for this one) */
  no.cflags = cli_target_cflags(no.cflags);
  if (cli_target_isa()) no.vec_lanes = cli_target_isa()->lanes;
  if (cli_get(o, NOPT(o), "--name")) no.prefix = cli_get(o, NOPT(o), "--name");
  const char *base = strrchr(path, '/');
  no.source = base ? base + 1 : path;
  int quiet = cli_get(o, NOPT(o), "--quiet") != NULL;
  cwm_err e = {0};
  /* the name is checked before any work, so that a typo does not cost an import */
  const char *P = no.prefix;
  if (!cwm_netc_name_ok(P)) return cli_usage("compile", COMPILE_HELP, "--name '%s' is not a C identifier (at most 40 characters)", P);
  cwm_graph *g;
  cwm_partition *p;
  if ((rc = cli_onnx_load(path, &g, &p, &e))) return cli_fail(&e);
  cwm_netc_sched *sched = calloc((size_t)p->ntasks + 1, sizeof *sched);
  int nbad = 0;
  const char *log = cli_get(o, NOPT(o), "--log");
  rc = cwm_netc_schedules(p, log, sched, &nbad, &e);
  cwm_netc_result res;
  if (!rc) rc = cwm_netc_write(p, sched, dir, &no, &res, &e);
  if (rc) {
    cli_fail(&e);
  } else {
    if (!quiet) {
      if (nbad) fprintf(stderr, "cwm compile: %s: %d lines that do not parse were skipped\n", log, nbad);
      printf("compiled %s into %s: %d tasks (%d with a schedule from the log), %d steps per inference\n", path, dir,
             res.ntasks, res.tuned, res.nsteps);
      double est = 0;
      int all = 1;
      for (int t = 0; t < p->ntasks; t++) {
        if (sched[t].from_log) printf("  %-16s x%-3g %10.2f us  %s\n", p->tasks[t].name, p->tasks[t].weight, sched[t].cost * 1e6, p->tasks[t].spec);
        else printf("  %-16s x%-3g %10s     %s\n", p->tasks[t].name, p->tasks[t].weight, "untuned", p->tasks[t].spec);
        est += p->tasks[t].weight * sched[t].cost;
        all &= sched[t].from_log;
      }
      if (all) printf("kernels' logged latencies weighted: %.3f ms (glue not included; time the runner for the real figure)\n", est * 1e3);
      printf("memory: arena %.2f MiB for intermediate tensors (%.2f MiB if each had its own buffer), weights %.2f MiB, "
             "%.2f MiB of weights in the kernels' layouts\n",
             res.arena_bytes / 1048576.0, res.naive_bytes / 1048576.0, res.weight_bytes / 1048576.0,
             res.packed_bytes / 1048576.0);
    }
    if (cli_get(o, NOPT(o), "--build")) {
      int m = run_make(dir);
      if (m) {
        fprintf(stderr, "cwm compile: make -C %s failed (%d)\n", dir, m);
        rc = CWM_ECOMPILER;
      } else if (!quiet) {
        printf("built %s/lib%s.a and %s/%s_runner\n", dir, P, dir, P);
      }
    }
  }
  cwm_netc_schedules_free(sched, p->ntasks);
  free(sched);
  cwm_partition_free(p);
  cwm_graph_free(g);
  return rc;
}
