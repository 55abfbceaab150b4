/* test_simd_amx_emu.c: the AMX int8 tile kernels (simd/amx/qgemm_amx.c for 8-bit packs,
 * qgemm_amx_q4k.c for Q4_K, qgemm_amx_q6k.c for Q6_K) built here over a plain-C emulation of
 * the tile instructions (amx_emu.h), against the twin bit for bit: M from 16 over and
 * around multiples of 16 and past the 4-6 bit kernels' 256-row passes, K of one to three
 * blocks, N not a multiple of 16, ranges cut inside 16-row groups, beta 0 and 1, random
 * values and the extreme ones (qd_extreme: Q6_K's scales -128 and 127, q -32 and 31,
 * activations -127 and 127), and every tile configuration checked. So the tile kernels'
 * logic is tested on any x86-64 CPU with AVX-512 BW (their vector parts run natively; Q4_K's
 * VBMI variant where the CPU has VBMI), not only where AMX runs (test_simd_amx runs the real
 * tiles there). Skipped, saying so, elsewhere. */
#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#include <immintrin.h>

#include "amx_emu.h"
/* the kernels under other names, so they do not clash with the library's */
#define simd_amx_qpack_gemm emu_qpack_gemm
#define simd_amx_qpack_gemm_q4k emu_qpack_gemm_q4k
#define simd_amx_qpack_gemm_q4k_bw emu_qpack_gemm_q4k_bw
#define simd_amx_qpack_gemm_q6k emu_qpack_gemm_q6k
#include "../simd/amx/qgemm_amx.c"
#include "../simd/amx/qgemm_amx_q4k.c"
#include "../simd/amx/qgemm_amx_q6k.c"
#undef simd_amx_qpack_gemm
#undef simd_amx_qpack_gemm_q4k
#undef simd_amx_qpack_gemm_q4k_bw
#undef simd_amx_qpack_gemm_q6k
#define TS_AMX_EMU 1
#endif

#include <string.h>

#include "qpack_data.h"
#include "qpack_internal.h"
#include "simd_check.h"

#ifdef TS_AMX_EMU
_Thread_local emu_tiles emu_t;
int emu_errors;

static bool cpu_ok(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
}

/* One kernel on one shape (extreme: qd_extreme's values) against the twin, over three
 * ranges cut inside the second and third groups, beta 0 and 1. */
static void check_one(const char *name, uint32_t type, simd_qpack_fn f, int M, int N, int K,
                      bool extreme)
{
    size_t wrow, xrow;
    uint8_t *w = qd_weights(type, N, K, &wrow);
    uint8_t *xq = qd_acts(type, M, K, NULL, &xrow);
    if (extreme)
        qd_extreme(type, w, N, K, xq, M);
    simd_qmat qm = {.type = type, .N = N, .K = K, .row_bytes = wrow, .data = w};
    simd_qpack *p = simd_qpack_make(&qm);
    SC_CHECK(p != NULL, "%s pack", name);
    size_t ldo = (size_t)N + 3, n_out = (size_t)M * ldo;
    float *a = malloc(sizeof(float) * n_out), *b = malloc(sizeof(float) * n_out);
    const int cuts[] = {0, 17, 33, N};
    for (int beta = 0; p && beta < 2; beta++) {
        for (size_t i = 0; i < n_out; i++)
            a[i] = b[i] = beta ? 0.25f * (float)(i % 7) - 0.5f : NAN;
        for (int c = 0; c < 3; c++) {
            f(a, ldo, xq, p, M, (float)beta, cuts[c], cuts[c + 1]);
            simd_qpack_gemm_ref(b, ldo, xq, p, M, (float)beta, cuts[c], cuts[c + 1]);
        }
        int bad = 0;
        for (size_t i = 0; i < n_out; i++)
            bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
        SC_CHECK(bad == 0, "%s M=%d N=%d K=%d beta %d%s: %d of %zu outputs differ from the twin",
                 name, M, N, K, beta, extreme ? " extreme" : "", bad, n_out);
    }
    free(a), free(b), free(w), free(xq);
    simd_qpack_free(p);
}

static void check_tiles_emulated(void)
{
    if (!cpu_ok()) {
        printf("[  SKIPPED ] emulated AMX kernels: this CPU lacks AVX-512 BW for their "
               "vector parts\n");
        return;
    }
    bool vbmi = __builtin_cpu_supports("avx512vbmi");
    if (!vbmi)
        printf("[  SKIPPED ] emulated Q4_K tiles with vpermi2b: this CPU lacks AVX-512 VBMI "
               "(the Q4_K tiles without it are checked)\n");
    static const struct {
        uint32_t type;
        const char *name;
        simd_qpack_fn f;
        bool vbmi;
    } kernels[] = {
        {QT_Q8_0, "Q8_0", emu_qpack_gemm, false},
        {QT_Q4_0, "Q4_0", emu_qpack_gemm, false},
        {QT_Q4_K, "Q4_K (BW)", emu_qpack_gemm_q4k_bw, false},
        {QT_Q4_K, "Q4_K (VBMI)", emu_qpack_gemm_q4k, true},
        {QT_Q6_K, "Q6_K", emu_qpack_gemm_q6k, false},
    };
    static const int Ms[] = {16, 17, 31, 32, 33, 48, 67, 100, 256, 257};
    int n_ms = SC_SANITIZED ? 6 : (int)(sizeof Ms / sizeof Ms[0]);
    for (size_t t = 0; t < sizeof kernels / sizeof kernels[0]; t++) {
        if (kernels[t].vbmi && !vbmi)
            continue;
        for (int mi = 0; mi < n_ms; mi++)
            for (int extreme = 0; extreme < 2; extreme++) {
                int N = mi % 2 ? 53 : 40, K = (1 + mi % 3) * qd_block_elems(kernels[t].type);
                check_one(kernels[t].name, kernels[t].type, kernels[t].f, Ms[mi], N, K,
                          extreme);
            }
        printf("         %s tiles: %d shapes x 2 value sets against the twin\n",
               kernels[t].name, n_ms);
    }
    SC_CHECK(emu_errors == 0, "%d tile configuration errors", emu_errors);
}
#else
static void check_tiles_emulated(void)
{
    printf("[  SKIPPED ] emulated AMX kernels: x86-64 only\n");
}
#endif

#define CHECKS(X) X(check_tiles_emulated)
SC_MAIN("simd_amx_emu", CHECKS)
