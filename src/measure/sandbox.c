/* sandbox.c: what a kernel can do to the run: the system calls it may make, and the channel the
 * parent times it through (its own clock, not the child's word; see runner_parent_repeats). The
 * runner child (run.c) has loaded the kernel, its arguments and OpenMP before it calls the kernel
 * for the first time; from then on a kernel needs memory, threads of its own process, the time,
 * the report pipe and the control socket, and nothing else. A seccomp filter (Debian's
 * libseccomp) allows exactly that and kills the whole child for anything else: no new process
 * (fork, vfork, a clone without CLONE_THREAD), no exec, no setsid, no file opened or mapped
 * shared, no socket, no signal to another process, no ptrace. SCMP_ACT_KILL_PROCESS rather than
 * failing the call (EPERM) or killing the thread: a kernel gets no way to probe the filter and
 * carry on, and an OpenMP team never waits for a killed worker until the time-out; the parent sees
 * SIGSYS and reports the candidate as a runtime error naming it. */
#define _GNU_SOURCE
#include "measure_internal.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The timing protocol's bytes after the report: the child writes READY once it is ready for a
 * repeat (the cache flushed), the parent answers with the number of calls (an int64_t on the
 * control socket) and the child writes DONE after them. Each byte is numbered: the i-th the child
 * writes after its report is PROTO_BYTE(i), READY of round r is byte 2r and DONE byte 2r + 1, so
 * a byte written out of its place (a kernel's early DONE, the harness's own DONE after it) shows. */
#define PROTO_BYTE(i) ((unsigned char)(0xa5u + (unsigned)(i)))

#ifdef CWM_HAVE_SECCOMP
#include <seccomp.h>

/* Memory, threads' synchronisation, time, the end of a thread or of the process, signal masks
 * (glibc's thread start and exit), the thread bookkeeping glibc does when a thread starts, and
 * the signal stack AddressSanitizer's runtime sets up in a new thread (a sanitizer build's
 * child). Under strace a 2-thread measurement made futex, read, write, brk and exit_group calls;
 * a kernel that starts a third thread adds clone3 (refused), clone, mmap, mprotect,
 * rt_sigprocmask, set_robust_list and rseq. */
static const int g_allowed[] = {
    SCMP_SYS(munmap),         SCMP_SYS(mprotect),
    SCMP_SYS(mremap),         SCMP_SYS(madvise),         SCMP_SYS(brk),
    SCMP_SYS(futex),          SCMP_SYS(sched_yield),     SCMP_SYS(sched_getaffinity),
    SCMP_SYS(clock_gettime),  SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep),
    SCMP_SYS(gettimeofday),   SCMP_SYS(getpid),          SCMP_SYS(gettid),
    SCMP_SYS(exit),           SCMP_SYS(exit_group),      SCMP_SYS(rt_sigreturn),
    SCMP_SYS(rt_sigprocmask), SCMP_SYS(set_robust_list), SCMP_SYS(rseq),
    SCMP_SYS(membarrier),     SCMP_SYS(getrandom),       SCMP_SYS(sigaltstack),
};

int cwm_sandbox_enter(int report_fd, int ctl_fd, char *msg, size_t n) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (!ctx) {
    snprintf(msg, n, "seccomp_init failed");
    return -1;
  }
  /* OpenMP's workers were started before the filter (they run the kernel too): TSYNC puts every
   * thread of the process under it, not only the calling one, or the load fails. */
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
  /* a call through another ABI (int 0x80, x32) ends the process too, not only its thread */
  if (!rc) rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  /* Linux before 5.16 forces the speculation mitigations (store bypass, indirect branches) on a
   * process that loads a filter, by default: loads held back behind stores, the kernel timed
   * slower than it runs outside. They guard the process against itself, not others against it;
   * a Linux without the flag refuses it, and the filter loads without. */
  (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_SSB, 1);
  for (size_t i = 0; i < sizeof g_allowed / sizeof g_allowed[0] && !rc; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, g_allowed[i], 0);
  /* signals to itself only: abort() raises SIGABRT (tgkill of its own pid) after resetting the
   * handler, and a crash should read as the crash, not as a blocked call */
  pid_t self = getpid();
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
  if (!rc) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 0);
  /* the report and the timing protocol's bytes written, the parent's counts read; nothing else */
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(write), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)report_fd));
  if (!rc && ctl_fd >= 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(read), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)ctl_fd));
  /* memory: anonymous, or a private copy of a file (stderr may be a file opened read-write: mapped
   * shared, it could be written) */
  const scmp_datum_t anon = MAP_ANONYMOUS, shared = MAP_SHARED;
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A3(SCMP_CMP_MASKED_EQ, anon, anon));
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A3(SCMP_CMP_MASKED_EQ, shared, 0));
  /* OpenMP's threads: clone with CLONE_THREAD (a thread of this process dies with it) and no new
   * namespace (root could otherwise give a thread its own); clone3 passes its flags in memory a
   * filter cannot read, so it fails with ENOSYS and glibc falls back to clone */
  const scmp_datum_t thread = CLONE_THREAD, ns = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                                   CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, thread | ns, thread));
  if (!rc) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (!rc) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc) snprintf(msg, n, "the seccomp filter could not be loaded: %s", strerror(-rc));
  return rc ? -1 : 0;
}

#else

int cwm_sandbox_enter(int report_fd, int ctl_fd, char *msg, size_t n) {
  (void)report_fd;
  (void)ctl_fd;
  snprintf(msg, n, "built without libseccomp: kernels run unsandboxed");
  return 1;
}

#endif

/* ---- the timed repeats ------------------------------------------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void runner_send(int fd, const void *p, size_t left) {
  while (left) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(1);
    p = (const char *)p + w;
    left -= (size_t)w;
  }
}

/* The child's half of the timed repeats (runner_parent_repeats): flush, READY, wait for the
 * parent's count, run the calls, DONE; until the parent shuts the control socket, then exit. The
 * wait spins on a non-blocking read so that the child's wake-up is not in the parent's round trip;
 * the parent answers READY at once, so the spin is short. */
void runner_child_repeats(int wfd, int cfd, void (*fn)(float *const *), float *const *args,
                          unsigned char *flush_buf, size_t flush_bytes) {
  for (unsigned i = 0;; i += 2) {
    if (flush_buf) {
      memset(flush_buf, (int)(i / 2 + 1), flush_bytes);
      __asm__ __volatile__("" : : "r"(flush_buf) : "memory"); /* keep the stores */
    }
    const unsigned char ready = PROTO_BYTE(i), done = PROTO_BYTE(i + 1);
    runner_send(wfd, &ready, 1);
    int64_t number = 0;
    size_t got = 0;
    while (got < sizeof number) {
      ssize_t n = read(cfd, (char *)&number + got, sizeof number - got);
      if (n > 0)
        got += (size_t)n;
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        _exit(0);
      else
        __asm__ __volatile__("" ::: "memory");
    }
    for (int64_t k = 0; k < number; k++) fn(args);
    runner_send(wfd, &done, 1);
  }
}

int runner_read(int fd, pid_t pid, void *buf, size_t want, double deadline) {
  size_t got = 0;
  int eof = 0, exited = 0;
  for (;;) {
    for (;;) {
      if (got == want || eof) break;
      ssize_t r = read(fd, (char *)buf + got, want - got);
      if (r > 0)
        got += (size_t)r;
      else if (r == 0)
        eof = 1;
      else if (errno != EINTR)
        break;
    }
    if (got == want) return RUNNER_OK;
    if (exited) return RUNNER_GONE;
    double left = deadline - cwm_now();
    if (left <= 0) return RUNNER_TIMEOUT;
    int ms = (int)(left * 1000) + 1;
    if (ms > 20) ms = 20; /* wake up to notice a child that died while a grandchild holds the pipe */
    if (eof) {
      /* no writer left: the child is exiting (runner_finish waits for that), in microseconds */
      struct timespec ts = {0, 100000L};
      nanosleep(&ts, NULL);
    } else {
      struct pollfd pf = {fd, POLLIN, 0};
      poll(&pf, 1, ms);
    }
    /* WNOWAIT: look without reaping, so the pid (and so the group id) cannot be reused before the
     * caller's kill. One more read pass follows, for bytes written just before exiting. */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) exited = 1;
  }
}

/* One byte of the child, which must be PROTO_BYTE(seq): RUNNER_OK, or RUNNER_PROTOCOL with perr
 * naming what came instead (`what` says which byte was expected). */
static int proto_read(int rfd, pid_t pid, unsigned seq, double deadline, const char *what, char *perr,
                      size_t n) {
  unsigned char b = 0;
  int rc = runner_read(rfd, pid, &b, 1, deadline);
  if (rc == RUNNER_OK && b != PROTO_BYTE(seq)) {
    snprintf(perr, n, "0x%02x out of turn, expected the %s byte 0x%02x", b, what, PROTO_BYTE(seq));
    return RUNNER_PROTOCOL;
  }
  return rc;
}

/* Whether a byte is waiting in the pipe. */
static int pipe_pending(int fd) {
  struct pollfd pf = {fd, POLLIN, 0};
  return poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN);
}

/* One timed round trip, bytes *seq and *seq + 1: waits for the child's READY, sends it `count` and
 * times until its DONE. */
static int round_trip(int rfd, int cfd, pid_t pid, int64_t count, unsigned *seq, double deadline, double *t,
                      char *perr, size_t n) {
  int rc = proto_read(rfd, pid, *seq, deadline, "ready", perr, n);
  if (rc != RUNNER_OK) return rc;
  if (pipe_pending(rfd)) {
    snprintf(perr, n, "a byte out of turn before the calls of a repeat");
    return RUNNER_PROTOCOL;
  }
  double t0 = now_s();
  if (send(cfd, &count, sizeof count, MSG_NOSIGNAL) != (ssize_t)sizeof count) return RUNNER_GONE;
  rc = proto_read(rfd, pid, *seq + 1, deadline, "done", perr, n);
  *t = now_s() - t0;
  *seq += 2;
  return rc;
}

/* The end of the repeats: the control socket shut, the child writes its next READY (byte seq) and
 * exits, and nothing more may come. Every byte it wrote is then accounted for: a DONE the kernel
 * wrote early is followed by the harness's own, which is out of place here or in a later round. */
static int runner_finish(int rfd, int cfd, pid_t pid, unsigned seq, double deadline, char *perr, size_t n) {
  shutdown(cfd, SHUT_WR);
  int rc = proto_read(rfd, pid, seq, deadline, "last ready", perr, n);
  if (rc != RUNNER_OK) return rc;
  unsigned char b;
  rc = runner_read(rfd, pid, &b, 1, deadline);
  if (rc == RUNNER_GONE) return RUNNER_OK;
  if (rc == RUNNER_OK) snprintf(perr, n, "0x%02x out of turn after the last repeat", b);
  else snprintf(perr, n, "the child did not exit after the last repeat");
  return RUNNER_PROTOCOL;
}

/* The timed repeats, timed here and not in the child. The kernel runs in the process of the
 * child's timing loop: any descriptor the child writes to, the kernel can write to, and any
 * number in the child's memory it can change, so a timing reported by the child is the kernel's
 * word (one that wrote 1e-12 s to the pipe was believed). So the parent takes the time around
 * each round trip (its count sent, DONE back); the child's only say is the calls per repeat from
 * its warm-up, at most one per nanosecond of the repeat length. The bytes are numbered and
 * every one is accounted for until the child exits (runner_finish): a kernel that writes any,
 * early, late or extra, fails the candidate. What no protocol within one address space can stop
 * is a kernel that takes the harness over (never returns, reads the counts and answers at once,
 * the calls not made): only a floor from the workload's FLOPs would bound that, and the runner
 * sees C source and sizes only. The cost to an honest kernel is one round trip per repeat,
 * within the time: 5 to 15 us on a 2-core VM, at most 0.03% of a 50 ms repeat and 1.5% of a 1 ms
 * one. RUNNER_OK with costs[0..*nc) in seconds per call. */
int runner_parent_repeats(const cwm_measure_opts *o, int rfd, int cfd, pid_t pid, int64_t number,
                          double t_start, double timeout, double *costs, int *nc, char *perr, size_t n) {
  double hard = t_start + timeout, soft = t_start + 0.8 * timeout; /* a margin for the repeats */
  double target = (o->min_repeat_ms > 0 ? o->min_repeat_ms : 0) / 1000.0, t = 0;
  unsigned seq = 0;
  int rc;
  *nc = 0;
  double cap = ceil(target / 1e-9); /* no call is shorter than a nanosecond */
  if ((double)number > cap) number = cap < 1 ? 1 : (int64_t)cap;
  int repeats = o->repeats < 1 ? 1 : o->repeats > 32 ? 32 : o->repeats;
  double last = 0, spent = 0;
  for (int r = 0; r < repeats; r++) {
    if (r > 0 && cwm_now() + last > soft) break;
    /* a slow candidate's median needs fewer repeats than a fast one's: stop at 3 once the
     * budget is spent (a 400 ms kernel costs 4 calls instead of 7) */
    if (r >= 3 && o->budget_s > 0 && spent >= o->budget_s) break;
    if ((rc = round_trip(rfd, cfd, pid, number, &seq, hard, &t, perr, n)) != RUNNER_OK) return rc;
    costs[(*nc)++] = t / (double)number;
    last = t;
    spent += t;
  }
  return runner_finish(rfd, cfd, pid, seq, hard, perr, n);
}
