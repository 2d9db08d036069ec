/* measure_internal.h: what the builder and runner share inside src/measure. */
#ifndef CWM_MEASURE_INTERNAL_H
#define CWM_MEASURE_INTERNAL_H

#include "cwm/measure.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The cache directory, created 0700 and checked to be the user's own and writable. */
int cache_prepare(const char *dir, cwm_err *err);
/* Whether the object at so is a valid entry: present, and matching the seal written when it was
 * installed (its use time is refreshed). */
int cache_hit(const char *so);
/* The seal of the object at so (its size and content hash), into text of SEAL_MAX bytes; -1 when
 * it cannot be read. */
#define SEAL_MAX 128
int cache_seal_text(const char *so, char *text, size_t n);
/* Writes the seal of an object just installed at so. */
void cache_write_seal(const char *so, const char *text);
/* Removes compiler temporaries over an hour old and, when the directory holds more than max_mb
 * MB, the least recently used objects and reference outputs until it holds 80% of that. */
void cache_tidy(const char *dir, long max_mb);

/* Confines the calling process, all its threads (the runner child, once the kernel and its
 * arguments are loaded) to the system calls a kernel needs (sandbox.c): memory, futexes, threads
 * of its own (clone with CLONE_THREAD), the time, write() to report_fd, read() of ctl_fd (-1:
 * none); anything else kills the process with SIGSYS. 0 when confined; 1 when built without
 * libseccomp, -1 when the filter could not be loaded (msg says which; the caller goes on
 * unconfined and says so). */
int cwm_sandbox_enter(int report_fd, int ctl_fd, char *msg, size_t n);

/* The runner's channel (sandbox.c). Reading from the child came to: */
enum { RUNNER_OK = 1, RUNNER_GONE = 0, RUNNER_TIMEOUT = -1, RUNNER_PROTOCOL = -2 };
/* Reads want bytes of the child's pipe by the deadline: RUNNER_OK, RUNNER_TIMEOUT, or RUNNER_GONE
 * once the child has exited (or closed the pipe) without them. Read by size, not to end-of-file:
 * a grandchild the kernel forked (unsandboxed) keeps the pipe open. */
int runner_read(int fd, pid_t pid, void *buf, size_t want, double deadline);
/* The child's write of the whole of p; exits the child when the pipe is gone. */
void runner_send(int fd, const void *p, size_t left);
/* The child's half of the timed repeats; returns never (exits when the parent shuts cfd). */
void runner_child_repeats(int wfd, int cfd, void (*fn)(float *const *), float *const *args,
                          unsigned char *flush_buf, size_t flush_bytes);
/* The parent's half: times up to o->repeats repeats of the child at the other end of rfd (its
 * report pipe) and cfd (its control socket), number calls each as the child proposes, capped,
 * then shuts cfd and waits for the child to exit, every byte it wrote accounted for. RUNNER_OK
 * with costs[0..*nc) in seconds per call; RUNNER_PROTOCOL with perr saying what came out of turn;
 * RUNNER_GONE or RUNNER_TIMEOUT. */
int runner_parent_repeats(const cwm_measure_opts *o, int rfd, int cfd, pid_t pid, int64_t number,
                          double t_start, double timeout, double *costs, int *nc, char *perr, size_t n);

#endif
