/* target.c: describes the machine a log was measured on (CPU model, cores, vector width, caches,
 * compiler) and prints it as a TVM-like target string for the records. Linux only: /proc/cpuinfo,
 * sysconf and /sys; anything missing falls back to a neutral default. */
#define _GNU_SOURCE
#include "cwm/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copies the printable ASCII of s (trimmed, runs of blanks folded to one space) into dst. */
static void sanitize(char *dst, size_t cap, const char *s) {
  size_t k = 0;
  int space = 0;
  for (; *s && k + 1 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == ' ' || c == '\t') {
      space = k > 0;
      continue;
    }
    if (c < 0x21 || c > 0x7e) continue;
    if (space && k + 2 < cap) dst[k++] = ' ';
    space = 0;
    dst[k++] = (char)c;
  }
  dst[k] = 0;
}

/* 1 if the space-separated list contains word. */
static int has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
    int start = p == list || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':';
    int end = p[n] == 0 || p[n] == ' ' || p[n] == '\t' || p[n] == '\n';
    if (start && end) return 1;
  }
  return 0;
}

static void read_cpuinfo(cwm_target *t) {
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  int got_model = 0, got_flags = 0;
  while ((!got_model || !got_flags) && getline(&line, &cap, f) > 0) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    if (!got_model && strncmp(line, "model name", 10) == 0) {
      sanitize(t->model, sizeof t->model, colon + 1);
      got_model = t->model[0] != 0;
    } else if (!got_flags && (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0)) {
      got_flags = 1;
      if (has_word(colon + 1, "avx512f"))
        t->vec_bytes = 64;
      else if (has_word(colon + 1, "avx2"))
        t->vec_bytes = 32;
    }
  }
  free(line);
  fclose(f);
}

/* "32K", "1024K", "32M" -> bytes; 0 if unreadable. */
static long read_size_file(const char *path) {
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  char buf[64] = {0};
  long v = 0;
  if (fgets(buf, sizeof buf, f)) {
    char *end = NULL;
    v = strtol(buf, &end, 10);
    if (v < 0) v = 0;
    if (end && (*end == 'K' || *end == 'k')) v *= 1024;
    else if (end && *end == 'M') v *= 1024L * 1024;
    else if (end && *end == 'G') v *= 1024L * 1024 * 1024;
  }
  fclose(f);
  return v;
}

static void read_word_file(const char *path, char *buf, size_t n) {
  buf[0] = 0;
  FILE *f = fopen(path, "re");
  if (!f) return;
  if (!fgets(buf, (int)n, f)) buf[0] = 0;
  buf[strcspn(buf, "\r\n")] = 0;
  fclose(f);
}

static void sysfs_caches(cwm_target *t) {
  for (int i = 0; i < 16; i++) {
    char path[128], level[16], type[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    read_word_file(path, level, sizeof level);
    if (!level[0]) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    read_word_file(path, type, sizeof type);
    if (strcmp(type, "Instruction") == 0) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    long sz = read_size_file(path);
    int lv = atoi(level);
    if (lv == 1 && t->l1d <= 0) t->l1d = sz;
    else if (lv == 2 && t->l2 <= 0) t->l2 = sz;
    else if (lv == 3 && t->l3 <= 0) t->l3 = sz;
  }
}

static long sc(int name) {
  long v = sysconf(name);
  return v > 0 ? v : 0;
}

void cwm_target_detect(cwm_target *t, int threads, const char *cc, const char *cflags) {
  memset(t, 0, sizeof *t);
  t->vec_bytes = 16;
  t->cache_line = 64;
  read_cpuinfo(t);
  if (!t->model[0]) snprintf(t->model, sizeof t->model, "unknown");
  long cores = sc(_SC_NPROCESSORS_ONLN);
  t->cores = cores > 0 && cores < 1 << 20 ? (int)cores : 1;
  t->threads = threads > 0 ? threads : t->cores;
#ifdef _SC_LEVEL1_DCACHE_SIZE
  t->l1d = sc(_SC_LEVEL1_DCACHE_SIZE);
  t->l2 = sc(_SC_LEVEL2_CACHE_SIZE);
  t->l3 = sc(_SC_LEVEL3_CACHE_SIZE);
#endif
  if (t->l1d <= 0 || t->l2 <= 0 || t->l3 <= 0) sysfs_caches(t);
  snprintf(t->cc, sizeof t->cc, "%s", cc && *cc ? cc : "cc");
  snprintf(t->cflags, sizeof t->cflags, "%s", cflags ? cflags : "");
}

static void put_value(cwm_buf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    cwm_buf_putc(b, c <= ' ' || c == 0x7f ? '_' : (char)c);
  }
}

void cwm_target_string(const cwm_target *t, char *buf, size_t n) {
  if (!buf || n == 0) return;
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, "c -keys=cpu -mcpu=");
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%.*s", (int)sizeof t->model - 1, t->model);
  put_value(&b, tmp);
  cwm_buf_printf(&b, " -threads=%d -vec=%d -cc=", t->threads, t->vec_bytes);
  snprintf(tmp, sizeof tmp, "%.*s", (int)sizeof t->cc - 1, t->cc);
  put_value(&b, tmp);
  cwm_buf_puts(&b, " -cflags=");
  snprintf(tmp, sizeof tmp, "%.*s", (int)sizeof t->cflags - 1, t->cflags);
  put_value(&b, tmp);
  snprintf(buf, n, "%s", b.s);
  cwm_buf_free(&b);
}
