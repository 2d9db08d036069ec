/* cmd_world.c: `cwm train` (the world model's encoder, transition and ranker from the data set)
 * and `cwm eval ranking` (held-out ranking quality against ansor, the ablations and random). */
#include "cli.h"

#include "cwm/train.h"
#include "cwm/world.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *TRAIN_HELP =
    "usage: cwm train encoder|transition|ranker|all --out MODEL [--data TRAJ] [--records LOG]\n"
    "                 [--model-file IN] [--epochs E] [--batch B] [--max-traj N] [--lr LR]\n"
    "                 [--width W] [--layers L] [--heads H] [--window T] [--valid-fraction F]\n"
    "                 [--rounds R] [--seed S] [--no-contrastive] [--targets-cache FILE] [--target-states K]\n"
    "                 [--value-gap G] [--weight-decay WD]\n"
    "                 [--mode rollout|value|paper|no-transition|static] [--paper-margin 0|1] [--quiet]\n"
    "Trains the compiler world model (DESIGN.md): `all` builds the vocabulary from the\n"
    "trajectories of --data (cwm dataset sample), trains the encoder contrastively on noise\n"
    "pairs, the TransH transition on rollouts with the encoder frozen, and, with --records\n"
    "(measured records: cwm dataset measure / cwm tune logs), the LambdaMART ranker. encoder,\n"
    "transition and ranker train one part of the model of --model-file (encoder may start a new\n"
    "one). Everything is split by workload key: the --valid-fraction (default 0.15) of workloads\n"
    "is held out for validation and never trained on; cwm eval ranking uses the same split.\n"
    "The model is written to --out after every part (atomically), with progress and validation\n"
    "losses on stderr. Defaults: width 128, 4 heads, 2 layers, window 128 tokens, 2 epochs,\n"
    "batch 32, lr 1e-3, 300 trees. --no-contrastive skips the encoder training (ablation).\n"
    "transition with --records also trains the value head: a pairwise ranking loss on the\n"
    "measured records of 85% of the training workloads, through the rollout (the other 15%\n"
    "show how it generalizes; the weights kept are the average over the second half of the\n"
    "epochs). Pairs closer than --value-gap in log cost (default 0.05) are no pair;\n"
    "--weight-decay (default 0.01) is the transition's AdamW decay.\n"
    "--mode (ranker, all) sets what the ranker sees and the search scores by: rollout (the\n"
    "world model, default: z_T - z_0, the value head's score, the action features), value (the\n"
    "world model through its value head only: z_0, the value head's score of the rollout, the\n"
    "action features), paper (the design's ranker: the predicted z_T, the action features of the\n"
    "step list alone and the hardware, nothing read from the final program; --paper-margin 1\n"
    "boosts the trees from the value head's score, 0 (default) leaves it out), no-transition\n"
    "(z_0 and the action features: ablation) or static (the encoding of each candidate's printed\n"
    "final state: ablation, slow); kept in the file. A ranker trained by this cwm reads each\n"
    "record's machine (its target's threads and vector width) in its hardware columns, and in a\n"
    "search the search's.\n"
    "--targets-cache FILE keeps the transition's encoder targets in FILE.training and\n"
    "FILE.validation (reused only for the same encoder, trajectories and --target-states).\n"
    "--target-states K (transition): encode only K states of each trajectory as targets (the\n"
    "first, the last and K - 2 drawn between them, by --seed); the rollout runs through every\n"
    "step and is matched where a target is. Encoding is most of the cost (about 15 ms a state on\n"
    "one core), so K = 4 on trajectories of about 16 steps trains on four times the trajectories\n"
    "in the same time. 0 (default): every state.\n"
    "\n"
    "cwm train ansor --records LOG --out FILE [--valid-fraction F] [--seed S]: Ansor's cost model\n"
    "(features + XGBoost) trained on the training part of LOG (every workload when F is 0),\n"
    "saved for cwm tune --model ansor --pretrained FILE (the pre-trained baseline).\n";

static const char *EVAL_HELP =
    "usage: cwm eval ranking --model-file MODEL --records LOG [--valid-fraction F]\n"
    "                        [--ablation-model MODEL2] [--seed S] [--out REPORT.md]\n"
    "                        [--dump-rows FILE]\n"
    "Ranks the measured records of the held-out workloads of LOG (split by workload key with\n"
    "fraction F, default 0.15: the split cwm train used) with the world model, its ablations\n"
    "(no transition: ranker on z_0 + action features; static final state: ranker on the\n"
    "encoding of the real final text; with --ablation-model, a model trained with\n"
    "--no-contrastive), ansor trained on the training workloads of LOG, and random. Prints\n"
    "TenSet's top-1/top-5 scores, NDCG@10 and Kendall's tau (means over workloads), the\n"
    "scoring speed of world and ansor on the same candidates, and the embedding similarity of\n"
    "shape +-1 noise pairs against random pairs, as Markdown (also to --out). --dump-rows\n"
    "writes every record's features for analysis, a line each: part (0 training, 1 held-out),\n"
    "group, cost (s), ansor's score (held-out only), z_T, action features, E(s_T), z_0.\n"
    "\n"
    "usage: cwm eval score --records LOG [--model {world,ansor,random}] [--model-file MODEL]\n"
    "                      [--pretrained FILE] [--seed S] [--list] [--train LOG [--train-count N]]\n"
    "How a cost model (default world, the default model file) orders the measured records of\n"
    "each workload in LOG (a tuning log, all of it): best latency, the latency of the model's\n"
    "first pick and best of its top 8, top-1/top-5 scores, NDCG@10, Kendall's tau; --list\n"
    "prints every record in the model's order. For looking into a search's picks. --train LOG\n"
    "first updates the model with LOG's measured records (the first N: --train-count), 64 at a\n"
    "time, as the search that measured them did: how that search's model orders other records.\n"
    "\n"
    "usage: cwm eval noise --workload A --other B [--count N] [--seed S] [--suite FILE]\n"
    "                      [--candidates LOG] [--model {world,ansor,random}] [--model-file MODEL]\n"
    "                      [--pretrained FILE]\n"
    "Syntactic noise without measuring: N (256) candidates of A from the search's initial\n"
    "sampler, or with --candidates the schedules of LOG's records of A (a tuning log of A: the\n"
    "programs a search measured, which are harder to tell apart), the same schedules replayed\n"
    "on B (sampled ones with split lengths shrunk to fit, a log's with them kept: a tile that no\n"
    "longer divides is an uneven one), both scored by the model; prints how many fit both,\n"
    "Kendall's tau-b of the two score vectors and how many of A's top 8 are B's top 8. A and B\n"
    "are meant to be one computation at shapes one apart (matmul 1024 and 1023): a model that\n"
    "reads programs, not their spelling, gives tau near 1.\n";

static int train_ansor(int argc, char **argv) {
  cli_opt o[] = {{"--records", 1, NULL}, {"--out", 1, NULL}, {"--valid-fraction", 1, NULL}, {"--seed", 1, NULL},
                 {"--quiet", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), TRAIN_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *records = cli_get(o, NOPT(o), "--records"), *out = cli_get(o, NOPT(o), "--out");
  if (!records || !out) return cli_usage("train", TRAIN_HELP, "train ansor needs --records LOG and --out FILE");
  double f = cli_get_double(o, NOPT(o), "--valid-fraction", 0.15);
  if (!(f >= 0 && f < 1)) return cli_usage("train", TRAIN_HELP, "0 <= --valid-fraction < 1");
  cwm_err e = {0};
  cli_say say = {"train", cli_get(o, NOPT(o), "--quiet") != NULL};
  if (cwm_ansor_pretrain(records, f, (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1), out, cli_progress, &say, &e))
    return cli_fail(&e);
  fprintf(stderr, "cwm train: ansor model written to %s\n", out);
  return 0;
}

/* A new model with the vocabulary of the trajectories in data and the encoder options given. */
static cwm_world *new_world(const cli_opt *o, int nopt, const char *data, const cwm_train_opts *to, cwm_err *e) {
  cwm_vocab *v = NULL;
  if (cwm_world_build_vocab(data, to->max_traj > 0 ? to->max_traj : 4000, 2, &v, e)) return NULL;
  fprintf(stderr, "cwm train: vocabulary of %d tokens from %s\n", cwm_vocab_size(v), data);
  cwm_world_config c;
  cwm_world_config_default(&c);
  c.enc.width = cli_get_int(o, nopt, "--width", c.enc.width);
  c.enc.layers = cli_get_int(o, nopt, "--layers", c.enc.layers);
  c.enc.heads = cli_get_int(o, nopt, "--heads", c.enc.heads);
  c.enc.window = cli_get_int(o, nopt, "--window", c.enc.window);
  c.enc.overlap = c.enc.window / 4;
  return cwm_world_new(&c, v, to->seed, e);
}

int cmd_train(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return cli_usage("train", TRAIN_HELP, NULL);
    return cli_usage("train", TRAIN_HELP, "which part? encoder, transition, ranker, all or ansor");
  }
  const char *part = argv[1];
  if (!strcmp(part, "ansor")) return train_ansor(argc - 1, argv + 1);
  int all = !strcmp(part, "all"), enc = all || !strcmp(part, "encoder"), tra = all || !strcmp(part, "transition"),
      ran = all || !strcmp(part, "ranker");
  if (!enc && !tra && !ran) return cli_usage("train", TRAIN_HELP, "unknown part '%s'", part);
  cli_opt o[] = {{"--out", 1, NULL},        {"--data", 1, NULL},    {"--records", 1, NULL},
                 {"--model-file", 1, NULL}, {"--epochs", 1, NULL},  {"--batch", 1, NULL},
                 {"--max-traj", 1, NULL},   {"--lr", 1, NULL},      {"--width", 1, NULL},
                 {"--layers", 1, NULL},     {"--heads", 1, NULL},   {"--window", 1, NULL},
                 {"--valid-fraction", 1, NULL}, {"--rounds", 1, NULL}, {"--seed", 1, NULL},
                 {"--no-contrastive", 0, NULL}, {"--quiet", 0, NULL}, {"--targets-cache", 1, NULL},
                 {"--value-gap", 1, NULL},   {"--weight-decay", 1, NULL}, {"--mode", 1, NULL},
                 {"--paper-margin", 1, NULL}, {"--target-states", 1, NULL}};
  int rc = cli_parse(argc - 1, argv + 1, o, NOPT(o), TRAIN_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *out = cli_get(o, NOPT(o), "--out"), *data = cli_get(o, NOPT(o), "--data"),
             *records = cli_get(o, NOPT(o), "--records"), *in = cli_get(o, NOPT(o), "--model-file");
  if (!out) return cli_usage("train", TRAIN_HELP, "--out MODEL is required");
  if ((enc || tra) && !data) return cli_usage("train", TRAIN_HELP, "--data TRAJ is required to train the %s", enc ? "encoder" : "transition");
  if (ran && !records) {
    if (!all) return cli_usage("train", TRAIN_HELP, "--records LOG is required to train the ranker");
    ran = 0;
  }
  if (!all && !in && (tra || ran)) return cli_usage("train", TRAIN_HELP, "--model-file IN is required for %s", part);
  cwm_train_opts to;
  cwm_train_opts_default(&to);
  to.traj_path = data;
  to.log_path = records;
  to.valid_fraction = cli_get_double(o, NOPT(o), "--valid-fraction", 0.15);
  to.epochs = cli_get_int(o, NOPT(o), "--epochs", to.epochs);
  to.batch = cli_get_int(o, NOPT(o), "--batch", to.batch);
  to.max_traj = cli_get_int(o, NOPT(o), "--max-traj", 0);
  to.ranker_rounds = cli_get_int(o, NOPT(o), "--rounds", to.ranker_rounds);
  to.seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  to.lr = (float)cli_get_double(o, NOPT(o), "--lr", to.lr);
  to.no_contrastive = cli_get(o, NOPT(o), "--no-contrastive") != NULL;
  to.targets_cache = cli_get(o, NOPT(o), "--targets-cache");
  to.target_states = cli_get_int(o, NOPT(o), "--target-states", 0);
  to.value_gap = (float)cli_get_double(o, NOPT(o), "--value-gap", to.value_gap);
  to.weight_decay = (float)cli_get_double(o, NOPT(o), "--weight-decay", to.weight_decay);
  if (!(to.value_gap >= 0 && to.value_gap < 5) || !(to.weight_decay >= 0 && to.weight_decay < 10))
    return cli_usage("train", TRAIN_HELP, "0 <= --value-gap < 5, 0 <= --weight-decay < 10");
  if (to.epochs < 1 || to.batch < 2 || to.valid_fraction < 0 || to.valid_fraction >= 1 || to.lr <= 0 || to.ranker_rounds < 1 ||
      to.target_states < 0 || to.target_states == 1)
    return cli_usage("train", TRAIN_HELP, "--epochs >= 1, --batch >= 2, 0 <= --valid-fraction < 1, --lr > 0, --rounds >= 1, "
                                          "--target-states 0 (every state) or >= 2");
  const char *ms = cli_get(o, NOPT(o), "--mode");
  int mode = ms ? cwm_world_mode_parse(ms) : -1;
  if (ms && mode < 0)
    return cli_usage("train", TRAIN_HELP, "--mode: rollout, value, paper, no-transition or static, not '%s'", ms);
  if (ms && !ran) return cli_usage("train", TRAIN_HELP, "--mode applies to the ranker (train ranker or all)");
  int pmargin = cli_get_int(o, NOPT(o), "--paper-margin", -1);
  if (cli_get(o, NOPT(o), "--paper-margin") && (mode != CWM_MODE_PAPER || (pmargin != 0 && pmargin != 1)))
    return cli_usage("train", TRAIN_HELP, "--paper-margin 0 or 1 goes with --mode paper");
  to.stop = &cli_stop;
  cli_say say = {"train", cli_get(o, NOPT(o), "--quiet") != NULL};
  to.progress = cli_progress;
  to.progress_ud = &say;
  cli_catch_stop();
  cwm_err e = {0};
  cwm_world *w = NULL;
  double t0 = cwm_now();
  if (in) {
    w = cwm_world_load(in, &e);
    if (!w) return cli_fail(&e);
  } else if (!(w = new_world(o, NOPT(o), data, &to, &e))) {
    return cli_fail(&e);
  }
  rc = 0;
  cwm_buf notes;
  cwm_buf_init(&notes);
  cwm_buf_puts(&notes, cwm_world_notes(w));
  if (enc && !to.no_contrastive) {
    double t = cwm_now();
    rc = cwm_world_train_encoder(w, &to, &e);
    cwm_buf_printf(&notes, "encoder: %s, %d epochs, batch %d, lr %g, valid fraction %.2f, seed %llu: %.0f s\n", data,
                   to.epochs, to.batch, (double)to.lr, to.valid_fraction, (unsigned long long)to.seed, cwm_now() - t);
    if (!rc) {
      cwm_world_set_notes(w, notes.s);
      rc = cwm_world_save(w, out, &e);
    }
  } else if (enc) {
    cwm_buf_puts(&notes, "encoder: not trained (--no-contrastive)\n");
  }
  if (!rc && tra && !cli_stop) {
    double t = cwm_now();
    rc = cwm_world_train_transition(w, &to, &e);
    cwm_buf_printf(&notes, "transition: %s, %d epochs, batch %d: %.0f s\n", data, to.epochs * 4, to.batch,
                   cwm_now() - t);
    if (!rc) {
      cwm_world_set_notes(w, notes.s);
      rc = cwm_world_save(w, out, &e);
    }
  }
  if (!rc && ran && !cli_stop) {
    double t = cwm_now();
    if (mode >= 0) cwm_world_set_mode(w, mode);
    if (pmargin >= 0) cwm_world_set_paper_margin(w, pmargin);
    rc = cwm_world_train_ranker(w, &to, &e);
    int paper = cwm_world_mode(w) == CWM_MODE_PAPER;
    cwm_buf_printf(&notes, "ranker: %s (training workloads, valid fraction %.2f), %d trees, mode %s%s: %.0f s\n",
                   records, to.valid_fraction, to.ranker_rounds, cwm_world_mode_name(cwm_world_mode(w)),
                   !paper ? "" : cwm_world_get_config(w)->paper_margin ? " (value as base margin)" : " (no value)",
                   cwm_now() - t);
    if (!rc) {
      cwm_world_set_notes(w, notes.s);
      rc = cwm_world_save(w, out, &e);
    }
  }
  cwm_buf_free(&notes);
  cwm_world_free(w);
  if (rc) return cli_fail(&e);
  fprintf(stderr, "cwm train: %s written in %.0f s%s\n", out, cwm_now() - t0, cli_stop ? " (interrupted)" : "");
  return 0;
}

static int eval_score(int argc, char **argv) {
  cli_opt o[] = {{"--records", 1, NULL},    {"--model", 1, NULL}, {"--model-file", 1, NULL},
                 {"--pretrained", 1, NULL}, {"--seed", 1, NULL},  {"--list", 0, NULL},
                 {"--train", 1, NULL},      {"--train-count", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), EVAL_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *recs = cli_get(o, NOPT(o), "--records"), *model = cli_get(o, NOPT(o), "--model");
  const char *train = cli_get(o, NOPT(o), "--train");
  if (!recs) return cli_usage("eval", EVAL_HELP, "--records LOG is required");
  if (!train && cli_get(o, NOPT(o), "--train-count"))
    return cli_usage("eval", EVAL_HELP, "--train-count N needs --train LOG");
  cwm_err e = {0};
  cwm_costmodel *m = cli_costmodel(model ? model : "world", (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1),
                                   cli_get(o, NOPT(o), "--pretrained"), cli_get(o, NOPT(o), "--model-file"), 0, &e);
  if (!m) return cli_fail(&e);
  cwm_buf out;
  cwm_buf_init(&out);
  long tcount = cli_get_long(o, NOPT(o), "--train-count", 0);
  cwm_buf_printf(&out, "# cwm eval score\n\nmodel %s, records %s\n\n", m->name, recs);
  if (train) {
    rc = cwm_eval_train(m, train, (int)tcount, 64, &e);
    if (rc) {
      cwm_costmodel_free(m);
      cwm_buf_free(&out);
      return cli_fail(&e);
    }
    if (tcount > 0) cwm_buf_printf(&out, "trained first on the first %ld records of %s, 64 at a time\n\n", tcount, train);
    else cwm_buf_printf(&out, "trained first on the records of %s, 64 at a time\n\n", train);
  }
  rc = cwm_eval_score(m, recs, cli_get(o, NOPT(o), "--list") != NULL, &out, &e);
  cwm_costmodel_free(m);
  if (!rc) fputs(out.s, stdout);
  cwm_buf_free(&out);
  return rc ? cli_fail(&e) : 0;
}

static int eval_noise(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL},   {"--other", 1, NULL}, {"--count", 1, NULL},
                 {"--seed", 1, NULL},       {"--suite", 1, NULL}, {"--model", 1, NULL},
                 {"--model-file", 1, NULL}, {"--pretrained", 1, NULL}, {"--candidates", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), EVAL_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  if (!cli_get(o, NOPT(o), "--workload") || !cli_get(o, NOPT(o), "--other"))
    return cli_usage("eval", EVAL_HELP, "noise needs --workload A and --other B");
  long count = cli_get_long(o, NOPT(o), "--count", 256), seed = cli_get_long(o, NOPT(o), "--seed", 1);
  if (count < 3 || count > 100000) return cli_usage("eval", EVAL_HELP, "--count must be 3..100000");
  const char *suite = cli_get(o, NOPT(o), "--suite"), *model = cli_get(o, NOPT(o), "--model");
  cwm_workload *a = cli_workload(cli_get(o, NOPT(o), "--workload"), suite, &rc);
  if (!a) return rc;
  cwm_workload *b = cli_workload(cli_get(o, NOPT(o), "--other"), suite, &rc);
  if (!b) {
    cwm_workload_free(a);
    return rc;
  }
  cwm_err e = {0};
  cwm_costmodel *m = cli_costmodel(model ? model : "world", (uint64_t)seed, cli_get(o, NOPT(o), "--pretrained"),
                                   cli_get(o, NOPT(o), "--model-file"), 0, &e);
  if (m) {
    cwm_buf out;
    cwm_buf_init(&out);
    cwm_buf_printf(&out, "| model | A | B | candidates fitting both | Kendall tau-b | top-8 overlap |\n|---|---|---|---|---|---|\n");
    rc = cwm_eval_noise(m, a, b, (int)count, (uint64_t)seed, cli_get(o, NOPT(o), "--candidates"), &out, NULL, &e);
    if (!rc) fputs(out.s, stdout);
    cwm_buf_free(&out);
    cwm_costmodel_free(m);
  } else {
    rc = e.code ? e.code : 1;
  }
  cwm_workload_free(a);
  cwm_workload_free(b);
  return rc ? cli_fail(&e) : 0;
}

int cmd_eval(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return cli_usage("eval", EVAL_HELP, NULL);
    return cli_usage("eval", EVAL_HELP, "which evaluation? ranking, score or noise");
  }
  if (!strcmp(argv[1], "score")) return eval_score(argc - 1, argv + 1);
  if (!strcmp(argv[1], "noise")) return eval_noise(argc - 1, argv + 1);
  if (strcmp(argv[1], "ranking")) return cli_usage("eval", EVAL_HELP, "unknown evaluation '%s'", argv[1]);
  cli_opt o[] = {{"--model-file", 1, NULL}, {"--records", 1, NULL}, {"--valid-fraction", 1, NULL},
                 {"--ablation-model", 1, NULL}, {"--seed", 1, NULL}, {"--out", 1, NULL},
                 {"--dump-rows", 1, NULL}};
  int rc = cli_parse(argc - 1, argv + 1, o, NOPT(o), EVAL_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *mf = cli_get(o, NOPT(o), "--model-file"), *recs = cli_get(o, NOPT(o), "--records");
  if (!mf) mf = cwm_world_default_path();
  if (!mf) return cli_usage("eval", EVAL_HELP, "--model-file MODEL is required (no default model found)");
  if (!recs) return cli_usage("eval", EVAL_HELP, "--records LOG is required");
  cwm_eval_opts eo = {0};
  eo.records = recs;
  eo.valid_fraction = 0.15;
  eo.valid_fraction = cli_get_double(o, NOPT(o), "--valid-fraction", eo.valid_fraction);
  eo.ablation_model = cli_get(o, NOPT(o), "--ablation-model");
  eo.seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  eo.speed_candidates = 2000;
  eo.dump_rows = cli_get(o, NOPT(o), "--dump-rows");
  cli_say say = {"eval", 0};
  eo.progress = cli_progress;
  eo.progress_ud = &say;
  cwm_err e = {0};
  cwm_world *w = cwm_world_load(mf, &e);
  if (!w) return cli_fail(&e);
  cwm_buf out;
  cwm_buf_init(&out);
  cwm_buf_printf(&out, "# cwm eval ranking\n\nmodel %s, records %s\n\n", mf, recs);
  rc = cwm_world_eval_ranking(w, &eo, &out, &e);
  cwm_world_free(w);
  if (rc) {
    cwm_buf_free(&out);
    return cli_fail(&e);
  }
  fputs(out.s, stdout);
  const char *path = cli_get(o, NOPT(o), "--out");
  if (path && cwm_write_file_atomic(path, out.s, out.len, &e)) {
    cwm_buf_free(&out);
    return cli_fail(&e);
  }
  cwm_buf_free(&out);
  return 0;
}
