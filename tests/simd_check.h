/* simd_check.h: a small check harness for the kernel tests, so each builds both as a
 * cmocka program (ctest) and as a stand-alone program without cmocka (-DTS_SIMD_STANDALONE,
 * used for the aarch64 build run under qemu). Checks print what failed; the exit status
 * is the verdict either way. */
#ifndef TESSERA_TESTS_SIMD_CHECK_H
#define TESSERA_TESTS_SIMD_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "simd.h"

static int sc_failures;

#define SC_CHECK(cond, ...)                                                         \
    do {                                                                            \
        if (!(cond)) {                                                              \
            sc_failures++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* Fewer and smaller cases under AddressSanitizer, to stay within the time budget. */
#if defined(__SANITIZE_ADDRESS__)
#define SC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SC_SANITIZED 1
#endif
#endif
#ifndef SC_SANITIZED
#define SC_SANITIZED 0
#endif

/* xorshift64*: deterministic inputs. */
static uint64_t sc_rng_state = 0x9e3779b97f4a7c15ull;
static inline float sc_uniform(float lo, float hi)
{
    sc_rng_state ^= sc_rng_state >> 12;
    sc_rng_state ^= sc_rng_state << 25;
    sc_rng_state ^= sc_rng_state >> 27;
    uint64_t r = sc_rng_state * 0x2545f4914f6cdd1dull;
    return lo + (hi - lo) * (float)(r >> 40) * (1.0f / 16777216.0f);
}
static inline void sc_fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = sc_uniform(lo, hi);
}

/* max |a - b| / max |b| over n floats (0 when both are all zero); NaN anywhere is 1e30. */
static inline double sc_norm_err(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return 1e30;
        double d = fabs((double)a[i] - (double)b[i]);
        num = d > num ? d : num;
        den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
    }
    return den > 0.0 ? num / den : num;
}

/* Every SIMD table this CPU can run (not ref); prints the ones skipped once. */
static inline int sc_simd_tables(const simd_kernels **out)
{
    static int reported;
    int n = 0;
    for (int i = SIMD_ISA_REF + 1; i < SIMD_ISA_COUNT; i++) {
        const simd_kernels *t = simd_kernels_for((simd_isa)i);
        if (t)
            out[n++] = t;
        else if (!reported)
            printf("[  SKIPPED ] isa %s: not built for or not supported by this CPU\n",
                   simd_isa_name((simd_isa)i));
    }
    reported = 1;
    return n;
}

#ifdef TS_SIMD_STANDALONE
#define SC_RUN_ONE(fn)                                                              \
    {                                                                               \
        int before = sc_failures;                                                   \
        fn();                                                                       \
        printf("%s %s\n", sc_failures == before ? "ok  " : "FAIL", #fn);            \
        if (sc_failures == before)                                                  \
            passed++;                                                               \
        else                                                                        \
            failed++;                                                               \
    }
/* main() running every check of the list X(check_fn). */
#define SC_MAIN(group, LIST)                                                        \
    int main(void)                                                                  \
    {                                                                               \
        int passed = 0, failed = 0;                                                 \
        LIST(SC_RUN_ONE)                                                            \
        printf("%s: %d passed, %d failed\n", group, passed, failed);                \
        return failed ? 1 : 0;                                                      \
    }
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#define SC_WRAP(fn)                                                                 \
    static void cm_##fn(void **state)                                               \
    {                                                                               \
        (void)state;                                                                \
        int before = sc_failures;                                                   \
        fn();                                                                       \
        assert_int_equal(sc_failures, before);                                      \
    }
#define SC_ENTRY(fn) cmocka_unit_test(cm_##fn),
#define SC_MAIN(group, LIST)                                                        \
    LIST(SC_WRAP)                                                                   \
    int main(void)                                                                  \
    {                                                                               \
        const struct CMUnitTest tests[] = {LIST(SC_ENTRY)};                         \
        return cmocka_run_group_tests_name(group, tests, NULL, NULL);               \
    }
#endif

#endif
