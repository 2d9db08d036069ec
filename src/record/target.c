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

/* The CPU's "model name" and, where the kernel reports them (x86), its family and model numbers
 * as "family.model" (the feature words are cpu_flags' below). The first CPU's lines only: they
 * come before its "model name". */
static void read_cpuinfo(cwm_target *t) {
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  long family = -1, model = -1;
  while (!t->model[0] && getline(&line, &cap, f) > 0) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    size_t key = strcspn(line, "\t:");
    if (key == 10 && strncmp(line, "model name", 10) == 0) sanitize(t->model, sizeof t->model, colon + 1);
    else if (key == 10 && strncmp(line, "cpu family", 10) == 0) family = strtol(colon + 1, NULL, 10);
    else if (key == 5 && strncmp(line, "model", 5) == 0) model = strtol(colon + 1, NULL, 10);
  }
  if (family >= 0 && family < 100000 && model >= 0 && model < 100000)
    snprintf(t->cpuid, sizeof t->cpuid, "%ld.%ld", family, model);
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

/* ------------------------------------------------------------------ instruction sets */

/* Widest first: cwm_isa_of_cflags takes the first whose flags all appear, and avx512's flags
 * include avx2's. The avx512 set is what x86-64-v4 names (F, VL, BW, DQ), spelled out so that gcc
 * and clang of any age take it; sse4 keeps 8-lane tiles (two registers each), as the generator
 * has no 4-lane tiles; neon is AArch64's Advanced SIMD, part of the base architecture. */
static const cwm_isa g_isas[] = {
    {"avx512", "x86_64", 64, 16, "-mavx512f -mavx512vl -mavx512bw -mavx512dq -mavx2 -mfma",
     "avx512f avx512vl avx512bw avx512dq avx2 fma", "x86-64 with AVX-512 (F, VL, BW, DQ): 16-float tiles"},
    {"avx2", "x86_64", 32, 8, "-mavx2 -mfma", "avx2 fma", "x86-64 with AVX2 and FMA: 8-float tiles"},
    {"sse4", "x86_64", 16, 8, "-msse4.2", "sse4_2", "x86-64 with SSE4.2: 8-float tiles in two registers"},
    {"neon", "aarch64", 16, 8, "-march=armv8-a", "asimd", "AArch64 Advanced SIMD: 8-float tiles in two registers"},
    {"generic", "", 16, 8, "", "", "the compiler's baseline for the machine (no extension assumed)"},
};
#define NISA ((int)(sizeof g_isas / sizeof g_isas[0]))

const cwm_isa *cwm_isa_list(int *n) {
  if (n) *n = NISA;
  return g_isas;
}

const cwm_isa *cwm_isa_find(const char *name) {
  for (int i = 0; name && i < NISA; i++)
    if (!strcmp(g_isas[i].name, name)) return &g_isas[i];
  return NULL;
}

static const char *host_arch(void) {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "other";
#endif
}

/* The CPU's feature words (/proc/cpuinfo "flags" or "Features"), read once. */
static char g_cpu_flags[4096];
static int g_cpu_flags_read;

static const char *cpu_flags(void) {
  if (g_cpu_flags_read) return g_cpu_flags;
  g_cpu_flags_read = 1;
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return g_cpu_flags;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    char *colon = strchr(line, ':');
    if (colon && (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0)) {
      snprintf(g_cpu_flags, sizeof g_cpu_flags, "%s", colon + 1);
      g_cpu_flags[strcspn(g_cpu_flags, "\n")] = 0;
      break;
    }
  }
  free(line);
  fclose(f);
  return g_cpu_flags;
}

int cwm_isa_runs_here(const cwm_isa *isa, char *missing, size_t n) {
  if (missing && n) missing[0] = 0;
  if (isa->arch[0] && strcmp(isa->arch, host_arch())) {
    if (missing && n) snprintf(missing, n, "%s", isa->arch);
    return 0;
  }
  const char *have = cpu_flags();
  char word[32];
  for (const char *p = isa->features; *p;) {
    size_t k = strcspn(p, " ");
    snprintf(word, sizeof word, "%.*s", (int)k, p);
    if (k && !has_word(have, word)) {
      if (missing && n) snprintf(missing, n, "%s", word);
      return 0;
    }
    p += k;
    while (*p == ' ') p++;
  }
  return 1;
}

const cwm_isa *cwm_isa_host(void) {
  for (int i = 0; i < NISA; i++)
    if (cwm_isa_runs_here(&g_isas[i], NULL, 0)) return &g_isas[i];
  return &g_isas[NISA - 1];
}

/* 1 if the blank-separated word w (length k) is one of cflags's words. */
static int has_flag(const char *cflags, const char *w, size_t k) {
  for (const char *p = cflags; *p;) {
    while (*p == ' ' || *p == '\t') p++;
    size_t m = strcspn(p, " \t");
    if (m == k && !strncmp(p, w, k)) return 1;
    p += m;
  }
  return 0;
}

const cwm_isa *cwm_isa_of_cflags(const char *cflags) {
  if (!cflags) cflags = "";
  if (has_flag(cflags, "-march=native", 13)) return cwm_isa_host();
  for (int i = 0; i < NISA; i++) {
    int all = 1;
    for (const char *p = g_isas[i].flags; *p && all;) {
      size_t k = strcspn(p, " ");
      all = has_flag(cflags, p, k);
      p += k;
      while (*p == ' ') p++;
    }
    if (all) return &g_isas[i];
  }
  return &g_isas[NISA - 1];
}

int cwm_isa_cflags(const cwm_isa *isa, const char *base, char *buf, size_t n) {
  if (!base) base = "";
  cwm_buf b;
  cwm_buf_init(&b);
  const char *nat = NULL;
  for (const char *p = base; *p && !nat;) {
    while (*p == ' ' || *p == '\t') p++;
    size_t m = strcspn(p, " \t");
    if (m == 13 && !strncmp(p, "-march=native", 13)) nat = p;
    p += m;
  }
  if (!isa) {
    cwm_buf_puts(&b, base);
  } else if (nat) {
    cwm_buf_printf(&b, "%.*s%s%s", (int)(nat - base), base, isa->flags, nat + 13);
  } else {
    size_t first = strcspn(base, " \t");
    cwm_buf_printf(&b, "%.*s%s%s%s", (int)first, base, first && isa->flags[0] ? " " : "", isa->flags, base + first);
  }
  /* an empty preset (generic) leaves a double blank behind: fold it */
  size_t k = 0;
  for (size_t i = 0; i < b.len; i++)
    if (!(b.s[i] == ' ' && (k == 0 || b.s[k - 1] == ' '))) b.s[k++] = b.s[i];
  while (k && b.s[k - 1] == ' ') k--;
  b.s[k] = 0;
  int ok = k < n;
  if (ok) memcpy(buf, b.s, k + 1);
  cwm_buf_free(&b);
  return ok ? 0 : CWM_EUSAGE;
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
  const cwm_isa *isa = cwm_isa_of_cflags(t->cflags);
  snprintf(t->isa, sizeof t->isa, "%s", isa->name);
  t->vec_bytes = isa->vec_bytes;
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
  if (t->cpuid[0]) {
    cwm_buf_puts(&b, " -cpuid=");
    put_value(&b, t->cpuid);
  }
  if (t->isa[0]) {
    cwm_buf_puts(&b, " -isa=");
    put_value(&b, t->isa);
  }
  cwm_buf_printf(&b, " -threads=%d -vec=%d -cc=", t->threads, t->vec_bytes);
  snprintf(tmp, sizeof tmp, "%.*s", (int)sizeof t->cc - 1, t->cc);
  put_value(&b, tmp);
  cwm_buf_puts(&b, " -cflags=");
  snprintf(tmp, sizeof tmp, "%.*s", (int)sizeof t->cflags - 1, t->cflags);
  put_value(&b, tmp);
  snprintf(buf, n, "%s", b.s);
  cwm_buf_free(&b);
}

int cwm_target_string_field(const char *target, const char *field, char *buf, size_t n) {
  if (n) buf[0] = 0;
  if (!target) return 0;
  char key[40];
  snprintf(key, sizeof key, " -%s=", field);
  const char *p = strstr(target, key);
  if (!p) return 0;
  p += strlen(key);
  size_t k = strcspn(p, " ");
  if (n) snprintf(buf, n, "%.*s", (int)k, p);
  return 1;
}

const cwm_isa *cwm_target_string_isa(const char *target) {
  char v[32];
  if (cwm_target_string_field(target, "isa", v, sizeof v)) return cwm_isa_find(v);
  if (!cwm_target_string_field(target, "vec", v, sizeof v)) return NULL;
  return !strcmp(v, "64") ? cwm_isa_find("avx512") : !strcmp(v, "32") ? cwm_isa_find("avx2") : NULL;
}
