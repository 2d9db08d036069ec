/* fuzz_ansormodel.c: libFuzzer target for the Ansor cost model's file loader
 * (cwm_costmodel_ansor_from_buffer). The last 8 bytes of the input are overwritten with the
 * FNV-1a checksum of the rest, so mutations reach the header, program and row checks and the
 * booster behind the checksum gate. A file that loads must score states without trouble and
 * must save to a file that loads again; one that does not load fails with CWM_EMODEL (CWM_EDEP
 * is XGBoost itself refusing to start). Seeds (fuzz/corpus/ansormodel) are files written by the
 * model's save after training on a few measured records (an empty model, one with programs
 * and no booster, one with a booster). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/costmodel.h"

static cwm_dag *g_dag;
static cwm_state *g_states[2];
static char g_path[64];

static void setup(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("matmul M=8 N=8 K=8", NULL, &e);
  if (!w) abort();
  g_dag = cwm_dag_new(w, &e);
  cwm_workload_free(w);
  if (!g_dag) abort();
  cwm_step *steps = NULL;
  int ns = 0;
  g_states[0] = cwm_state_init(g_dag);
  if (cwm_steps_parse("[[\"SP\",2,0,8,[4],1],[\"SP\",2,2,8,[8],1]]", &steps, &ns, &e) ||
      cwm_state_replay(g_dag, steps, ns, &g_states[1], NULL, &e))
    abort();
  free(steps);
  snprintf(g_path, sizeof g_path, "/tmp/fuzz_ansormodel.%d", (int)getpid());
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  if (!g_dag) setup();
  unsigned char *buf = malloc(n ? n : 1);
  memcpy(buf, data, n);
  if (n >= 8) {
    uint64_t h = cwm_hash64(buf, n - 8);
    for (int i = 0; i < 8; i++) buf[n - 8 + i] = (unsigned char)(h >> (8 * i));
  }
  cwm_err e = {0};
  cwm_costmodel *m = cwm_costmodel_ansor_from_buffer(1, buf, n, &e);
  if (m) {
    double sc[2];
    if (cwm_costmodel_predict(m, g_states, 2, sc, &e) != 0 && e.code != CWM_EDEP) abort();
    cwm_err se = {0};
    if (m->save && m->save(m, g_path, &se) == 0) {
      cwm_costmodel *m2 = cwm_costmodel_ansor(1, g_path, &se);
      if (!m2) {
        fprintf(stderr, "saved model does not load again: %s\n", se.msg);
        abort();
      }
      cwm_costmodel_free(m2);
      unlink(g_path);
    }
    cwm_costmodel_free(m);
  } else if (e.code != CWM_EMODEL && e.code != CWM_EDEP) {
    fprintf(stderr, "load failed with code %d: %s\n", e.code, e.msg);
    abort();
  }
  free(buf);
  return 0;
}
