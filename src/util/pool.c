/* pool.c: the thread pool behind cwm_parallel_for (contract: util.h). Idle workers sleep on a
 * condition variable instead of spinning, and a fork() while a job runs waits for it and gives the
 * child a pool with no workers (they are not copied), which the runner's children rely on. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "cwm/util.h"

/* Below this much work (about float operations) a loop runs on the calling thread: waking a
 * sleeping worker costs some microseconds. */
#define PAR_MIN 32768L
#define MAX_THREADS 16

static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  int want;     /* threads configured (0: not yet decided) */
  int started;  /* workers running (want - 1 once started) */
  int stop;
  unsigned long gen; /* bumped for every job */
  int pending;       /* workers still in the current job */
  cwm_range_fn fn;
  void *ctx;
  int n, parts;
  pthread_t th[MAX_THREADS];
  unsigned long start_gen[MAX_THREADS]; /* the gen a worker was created at: jobs after it are new */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
/* Held by the thread whose job the pool runs; a second caller meanwhile runs serially. */
static pthread_mutex_t pool_owner = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int in_part;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void part_range(int n, int parts, int p, int *b, int *e) {
  *b = (int)((long)n * p / parts);
  *e = (int)((long)n * (p + 1) / parts);
}

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg;
  in_part = 1;
  pthread_mutex_lock(&pool.mu);
  unsigned long seen = pool.start_gen[me];
  for (;;) {
    while (pool.gen == seen && !pool.stop) pthread_cond_wait(&pool.go, &pool.mu);
    if (pool.stop) break;
    seen = pool.gen;
    cwm_range_fn fn = pool.fn;
    void *ctx = pool.ctx;
    int n = pool.n, parts = pool.parts;
    pthread_mutex_unlock(&pool.mu);
    if (me < parts) {
      int b, e;
      part_range(n, parts, me, &b, &e);
      if (b < e) fn(ctx, b, e, me);
    }
    pthread_mutex_lock(&pool.mu);
    if (--pool.pending == 0) pthread_cond_signal(&pool.done);
  }
  pthread_mutex_unlock(&pool.mu);
  return NULL;
}

/* fork(): wait for a running job, and give the child a pool with no workers (they are not copied);
 * it starts its own on first use. */
static void before_fork(void) {
  pthread_mutex_lock(&pool_owner);
  pthread_mutex_lock(&pool.mu);
}
static void after_fork_parent(void) {
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool_owner);
}
static void after_fork_child(void) {
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.go, NULL);
  pthread_cond_init(&pool.done, NULL);
  pthread_mutex_init(&pool_owner, NULL);
  pool.started = 0;
  pool.stop = 0;
  pool.pending = 0;
}
static void register_fork(void) { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

static int default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* Joins the workers; the caller holds pool_owner. */
static void stop_workers(void) {
  pthread_mutex_lock(&pool.mu);
  pool.stop = 1;
  pthread_cond_broadcast(&pool.go);
  pthread_mutex_unlock(&pool.mu);
  for (int i = 1; i <= pool.started; i++) pthread_join(pool.th[i], NULL);
  pool.started = 0;
  pool.stop = 0;
}

void cwm_pool_set_threads(int n) {
  if (n <= 0) n = default_threads();
  if (n > MAX_THREADS) n = MAX_THREADS;
  pthread_mutex_lock(&pool_owner);
  if (pool.started && pool.started != n - 1) stop_workers();
  pool.want = n;
  pthread_mutex_unlock(&pool_owner);
}

int cwm_pool_threads(void) { return pool.want > 0 ? pool.want : default_threads(); }

void cwm_parallel_for(int n, long work, cwm_range_fn fn, void *ctx) {
  if (n <= 0) return;
  int nt = cwm_pool_threads();
  if (nt <= 1 || n == 1 || work < PAR_MIN || in_part || pthread_mutex_trylock(&pool_owner)) {
    fn(ctx, 0, n, 0);
    return;
  }
  pthread_once(&fork_once, register_fork);
  if (!pool.want) pool.want = nt;
  while (pool.started < nt - 1) {
    int i = pool.started + 1;
    pool.start_gen[i] = pool.gen;
    if (pthread_create(&pool.th[i], NULL, worker, (void *)(intptr_t)i)) break;
    pool.started = i;
  }
  int parts = pool.started + 1 < n ? pool.started + 1 : n;
  pthread_mutex_lock(&pool.mu);
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.parts = parts;
  pool.pending = pool.started;
  pool.gen++;
  pthread_cond_broadcast(&pool.go);
  pthread_mutex_unlock(&pool.mu);
  int b, e;
  part_range(n, parts, 0, &b, &e);
  in_part = 1;
  fn(ctx, b, e, 0);
  in_part = 0;
  pthread_mutex_lock(&pool.mu);
  while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool_owner);
}

/* libgomp keeps a team's threads for the next parallel region, and a forked child inherits the
 * team but not its threads: its first region of more than one thread waits for them forever (a
 * kernel timed at 2 threads ran into its time-out every time once XGBoost, which cwm loads for
 * the cost models and which uses OpenMP, had predicted). OpenMP 5's omp_pause_resource_all ends
 * the team; libgomp starts a new one at the next region. Only if libgomp is already loaded, and
 * not in a forked process (whose inherited team has no threads to end: it would wait for them). */
static int omp_forked; /* a forked process: ending a team it inherited would wait for its threads */
static void omp_note_fork(void) { omp_forked = 1; }
__attribute__((constructor)) static void omp_watch_fork(void) { pthread_atfork(NULL, NULL, omp_note_fork); }

void cwm_omp_release(void) {
  if (omp_forked) return;
  void *g = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!g) return;
  void *sym = dlsym(g, "omp_pause_resource_all");
  if (sym) {
    int (*pause_all)(int);
    *(void **)&pause_all = sym;
    pause_all(2); /* omp_pause_hard */
  }
  dlclose(g);
}
