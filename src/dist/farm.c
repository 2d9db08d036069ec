/* farm.c: the MPI worker farm of farm.h. Messages are byte strings of one binary (every rank runs
 * the same cwm): rank 0 sends LEAD (its pid and host) at start, SETUP (the measuring protocol),
 * REF (a reference output, once per worker), JOB (a chunk of candidates) and STOP; a worker sends
 * HELLO (its pid, host and target) and RESULT. Rank 0 never blocks on a worker: sends are
 * non-blocking and results are polled, so a dead or stopped worker costs a time-out, not the run. */
#define _GNU_SOURCE
#include "cwm/farm.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cwm_farm_built(void) {
#ifdef CWM_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

#ifndef CWM_HAVE_MPI

cwm_farm *cwm_farm_init(int *argc, char ***argv, cwm_err *err) {
  cwm_fail(err, CWM_EUSAGE, "this cwm was built without MPI (install libopenmpi-dev and rebuild) and cannot run "
                            "under mpirun with more than one rank");
  return NULL;
}
int cwm_farm_rank(const cwm_farm *f) { return 0; }
int cwm_farm_size(const cwm_farm *f) { return 1; }
int cwm_farm_lead(cwm_farm *f, cwm_measure_opts *mo, const cwm_farm_opts *fo, cwm_err *err) {
  return cwm_fail(err, CWM_EUSAGE, "built without MPI");
}
int cwm_farm_serve(cwm_farm *f, const cwm_measure_opts *local, cwm_err *err) {
  return cwm_fail(err, CWM_EUSAGE, "built without MPI");
}
void cwm_farm_report(const cwm_farm *f, cwm_buf *out) {}
void cwm_farm_end(cwm_farm *f) {}

#else

#include <mpi.h>

enum { TAG_LEAD = 1, TAG_SETUP, TAG_HELLO, TAG_REF, TAG_JOB, TAG_RESULT, TAG_STOP };
enum { W_NEW, W_IDLE, W_BUSY, W_LOST };
#define REF_SLOTS 8
#define HELLO_WAIT_S 60.0

/* The measuring protocol as it travels: the fields of cwm_measure_opts that rank 0 decides. */
typedef struct {
  int threads, repeats, flush_cache, batch, check, verbose;
  double min_repeat_ms, budget_s, slow_cutoff_s, run_timeout_s, build_timeout_s, tol;
  long mem_limit_mb;
  unsigned long long seed;
  char cc[256], cflags[512];
} wire_opts;

typedef struct {
  int pid;
  char host[64];
} who;

typedef struct {
  who id;
  cwm_target target;
} hello_msg;

typedef struct {
  uint64_t job, ref_hash;
  int count, rc;
  char msg[256];
} result_hdr;

typedef struct {
  uint64_t job, ref_hash;
  int count;
  wire_opts opts;
} job_hdr;

typedef struct {
  uint64_t hash;
  long len, red_len;
} ref_hdr;

typedef struct {
  int state;
  hello_msg hello;
  int local;            /* on rank 0's host: its pid can be checked and killed */
  uint64_t refs[REF_SLOTS]; /* the references it holds, in the order they were sent */
  int nrefs;
  uint64_t job;         /* the chunk it holds */
  double deadline;
  long chunks, candidates;
  MPI_Request *reqs;    /* sends in flight to it */
  cwm_buf *bufs;        /* their bytes */
  int nreqs, creqs;
} worker;

struct cwm_farm {
  cwm_measurer m; /* first: the measurer handed out is the farm */
  int rank, size;
  int workers_here; /* workers on this rank's host */
  who me, lead;
  worker *w;        /* [size], index 0 unused */
  cwm_farm_opts fo;
  int lead_sent;
  uint64_t next_job;
  int warned_local;
  /* a worker was lost: MPI_Finalize waits on every rank of the job, the dead one included, and can
   * hang for good, so the survivors leave without it (rank 0 tells the workers in STOP) */
  int skip_finalize;
};

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

static void tell(void (*fn)(void *, const char *), void *ud, const char *fmt, va_list ap) {
  if (!fn) return;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  fn(ud, line);
}

static void say(const cwm_farm *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const cwm_farm *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tell(f->fo.progress, f->fo.progress_ud, fmt, ap);
  va_end(ap);
}

static void warn(const cwm_farm *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(const cwm_farm *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tell(f->fo.warn, f->fo.warn_ud, fmt, ap);
  va_end(ap);
}

/* ---- sending without blocking ---------------------------------------------------------------- */

/* Drops the finished sends to worker k. A lost worker's are left alone: they may never finish,
 * nobody waits for them, and their bytes stay allocated, since MPI may still read them should
 * the worker come back to life. */
static void reap_sends(worker *w) {
  if (w->state == W_LOST) return;
  int out = 0;
  for (int i = 0; i < w->nreqs; i++) {
    int done = 0;
    MPI_Test(&w->reqs[i], &done, MPI_STATUS_IGNORE);
    if (done) {
      cwm_buf_free(&w->bufs[i]);
      continue;
    }
    w->reqs[out] = w->reqs[i];
    w->bufs[out++] = w->bufs[i];
  }
  w->nreqs = out;
}

/* Sends b's bytes to rank k with tag; b is taken over (kept until the send is done). */
static void post(cwm_farm *f, int k, int tag, cwm_buf *b) {
  worker *w = &f->w[k];
  reap_sends(w);
  if (w->nreqs == w->creqs) {
    w->creqs = w->creqs ? 2 * w->creqs : 8;
    w->reqs = cwm_xrealloc(w->reqs, sizeof *w->reqs * (size_t)w->creqs);
    w->bufs = cwm_xrealloc(w->bufs, sizeof *w->bufs * (size_t)w->creqs);
  }
  w->bufs[w->nreqs] = *b;
  cwm_buf_init(b);
  cwm_buf *mine = &w->bufs[w->nreqs];
  MPI_Isend(mine->s ? mine->s : "", (int)mine->len, MPI_BYTE, k, tag, MPI_COMM_WORLD, &w->reqs[w->nreqs]);
  w->nreqs++;
}

/* Receives the probed message (any size) into a fresh buffer; NULL on failure. */
static char *recv_probed(const MPI_Status *st, int *len) {
  int n = 0;
  MPI_Get_count(st, MPI_BYTE, &n);
  char *b = cwm_xmalloc((size_t)(n > 0 ? n : 1));
  if (MPI_Recv(b, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
    free(b);
    return NULL;
  }
  *len = n;
  return b;
}

/* A bounded reader over a received message. */
typedef struct {
  const char *p;
  size_t left;
  int bad;
} reader;

static void take(reader *r, void *dst, size_t n) {
  if (r->bad || r->left < n) {
    r->bad = 1;
    memset(dst, 0, n);
    return;
  }
  memcpy(dst, r->p, n);
  r->p += n;
  r->left -= n;
}

/* A string of the message, as a pointer into it (the writer puts the NUL). */
static const char *take_str(reader *r) {
  uint32_t n = 0;
  take(r, &n, sizeof n);
  if (r->bad || r->left < (size_t)n + 1 || r->p[n] != 0) {
    r->bad = 1;
    return NULL;
  }
  const char *s = r->p;
  r->p += n + 1;
  r->left -= n + 1;
  return s;
}

static void put_str(cwm_buf *b, const char *s) {
  uint32_t n = s ? (uint32_t)strlen(s) : 0;
  cwm_buf_append(b, &n, sizeof n);
  cwm_buf_append(b, s ? s : "", n);
  cwm_buf_putc(b, 0);
}

/* ---- start ------------------------------------------------------------------------------------- */

static void who_am_i(who *w) {
  w->pid = (int)getpid();
  cwm_hostname(w->host, sizeof w->host);
}

cwm_farm *cwm_farm_init(int *argc, char ***argv, cwm_err *err) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) {
    cwm_fail(err, CWM_EMEASURE, "MPI_Init failed");
    return NULL;
  }
  /* errors come back as codes: a lost peer must not end rank 0 */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  cwm_farm *f = cwm_xcalloc(1, sizeof *f);
  MPI_Comm_rank(MPI_COMM_WORLD, &f->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &f->size);
  who_am_i(&f->me);
  f->w = cwm_xcalloc((size_t)f->size, sizeof *f->w);
  /* the ranks on this host, rank 0 among them or not: a worker builds with its share of the cores */
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    int n = 1, zero = f->rank == 0, has0 = 0;
    MPI_Comm_size(local, &n);
    MPI_Allreduce(&zero, &has0, 1, MPI_INT, MPI_MAX, local);
    f->workers_here = n - has0;
    MPI_Comm_free(&local);
  }
  if (f->workers_here < 1) f->workers_here = 1;
  f->m.measure = NULL;
  if (f->rank == 0) {
    /* who the workers answer to, so that they notice (on this host) when it is gone */
    for (int k = 1; k < f->size; k++) {
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_buf_append(&b, &f->me, sizeof f->me);
      post(f, k, TAG_LEAD, &b);
    }
    f->lead_sent = 1;
  }
  return f;
}

int cwm_farm_rank(const cwm_farm *f) { return f->rank; }
int cwm_farm_size(const cwm_farm *f) { return f->size; }

static void wire_from(wire_opts *w, const cwm_measure_opts *o) {
  memset(w, 0, sizeof *w);
  w->threads = o->threads;
  w->repeats = o->repeats;
  w->flush_cache = o->flush_cache;
  w->batch = o->batch;
  w->check = o->check;
  w->verbose = o->verbose;
  w->min_repeat_ms = o->min_repeat_ms;
  w->budget_s = o->budget_s;
  w->slow_cutoff_s = o->slow_cutoff_s;
  w->run_timeout_s = o->run_timeout_s;
  w->build_timeout_s = o->build_timeout_s;
  w->tol = o->tol;
  w->mem_limit_mb = o->mem_limit_mb;
  w->seed = o->seed;
  snprintf(w->cc, sizeof w->cc, "%s", o->cc ? o->cc : "gcc");
  snprintf(w->cflags, sizeof w->cflags, "%s", o->cflags ? o->cflags : "");
}

/* local's own settings (cache) under rank 0's protocol; the strings point into w */
static void wire_into(const wire_opts *w, const cwm_measure_opts *local, int workers_here, cwm_measure_opts *o) {
  *o = *local;
  o->measurer = NULL;
  o->threads = w->threads;
  o->repeats = w->repeats;
  o->flush_cache = w->flush_cache;
  o->batch = w->batch;
  o->check = w->check;
  o->verbose = w->verbose;
  o->min_repeat_ms = w->min_repeat_ms;
  o->budget_s = w->budget_s;
  o->slow_cutoff_s = w->slow_cutoff_s;
  o->run_timeout_s = w->run_timeout_s;
  o->build_timeout_s = w->build_timeout_s;
  o->tol = w->tol;
  o->mem_limit_mb = w->mem_limit_mb;
  o->seed = w->seed;
  o->cc = w->cc;
  o->cflags = w->cflags;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int jobs = (int)(ncpu > 0 ? ncpu : 1) / (workers_here > 0 ? workers_here : 1);
  o->build_jobs = jobs > 0 ? jobs : 1;
}

/* ---- rank 0: handing out chunks ------------------------------------------------------------- */

static int farm_measure(cwm_measurer *m, const cwm_measure_opts *o, const cwm_candidate *c, int n,
                        const cwm_reference *ref, cwm_result *res, cwm_err *err);

static uint64_t ref_hash(const cwm_reference *ref) {
  if (!ref) return 0;
  uint64_t h = cwm_hash64(ref->out, (size_t)ref->len * sizeof(float));
  h ^= (uint64_t)ref->len * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ref->red_len;
  return h ? h : 1;
}

static int alive(const worker *w) { return w->state == W_IDLE || w->state == W_BUSY; }

static double default_timeout(const cwm_measure_opts *o, int count) {
  double bt = o->build_timeout_s > 0 ? o->build_timeout_s : 60, rt = o->run_timeout_s > 0 ? o->run_timeout_s : 10;
  return 2 * bt + 4 * (rt + 5) * count;
}

/* Takes worker k out of the farm; on this host a hung worker is killed, so that mpirun can end. */
static void lose(cwm_farm *f, int k, const char *why) {
  worker *w = &f->w[k];
  if (w->state == W_LOST) return;
  w->state = W_LOST;
  if (w->local && w->hello.id.pid > 0) kill((pid_t)w->hello.id.pid, SIGKILL);
  reap_sends(w);
  int left = 0;
  for (int i = 1; i < f->size; i++) left += alive(&f->w[i]);
  warn(f, "worker rank %d on %s lost (%s); its candidates go to the other %d worker(s)", k, w->hello.id.host, why,
      left);
}

int cwm_farm_lead(cwm_farm *f, cwm_measure_opts *mo, const cwm_farm_opts *fo, cwm_err *err) {
  if (f->m.measure) { /* led already: the protocol travels with every job */
    mo->measurer = &f->m;
    return CWM_OK;
  }
  if (fo) f->fo = *fo;
  wire_opts wo;
  wire_from(&wo, mo);
  for (int k = 1; k < f->size; k++) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_buf_append(&b, &wo, sizeof wo);
    post(f, k, TAG_SETUP, &b);
  }
  int got = 0;
  double t0 = cwm_now();
  while (got < f->size - 1 && cwm_now() - t0 < HELLO_WAIT_S) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_HELLO, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      sleep_ms(2);
      continue;
    }
    int len = 0;
    char *b = recv_probed(&st, &len);
    int k = st.MPI_SOURCE;
    if (b && len == (int)sizeof(hello_msg) && k > 0 && k < f->size && f->w[k].state == W_NEW) {
      memcpy(&f->w[k].hello, b, sizeof(hello_msg));
      f->w[k].hello.id.host[sizeof f->w[k].hello.id.host - 1] = 0;
      f->w[k].local = !strcmp(f->w[k].hello.id.host, f->me.host);
      f->w[k].state = W_IDLE;
      got++;
    }
    free(b);
  }
  if (got < f->size - 1) {
    int k = 1;
    while (k < f->size && f->w[k].state != W_NEW) k++;
    return cwm_fail(err, CWM_EMEASURE, "worker rank %d did not answer within %.0f s (is cwm the same build on every host?)",
                    k, HELLO_WAIT_S);
  }
  /* one kind of machine, or the user's word that mixing is meant */
  char t1[1024], tk[1024];
  cwm_target_string(&f->w[1].hello.target, t1, sizeof t1);
  int mixed = 0;
  for (int k = 2; k < f->size; k++) {
    cwm_target_string(&f->w[k].hello.target, tk, sizeof tk);
    if (strcmp(t1, tk)) {
      if (!f->fo.mixed_targets)
        return cwm_fail(err, CWM_EUSAGE,
                        "the workers' targets differ: rank 1 on %s times as '%s', rank %d on %s as '%s'; their timings "
                        "would not compare (pass --mixed-targets to go on, each record keeping its host's target)",
                        f->w[1].hello.id.host, t1, k, f->w[k].hello.id.host, tk);
      mixed = 1;
    }
  }
  f->m.measure = farm_measure;
  f->m.target = mixed ? NULL : &f->w[1].hello.target;
  mo->measurer = &f->m;
  int hosts = 0;
  for (int k = 1; k < f->size; k++) {
    int seen = 0;
    for (int j = 1; j < k; j++) seen |= !strcmp(f->w[j].hello.id.host, f->w[k].hello.id.host);
    hosts += !seen;
  }
  say(f, "%d worker rank(s) on %d host(s) build and time; %s", f->size - 1, hosts,
      mixed ? "their targets differ (--mixed-targets)" : t1);
  return CWM_OK;
}

typedef struct {
  int start, count, worker; /* worker 0: not out */
  int done;
  uint64_t job;
} chunk;

/* Sends chunk ch of c to worker k (the reference first if it lacks it). */
static void send_chunk(cwm_farm *f, int k, chunk *ch, const cwm_measure_opts *o, const cwm_candidate *c,
                       const cwm_reference *ref, uint64_t rh) {
  worker *w = &f->w[k];
  int has = !rh;
  for (int i = 0; i < w->nrefs && !has; i++) has = w->refs[i] == rh;
  if (!has) {
    cwm_buf b;
    cwm_buf_init(&b);
    ref_hdr h = {rh, ref->len, ref->red_len};
    cwm_buf_append(&b, &h, sizeof h);
    cwm_buf_append(&b, ref->out, (size_t)ref->len * sizeof(float));
    post(f, k, TAG_REF, &b);
    if (w->nrefs == REF_SLOTS) {
      memmove(w->refs, w->refs + 1, sizeof w->refs[0] * (REF_SLOTS - 1));
      w->nrefs--;
    }
    w->refs[w->nrefs++] = rh;
  }
  cwm_buf b;
  cwm_buf_init(&b);
  job_hdr h;
  memset(&h, 0, sizeof h);
  h.job = ch->job = ++f->next_job;
  h.ref_hash = rh;
  h.count = ch->count;
  wire_from(&h.opts, o);
  cwm_buf_append(&b, &h, sizeof h);
  for (int i = ch->start; i < ch->start + ch->count; i++) {
    const cwm_candidate *x = &c[i];
    cwm_buf_append(&b, &x->nargs, sizeof x->nargs);
    cwm_buf_append(&b, x->arg_len, sizeof x->arg_len);
    cwm_buf_append(&b, x->src_len, sizeof x->src_len);
    put_str(&b, x->body);
    put_str(&b, x->entry);
    int pack = x->pack_entry != NULL;
    cwm_buf_append(&b, &pack, sizeof pack);
    put_str(&b, x->pack_entry);
  }
  post(f, k, TAG_JOB, &b);
  ch->worker = k;
  w->state = W_BUSY;
  w->job = ch->job;
  double to = f->fo.worker_timeout_s > 0 ? f->fo.worker_timeout_s : default_timeout(o, ch->count);
  w->deadline = cwm_now() + to;
}

/* A RESULT from worker k: fills its chunk's results unless another worker already did. */
static void take_result(cwm_farm *f, int k, const char *b, int len, chunk *ch, int nch, cwm_result *res,
                        int *left) {
  worker *w = &f->w[k];
  reader r = {b, (size_t)len, 0};
  result_hdr h;
  take(&r, &h, sizeof h);
  if (r.bad) return;
  if (w->state == W_LOST) return; /* a late answer of a worker taken out: its chunk went elsewhere */
  if (w->state == W_BUSY && w->job == h.job) w->state = W_IDLE;
  int i = 0;
  while (i < nch && ch[i].job != h.job) i++;
  if (i == nch || ch[i].done || ch[i].worker != k) return;
  if (h.rc) {
    /* the worker's machinery failed (no compiler there ...): it is out, the chunk goes elsewhere */
    h.msg[sizeof h.msg - 1] = 0;
    char why[320];
    snprintf(why, sizeof why, "it cannot measure: %s", h.msg);
    lose(f, k, why);
    ch[i].worker = 0;
    return;
  }
  if (h.count != ch[i].count || r.left != sizeof(cwm_result) * (size_t)h.count) return;
  for (int j = 0; j < h.count; j++) {
    cwm_result *x = &res[ch[i].start + j];
    take(&r, x, sizeof *x);
    x->msg[sizeof x->msg - 1] = 0;
    x->host[sizeof x->host - 1] = 0;
    x->target = &w->hello.target;
    cwm_measure_add_seconds(x->build_s, x->run_s);
  }
  ch[i].done = 1;
  (*left)--;
  w->chunks++;
  w->candidates += h.count;
}

static int farm_measure(cwm_measurer *m, const cwm_measure_opts *o, const cwm_candidate *c, int n,
                        const cwm_reference *ref, cwm_result *res, cwm_err *err) {
  cwm_farm *f = (cwm_farm *)m;
  int nalive = 0;
  for (int k = 1; k < f->size; k++) nalive += alive(&f->w[k]);
  int batch = o->batch > 0 ? o->batch : 4, per = nalive ? (n + nalive - 1) / nalive : n;
  int size = per < batch ? per : batch;
  if (size < 1) size = 1;
  int nch = (n + size - 1) / size, left = nch;
  chunk *ch = cwm_xcalloc((size_t)nch, sizeof *ch);
  for (int i = 0; i < nch; i++) {
    ch[i].start = i * size;
    ch[i].count = i == nch - 1 ? n - i * size : size;
  }
  uint64_t rh = o->check ? ref_hash(ref) : 0;
  const cwm_reference *sref = o->check ? ref : NULL;
  double last_check = cwm_now();
  int rc = CWM_OK;
  while (left > 0 && rc == CWM_OK) {
    int busy = 0, idle = 0;
    for (int k = 1; k < f->size; k++) busy += f->w[k].state == W_BUSY, idle += f->w[k].state == W_IDLE;
    /* hand out what is not out */
    for (int i = 0; i < nch && idle; i++) {
      if (ch[i].done || ch[i].worker) continue;
      int k = 1;
      while (k < f->size && f->w[k].state != W_IDLE) k++;
      if (k == f->size) break;
      send_chunk(f, k, &ch[i], o, c, sref, rh);
      idle--, busy++;
    }
    if (!busy && !idle) {
      /* no worker left: this process measures the rest */
      if (!f->warned_local) warn(f, "no worker left; rank 0 measures the rest itself");
      f->warned_local = 1;
      cwm_measure_opts lo = *o;
      lo.measurer = NULL;
      for (int i = 0; i < nch && rc == CWM_OK; i++) {
        if (ch[i].done) continue;
        rc = cwm_measure(&lo, c + ch[i].start, ch[i].count, ref, res + ch[i].start, err);
        ch[i].done = 1;
        left--;
      }
      break;
    }
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
      int len = 0;
      char *b = recv_probed(&st, &len);
      if (b && st.MPI_SOURCE > 0 && st.MPI_SOURCE < f->size)
        take_result(f, st.MPI_SOURCE, b, len, ch, nch, res, &left);
      free(b);
      continue;
    }
    double now = cwm_now();
    for (int k = 1; k < f->size; k++) {
      worker *w = &f->w[k];
      if (w->state != W_BUSY) continue;
      int gone = now - last_check > 0.25 && w->local && kill((pid_t)w->hello.id.pid, 0) != 0 && errno == ESRCH;
      if (gone || now > w->deadline) {
        for (int i = 0; i < nch; i++)
          if (ch[i].job == w->job && !ch[i].done) ch[i].worker = 0;
        lose(f, k, gone ? "its process is gone" : "no answer within its time-out");
      }
    }
    if (now - last_check > 0.25) last_check = now;
    sleep_ms(1);
  }
  free(ch);
  return rc;
}

void cwm_farm_report(const cwm_farm *f, cwm_buf *out) {
  for (int k = 1; k < f->size; k++) {
    const worker *w = &f->w[k];
    cwm_buf_printf(out, "rank %d on %s: %ld chunks, %ld candidates%s\n", k, w->hello.id.host, w->chunks,
                   w->candidates, w->state == W_LOST ? " (lost)" : "");
  }
}

/* ---- the workers ------------------------------------------------------------------------------ */

typedef struct {
  uint64_t hash;
  cwm_reference ref;
} held_ref;

static int serve_job(cwm_farm *f, const cwm_measure_opts *local, const char *b, int len, held_ref *refs, int nrefs,
                     cwm_buf *reply) {
  reader r = {b, (size_t)len, 0};
  job_hdr h;
  take(&r, &h, sizeof h);
  result_hdr rh;
  memset(&rh, 0, sizeof rh);
  rh.job = h.job;
  rh.ref_hash = h.ref_hash;
  if (r.bad || h.count < 1 || h.count > 4096) {
    rh.rc = CWM_EMEASURE;
    snprintf(rh.msg, sizeof rh.msg, "malformed job message (%d bytes)", len);
    cwm_buf_append(reply, &rh, sizeof rh);
    return 0;
  }
  h.opts.cc[sizeof h.opts.cc - 1] = 0;
  h.opts.cflags[sizeof h.opts.cflags - 1] = 0;
  cwm_candidate *c = cwm_xcalloc((size_t)h.count, sizeof *c);
  for (int i = 0; i < h.count && !r.bad; i++) {
    take(&r, &c[i].nargs, sizeof c[i].nargs);
    take(&r, c[i].arg_len, sizeof c[i].arg_len);
    take(&r, c[i].src_len, sizeof c[i].src_len);
    c[i].body = take_str(&r);
    c[i].entry = take_str(&r);
    int pack = 0;
    take(&r, &pack, sizeof pack);
    const char *pe = take_str(&r);
    c[i].pack_entry = pack ? pe : NULL;
    if (c[i].nargs < 1 || c[i].nargs > CWM_MAX_ARGS) r.bad = 1;
  }
  const cwm_reference *ref = NULL;
  for (int i = 0; i < nrefs && h.ref_hash; i++)
    if (refs[i].hash == h.ref_hash) ref = &refs[i].ref;
  cwm_err e = {0};
  if (r.bad) {
    rh.rc = CWM_EMEASURE;
    snprintf(rh.msg, sizeof rh.msg, "malformed job message (%d bytes)", len);
  } else if (h.ref_hash && !ref) {
    rh.rc = CWM_EMEASURE;
    snprintf(rh.msg, sizeof rh.msg, "job %llu names a reference this worker does not hold",
             (unsigned long long)h.job);
  } else {
    cwm_measure_opts o;
    wire_into(&h.opts, local, f->workers_here, &o);
    cwm_result *res = cwm_xcalloc((size_t)h.count, sizeof *res);
    rh.rc = cwm_measure(&o, c, h.count, ref, res, &e);
    rh.count = h.count;
    if (rh.rc) snprintf(rh.msg, sizeof rh.msg, "%.250s", e.msg);
    cwm_buf_append(reply, &rh, sizeof rh);
    if (!rh.rc) {
      for (int i = 0; i < h.count; i++) res[i].target = NULL;
      cwm_buf_append(reply, res, sizeof *res * (size_t)h.count);
    }
    free(res);
    free(c);
    return 0;
  }
  cwm_buf_append(reply, &rh, sizeof rh);
  free(c);
  return 0;
}

int cwm_farm_serve(cwm_farm *f, const cwm_measure_opts *local, cwm_err *err) {
  held_ref refs[REF_SLOTS];
  int nrefs = 0, have_lead = 0, rc = 0;
  double last_check = cwm_now();
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      /* rank 0 on this host and gone: nobody will say stop */
      double now = cwm_now();
      if (have_lead && now - last_check > 1) {
        last_check = now;
        if (!strcmp(f->lead.host, f->me.host) && kill((pid_t)f->lead.pid, 0) != 0 && errno == ESRCH) {
          rc = cwm_fail(err, CWM_EMEASURE, "rank 0 (pid %d) is gone", f->lead.pid);
          break;
        }
      }
      sleep_ms(2);
      continue;
    }
    int len = 0;
    char *b = recv_probed(&st, &len);
    if (!b) {
      rc = cwm_fail(err, CWM_EMEASURE, "cannot receive from rank 0");
      break;
    }
    if (st.MPI_TAG == TAG_STOP) {
      if (len == (int)sizeof(int)) memcpy(&f->skip_finalize, b, sizeof(int));
      free(b);
      break;
    }
    if (st.MPI_TAG == TAG_LEAD && len == (int)sizeof(who)) {
      memcpy(&f->lead, b, sizeof f->lead);
      f->lead.host[sizeof f->lead.host - 1] = 0;
      have_lead = 1;
    } else if (st.MPI_TAG == TAG_SETUP && len == (int)sizeof(wire_opts)) {
      wire_opts w;
      memcpy(&w, b, sizeof w);
      w.cc[sizeof w.cc - 1] = 0;
      w.cflags[sizeof w.cflags - 1] = 0;
      hello_msg h;
      memset(&h, 0, sizeof h);
      h.id = f->me;
      cwm_target_detect(&h.target, w.threads, w.cc, w.cflags);
      MPI_Send(&h, (int)sizeof h, MPI_BYTE, 0, TAG_HELLO, MPI_COMM_WORLD);
    } else if (st.MPI_TAG == TAG_REF && len >= (int)sizeof(ref_hdr)) {
      ref_hdr h;
      memcpy(&h, b, sizeof h);
      if (h.len >= 0 && (size_t)len == sizeof h + (size_t)h.len * sizeof(float)) {
        if (nrefs == REF_SLOTS) {
          free(refs[0].ref.out);
          memmove(refs, refs + 1, sizeof refs[0] * (REF_SLOTS - 1));
          nrefs--;
        }
        held_ref *x = &refs[nrefs++];
        x->hash = h.hash;
        x->ref.len = h.len;
        x->ref.red_len = h.red_len;
        x->ref.out = cwm_xmalloc((size_t)(h.len > 0 ? h.len : 1) * sizeof(float));
        memcpy(x->ref.out, b + sizeof h, (size_t)h.len * sizeof(float));
      }
    } else if (st.MPI_TAG == TAG_JOB) {
      cwm_buf reply;
      cwm_buf_init(&reply);
      serve_job(f, local, b, len, refs, nrefs, &reply);
      MPI_Send(reply.s, (int)reply.len, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
      cwm_buf_free(&reply);
    }
    free(b);
  }
  for (int i = 0; i < nrefs; i++) free(refs[i].ref.out);
  return rc;
}

void cwm_farm_end(cwm_farm *f) {
  if (!f) return;
  if (f->rank == 0) {
    for (int k = 1; k < f->size; k++) f->skip_finalize |= f->w[k].state == W_LOST;
    for (int k = 1; k < f->size; k++) {
      if (f->w[k].state == W_LOST) continue;
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_buf_append(&b, &f->skip_finalize, sizeof f->skip_finalize);
      post(f, k, TAG_STOP, &b);
    }
    /* the sends to live workers complete (they are listening); lost ones are not waited for */
    double t0 = cwm_now();
    for (;;) {
      int pending = 0;
      for (int k = 1; k < f->size; k++) {
        if (f->w[k].state == W_LOST) continue;
        reap_sends(&f->w[k]);
        pending += f->w[k].nreqs;
      }
      if (!pending || cwm_now() - t0 > 10) break;
      sleep_ms(1);
    }
  }
  for (int k = 0; k < f->size; k++) {
    if (f->w[k].state == W_LOST) continue; /* see reap_sends */
    free(f->w[k].reqs);
    for (int i = 0; i < f->w[k].nreqs; i++) cwm_buf_free(&f->w[k].bufs[i]);
    free(f->w[k].bufs);
  }
  int skip = f->skip_finalize;
  free(f->w);
  free(f);
  if (!skip) MPI_Finalize();
}

#endif
