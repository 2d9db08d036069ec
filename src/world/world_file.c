/* world_file.c: the world model's file. It is the container of modelfile.h with sections
 * "world.config" (key=value text), "vocab", one tensor per parameter ("enc.<name>", "act.<name>"),
 * "ranker" (optional) and "notes"; loading checks every section against the config. */
#include "world_internal.h"

#include "cwm/modelfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cwm_world_save(cwm_world *w, const char *path, cwm_err *err) {
  cwm_mfile_writer *mw = cwm_mfile_writer_new();
  cwm_buf cfg;
  cwm_buf_init(&cfg);
  const cwm_enc_config *e = &w->cfg.enc;
  cwm_buf_printf(&cfg,
                 "world_version=%d\nvocab=%d\nwidth=%d\nheads=%d\nlayers=%d\nff=%d\nwindow=%d\noverlap=%d\n"
                 "margin=%.9g\nno_transition=%d\nstatic_final=%d\naction_vocab=%d\nact_round=%d\nranker_z0=%d\n"
                 "paper=%d\npaper_margin=%d\nhw_target=%d\n",
                 CWM_WORLD_VERSION, e->vocab, e->width, e->heads, e->layers, e->ff, e->window, e->overlap,
                 (double)w->cfg.margin, w->cfg.no_transition, w->cfg.static_final, cwm_action_vocab(), w->cfg.act_round,
                 w->cfg.ranker_z0, w->cfg.paper, w->cfg.paper_margin, w->cfg.hw_target);
  int rc = cwm_mfile_add_text(mw, "world.config", cfg.s, err);
  cwm_buf_free(&cfg);
  cwm_buf vb;
  cwm_buf_init(&vb);
  if (!rc) rc = cwm_vocab_save(w->vocab, &vb, err);
  if (!rc) rc = cwm_mfile_add_bytes(mw, "vocab", vb.s, vb.len, err);
  cwm_buf_free(&vb);
  for (int i = 0; !rc && i < cwm_encoder_nparams(w->enc); i++) {
    cwm_param *p = cwm_encoder_param(w->enc, i);
    char name[96];
    snprintf(name, sizeof name, "enc.%s", p->name);
    rc = cwm_mfile_add_tensor(mw, name, p->w, p->ndim, p->shape, err);
  }
  for (int i = 0; !rc && i < w->tp.n; i++)
    rc = cwm_mfile_add_tensor(mw, w->tp.p[i].name, w->tp.p[i].w, w->tp.p[i].ndim, w->tp.p[i].shape, err);
  if (!rc && w->ranker && cwm_ranker_rounds(w->ranker) > 0) {
    void *data = NULL;
    size_t len = 0;
    rc = cwm_ranker_save(w->ranker, &data, &len, err);
    if (!rc) rc = cwm_mfile_add_bytes(mw, "ranker", data, len, err);
    free(data);
  }
  if (!rc && w->notes) rc = cwm_mfile_add_text(mw, "notes", w->notes, err);
  if (!rc) rc = cwm_mfile_write(mw, path, err);
  cwm_mfile_writer_free(mw);
  return rc;
}

static int cfg_int(const char *text, const char *key, int *out) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, key, kl) && p[kl] == '=') {
      char *end;
      long v = strtol(p + kl + 1, &end, 10);
      if (end == p + kl + 1 || v < -1000000000L || v > 1000000000L) return 0;
      *out = (int)v;
      return 1;
    }
    p = strchr(p, '\n');
    if (p) p++;
  }
  return 0;
}

static int load_params(const cwm_mfile *f, const char *path, const char *prefix, cwm_param *p, cwm_err *err) {
  char name[96];
  snprintf(name, sizeof name, "%s%s", prefix, p->name);
  cwm_err e = {0};
  if (cwm_mfile_need_tensor(f, name, p->ndim, p->shape, &e))
    return cwm_fail(err, CWM_EMODEL, "model file %s: %.400s", path, e.msg);
  int shape[CWM_MFILE_MAX_DIMS], nd = 0;
  const float *data = cwm_mfile_tensor(f, name, shape, &nd);
  if (!data) return cwm_fail(err, CWM_EMODEL, "model file %s: tensor '%s' missing", path, name);
  for (size_t i = 0; i < p->n; i++)
    if (!isfinite(data[i]))
      return cwm_fail(err, CWM_EMODEL, "model file %s: tensor '%s' holds a non-finite value at %zu", path, name, i);
  memcpy(p->w, data, sizeof(float) * p->n);
  return 0;
}

/* cwm_world_new allocates every weight the config implies (four floats each: the weights, their
 * gradients and two moments) before any tensor of the file is compared with it, and sizes within
 * the ranges checked below (width 4096, 64 layers, ff 65536) ask for about 155 GB. Every weight
 * must come from the file, so a config whose largest tensors alone would not fit in the file's
 * sections is refused first: what loading allocates stays a small multiple of the file's size. */
static int weights_fit(const cwm_mfile *f, const cwm_world_config *c, int vocab, const char *path, cwm_err *err) {
  double D = c->enc.width, F = c->enc.ff;
  /* a lower bound on the floats: embeddings, each layer's qkv, proj, fc and fc2, the transition's
   * three D x D products */
  double need = ((double)vocab + c->enc.window) * D + c->enc.layers * (4 * D * D + 2 * F * D) + 3 * D * D;
  double have = 0;
  for (int i = 0; i < cwm_mfile_count(f); i++) {
    size_t n = 0;
    if (cwm_mfile_section_kind(f, i) == CWM_MFILE_TENSOR && cwm_mfile_bytes(f, cwm_mfile_section_name(f, i), &n))
      have += (double)n / sizeof(float);
  }
  if (need > have)
    return cwm_fail(err, CWM_EMODEL,
                    "model file %s: world.config (width %d, layers %d, ff %d, window %d) needs at least %.0f weights; "
                    "the file's tensors hold %.0f",
                    path, c->enc.width, c->enc.layers, c->enc.ff, c->enc.window, need, have);
  return 0;
}

cwm_world *cwm_world_load(const char *path, cwm_err *err) {
  cwm_mfile *f = cwm_mfile_load(path, err);
  if (!f) return NULL;
  cwm_world *w = NULL;
  cwm_vocab *vocab = NULL;
  const char *cfg = cwm_mfile_text(f, "world.config");
  if (!cfg) {
    cwm_fail(err, CWM_EMODEL, "model file %s: no world.config section (not a world model file?)", path);
    goto out;
  }
  int ver = 0;
  if (!cfg_int(cfg, "world_version", &ver)) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world.config has no world_version", path);
    goto out;
  }
  if (ver < 1 || ver > CWM_WORLD_VERSION) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world model version %d; this cwm reads version %d (retrain with cwm train)",
             path, ver, CWM_WORLD_VERSION);
    goto out;
  }
  cwm_world_config c;
  cwm_world_config_default(&c);
  int av = 0, margin_milli = 0;
  (void)margin_milli;
  if (!cfg_int(cfg, "width", &c.enc.width) || !cfg_int(cfg, "heads", &c.enc.heads) ||
      !cfg_int(cfg, "layers", &c.enc.layers) || !cfg_int(cfg, "ff", &c.enc.ff) ||
      !cfg_int(cfg, "window", &c.enc.window) || !cfg_int(cfg, "overlap", &c.enc.overlap) ||
      !cfg_int(cfg, "action_vocab", &av)) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world.config lacks a field (width, heads, layers, ff, window, overlap, action_vocab)", path);
    goto out;
  }
  if (av != cwm_action_vocab()) {
    cwm_fail(err, CWM_EMODEL, "model file %s: action vocabulary of %d ids; this cwm has %d", path, av, cwm_action_vocab());
    goto out;
  }
  if (c.enc.width < 4 || c.enc.width > 4096 || c.enc.layers < 1 || c.enc.layers > 64 || c.enc.window < 2 ||
      c.enc.window > 8192 || c.enc.heads < 1 || c.enc.ff < 1 || c.enc.ff > 65536) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world.config sizes out of range", path);
    goto out;
  }
  const char *mline = strstr(cfg, "margin=");
  if (mline) c.margin = strtof(mline + 7, NULL);
  cfg_int(cfg, "no_transition", &c.no_transition);
  cfg_int(cfg, "static_final", &c.static_final); /* absent in older files: 0 */
  c.act_round = 0; /* absent before version 5: floor buckets */
  cfg_int(cfg, "act_round", &c.act_round);
  c.ranker_z0 = 0; /* absent before the value mode */
  cfg_int(cfg, "ranker_z0", &c.ranker_z0);
  c.paper = c.hw_target = 0; /* absent before version 6: no paper mode, this machine's hardware */
  cfg_int(cfg, "paper", &c.paper);
  cfg_int(cfg, "paper_margin", &c.paper_margin);
  cfg_int(cfg, "hw_target", &c.hw_target);
  if (c.no_transition) c.static_final = 0;
  if (c.no_transition || c.static_final) c.ranker_z0 = 0;
  if (c.no_transition || c.static_final || c.ranker_z0) c.paper = 0;
  size_t vn = 0;
  const void *vb = cwm_mfile_bytes(f, "vocab", &vn);
  if (!vb) {
    cwm_fail(err, CWM_EMODEL, "model file %s: no vocab section", path);
    goto out;
  }
  vocab = cwm_vocab_load(vb, vn, err);
  if (!vocab) {
    if (err) {
      char m[sizeof err->msg];
      snprintf(m, sizeof m, "%s", err->msg);
      cwm_fail(err, CWM_EMODEL, "model file %s: vocab: %.400s", path, m);
    }
    goto out;
  }
  if (weights_fit(f, &c, cwm_vocab_size(vocab), path, err)) goto out;
  w = cwm_world_new(&c, vocab, 0, err);
  vocab = NULL;
  if (!w) {
    /* the encoder's own checks (width a multiple of heads, overlap below window) speak of its
     * config; here the config came from the file, so the error is the file's */
    if (err && err->code != CWM_EDEP) {
      char m[sizeof err->msg];
      snprintf(m, sizeof m, "%s", err->msg);
      cwm_fail(err, CWM_EMODEL, "model file %s: world.config: %.400s", path, m);
    }
    goto out;
  }
  for (int i = 0; i < cwm_encoder_nparams(w->enc); i++)
    if (load_params(f, path, "enc.", cwm_encoder_param(w->enc, i), err)) goto fail;
  for (int i = 0; i < w->tp.n; i++) {
    if (ver == 1 && i >= TP_V_W1) break; /* version 1 has no value head */
    if (load_params(f, path, "", &w->tp.p[i], err)) goto fail;
  }
  if (ver == 1) wm_value_init(&w->tp, 1);
  size_t rn = 0;
  /* a ranker of an earlier version read rows of another layout: it is left out (train the ranker
   * again: cwm train ranker --model-file OLD --records LOG --out NEW) */
  const void *rb = ver < 4 ? NULL : cwm_mfile_bytes(f, "ranker", &rn); /* 5 and 6 changed no row */
  if (rb) {
    w->ranker = cwm_ranker_load(rb, rn, err);
    if (!w->ranker) goto fail;
    cwm_ranker_set_margin_col(w->ranker, w->D);
  }
  const char *notes = cwm_mfile_text(f, "notes");
  if (notes) w->notes = cwm_xstrdup(notes);
  goto out;
fail:
  cwm_world_free(w);
  w = NULL;
out:
  cwm_vocab_free(vocab);
  cwm_mfile_free(f);
  return w;
}

