/* cdefs.c: the definitions generated kernels use, each put before a kernel only when it uses it:
 * vector types and loads, the 8 x 8 transpose, and exp, erf, max and min that vectorize. Each is
 * wrapped in #ifndef so that kernels concatenated into one file define it once. */
#include "lower_internal.h"

/* 8-lane vectors: unaligned loads and stores, and strided ones for the accumulators of a tile
 * whose vectorized axis is not the store's last. */
static const char vec8_defs[] =
    "#ifndef CWM_VEC_DEFS\n#define CWM_VEC_DEFS\n"
    "typedef float cwm_v8f __attribute__((vector_size(32)));\n"
    "typedef float cwm_v8fu __attribute__((vector_size(32), aligned(4), may_alias));\n"
    "#define CWM_LOADU(p) (*(const cwm_v8fu *)(p))\n"
    "#define CWM_STOREU(p, v) (*(cwm_v8fu *)(p) = (v))\n"
    "/* a vector whose lanes lie s floats apart (the accumulators of a strided tile) */\n"
    "#define CWM_LOADS(p, s) ((cwm_v8f){(p)[0], (p)[(s)], (p)[2 * (s)], (p)[3 * (s)], \\\n"
    "                                   (p)[4 * (s)], (p)[5 * (s)], (p)[6 * (s)], (p)[7 * (s)]})\n"
    "#define CWM_STORES(p, s, v) do { float *q__ = (p); cwm_v8f v__ = (v); \\\n"
    "  for (int l__ = 0; l__ < 8; l__++) q__[l__ * (s)] = v__[l__]; } while (0)\n"
    "#endif\n";

static const char vec16_defs[] =
    "#ifndef CWM_VEC16_DEFS\n#define CWM_VEC16_DEFS\n"
    "/* 16 lanes: one AVX-512 register (two AVX2 registers where the compiler has no AVX-512) */\n"
    "typedef float cwm_v16f __attribute__((vector_size(64)));\n"
    "typedef float cwm_v16fu __attribute__((vector_size(64), aligned(4), may_alias));\n"
    "#define CWM_LOADU16(p) (*(const cwm_v16fu *)(p))\n"
    "#define CWM_STOREU16(p, v) (*(cwm_v16fu *)(p) = (v))\n"
    "#define CWM_LOADS16(p, s) ((cwm_v16f){(p)[0], (p)[(s)], (p)[2 * (s)], (p)[3 * (s)], \\\n"
    "    (p)[4 * (s)], (p)[5 * (s)], (p)[6 * (s)], (p)[7 * (s)], (p)[8 * (s)], (p)[9 * (s)], \\\n"
    "    (p)[10 * (s)], (p)[11 * (s)], (p)[12 * (s)], (p)[13 * (s)], (p)[14 * (s)], (p)[15 * (s)]})\n"
    "#define CWM_STORES16(p, s, v) do { float *q__ = (p); cwm_v16f v__ = (v); \\\n"
    "  for (int l__ = 0; l__ < 16; l__++) q__[l__ * (s)] = v__[l__]; } while (0)\n"
    "#endif\n";

/* The even elements p[0], p[2] .. of a stride-2 read (a strided convolution's input along its
 * vectorized output axis), 8 and 16 lanes: two overlapping loads and one shuffle, nothing read
 * past the last element used. */
static const char loade8_defs[] =
    "#ifndef CWM_LOADE_DEFS\n#define CWM_LOADE_DEFS\n"
    "#if defined(__clang__)\n"
    "#define CWM_LOADE(p) __builtin_shufflevector((cwm_v8f)CWM_LOADU(p), (cwm_v8f)CWM_LOADU((p) + 7), \\\n"
    "                                             0, 2, 4, 6, 9, 11, 13, 15)\n"
    "#else\n"
    "typedef int cwm_v8ie __attribute__((vector_size(32)));\n"
    "#define CWM_LOADE(p) __builtin_shuffle((cwm_v8f)CWM_LOADU(p), (cwm_v8f)CWM_LOADU((p) + 7), \\\n"
    "                                       (cwm_v8ie){0, 2, 4, 6, 9, 11, 13, 15})\n"
    "#endif\n"
    "#endif\n";

static const char loade16_defs[] =
    "#ifndef CWM_LOADE16_DEFS\n#define CWM_LOADE16_DEFS\n"
    "#if defined(__clang__)\n"
    "#define CWM_LOADE16(p) __builtin_shufflevector((cwm_v16f)CWM_LOADU16(p), (cwm_v16f)CWM_LOADU16((p) + 15), \\\n"
    "    0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31)\n"
    "#else\n"
    "typedef int cwm_v16ie __attribute__((vector_size(64)));\n"
    "#define CWM_LOADE16(p) __builtin_shuffle((cwm_v16f)CWM_LOADU16(p), (cwm_v16f)CWM_LOADU16((p) + 15), \\\n"
    "    (cwm_v16ie){0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31})\n"
    "#endif\n"
    "#endif\n";

static const char inreg_defs[] =
    "#ifndef CWM_INREG\n"
    "/* keeps a loaded vector in a register: one load reused by every FMA */\n"
    "#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512VL__)\n"
    "#define CWM_INREG(v) __asm__(\"\" : \"+v\"(v))\n"
    "#elif defined(__x86_64__) && defined(__GNUC__) && defined(__AVX__)\n"
    "#define CWM_INREG(v) __asm__(\"\" : \"+x\"(v))\n"
    "#else\n#define CWM_INREG(v) ((void)0) /* no 32-byte registers: the compiler splits it */\n#endif\n"
    "#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512F__)\n"
    "#define CWM_INREG16(v) __asm__(\"\" : \"+v\"(v))\n"
    "#else\n#define CWM_INREG16(v) ((void)0) /* no 64-byte registers: the compiler splits it */\n"
    "#endif\n#endif\n";

static const char tr8_defs[] =
    "#ifndef CWM_TR8_DEFS\n#define CWM_TR8_DEFS\n"
    "#if defined(__clang__)\n#define CWM_SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)\n"
    "#else\ntypedef int cwm_v8i __attribute__((vector_size(32)));\n"
    "#define CWM_SHUF8(a, b, ...) __builtin_shuffle(a, b, (cwm_v8i){__VA_ARGS__})\n#endif\n"
    "/* transposes the 8 x 8 block whose rows are r[0..7], in registers */\n"
    "static inline void cwm_tr8(cwm_v8f *r) {\n"
    "  cwm_v8f t[8], u[8];\n"
    "  for (int i = 0; i < 8; i += 2) {\n"
    "    t[i] = CWM_SHUF8(r[i], r[i + 1], 0, 8, 1, 9, 2, 10, 3, 11);\n"
    "    t[i + 1] = CWM_SHUF8(r[i], r[i + 1], 4, 12, 5, 13, 6, 14, 7, 15);\n"
    "  }\n"
    "  for (int h = 0; h < 8; h += 4) {\n"
    "    u[h] = CWM_SHUF8(t[h], t[h + 2], 0, 1, 8, 9, 2, 3, 10, 11);\n"
    "    u[h + 1] = CWM_SHUF8(t[h], t[h + 2], 4, 5, 12, 13, 6, 7, 14, 15);\n"
    "    u[h + 2] = CWM_SHUF8(t[h + 1], t[h + 3], 0, 1, 8, 9, 2, 3, 10, 11);\n"
    "    u[h + 3] = CWM_SHUF8(t[h + 1], t[h + 3], 4, 5, 12, 13, 6, 7, 14, 15);\n"
    "  }\n"
    "  for (int j = 0; j < 4; j++) {\n"
    "    r[2 * j] = CWM_SHUF8(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);\n"
    "    r[2 * j + 1] = CWM_SHUF8(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);\n"
    "  }\n}\n#endif\n";

/* exp and erf in plain C, branch-free, so that a loop calling them vectorizes (libm's expf and
 * erff are scalar calls: 4 and 11 ns an element here, against 0.8 and 1.2 vectorized). exp:
 * Cephes' reduction by ln 2 and its degree-6 polynomial, relative error below 1e-7 on
 * [-87.3, 88.3], NaN kept. The range is handled by the exponent alone, with no select after the
 * polynomial: x is clamped to [-88.3, 88.9], so that 2^k runs from k = -127 (the bits of 0.0:
 * exp of -inf is 0) to k = 128 (the bits of infinity); exp's float overflow lies at 88.72, so
 * above 88.38 the result is inf one third of a unit early. 16 vector operations against 22 with
 * the selects: a softmax of rows of 197 runs about 1.4 times as fast. erf: Abramowitz-Stegun
 * 7.1.26 on |x| with that exp, absolute error below 1e-6; max and min as selects (fmaxf's NaN
 * rule keeps a loop scalar), equal to fmaxf and fminf on numbers. The compiler if-converts the
 * range selects when trapping math is off (the builder's -fno-trapping-math); otherwise the loop
 * stays scalar but correct. */
static const char math_defs[] =
    "#ifndef CWM_MATH_DEFS\n#define CWM_MATH_DEFS\n"
    "static inline float cwm_expf(float x) {\n"
    "  float xc = x < -88.3f ? -88.3f : x;\n"
    "  xc = xc > 88.9f ? 88.9f : xc;\n"
    "  float k = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest: -127 .. 128 */\n"
    "  float r = xc - k * 0.693359375f + k * 2.12194440e-4f;\n"
    "  float p = 1.9875691500e-4f;\n"
    "  p = p * r + 1.3981999507e-3f;\n"
    "  p = p * r + 8.3334519073e-3f;\n"
    "  p = p * r + 4.1665795894e-2f;\n"
    "  p = p * r + 1.6666665459e-1f;\n"
    "  p = p * r + 5.0000001201e-1f;\n"
    "  p = p * r * r + r + 1.0f;\n"
    "  int ki = ((int)k + 127) << 23; /* 2^k: 0 for k = -127, infinity for k = 128 */\n"
    "  float sc;\n"
    "  __builtin_memcpy(&sc, &ki, sizeof sc);\n"
    "  return p * sc;\n"
    "}\n"
    "static inline float cwm_fmaxf(float a, float b) { return a > b ? a : b; }\n"
    "static inline float cwm_fminf(float a, float b) { return a < b ? a : b; }\n"
    "static inline float cwm_erff(float x) {\n"
    "  float a = __builtin_fabsf(x);\n"
    "  float t = 1.0f / (1.0f + 0.3275911f * a);\n"
    "  float q = 1.061405429f;\n"
    "  q = q * t - 1.453152027f;\n"
    "  q = q * t + 1.421413741f;\n"
    "  q = q * t - 0.284496736f;\n"
    "  q = q * t + 0.254829592f;\n"
    "  return __builtin_copysignf(1.0f - q * t * cwm_expf(-a * a), x);\n"
    "}\n#endif\n";

void lower_put_defs(cwm_buf *b, int used_vec, int used_tr8, int used_math) {
  if (used_vec & 1) cwm_buf_puts(b, vec8_defs);
  if (used_vec & 2) cwm_buf_puts(b, vec16_defs);
  if (used_vec & 4) cwm_buf_puts(b, loade8_defs);
  if (used_vec & 8) cwm_buf_puts(b, loade16_defs);
  if (used_vec) cwm_buf_puts(b, inreg_defs);
  if (used_tr8) cwm_buf_puts(b, tr8_defs);
  if (used_math) cwm_buf_puts(b, math_defs);
}

void cwm_codegen_cpu_check(cwm_buf *c, const char *fn) {
  /* every macro an -m flag or -march defines for an extension kernels may use, widest first, with
   * the name __builtin_cpu_supports knows it by */
  static const char *const isa[][2] = {{"__AVX512F__", "avx512f"}, {"__AVX512BW__", "avx512bw"},
                                       {"__AVX512DQ__", "avx512dq"}, {"__AVX512VL__", "avx512vl"},
                                       {"__AVX2__", "avx2"},         {"__FMA__", "fma"},
                                       {"__AVX__", "avx"},           {"__SSE4_2__", "sse4.2"}};
  cwm_buf_printf(c, "#if defined(__x86_64__) && defined(__GNUC__)\n"
                    "__attribute__((target(\"arch=x86-64\"))) const char *%s(void) {\n"
                    "#ifdef CWM_PRETEND_MISSING\n  return CWM_PRETEND_MISSING;\n#endif\n  __builtin_cpu_init();\n", fn);
  for (size_t i = 0; i < sizeof isa / sizeof *isa; i++)
    cwm_buf_printf(c, "#ifdef %s\n  if (!__builtin_cpu_supports(\"%s\")) return \"%s\";\n#endif\n", isa[i][0], isa[i][1],
                   isa[i][1]);
  cwm_buf_printf(c, "  return 0;\n}\n#else\n/* AArch64's Advanced SIMD is part of the base architecture: nothing to check */\n"
                    "const char *%s(void) {\n#ifdef CWM_PRETEND_MISSING\n  return CWM_PRETEND_MISSING;\n#endif\n"
                    "  return 0;\n}\n#endif\n", fn);
}
