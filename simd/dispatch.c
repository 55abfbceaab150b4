/* dispatch.c: every kernel choice, made once: the kernel table for this CPU (CPUID on x86,
 * HWCAP on aarch64), what the packed kernels may use (AVX-512 VNNI, AMX tiles), and how
 * each weight matrix is multiplied (simd_qmat_plan). The only place that probes the CPU or
 * reads the environment: TESSERA_FORCE_REF=1 (plain C everywhere) and TESSERA_NO_AMX=1
 * (no tiles), both read once. */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qmat.h"
#include "qpack_internal.h"
#include "simd_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(TS_HAVE_AVX2) || defined(TS_HAVE_AVX512))
#include <cpuid.h>

/* XCR0 bits the OS must enable before AVX (xmm, ymm) resp. AVX-512 (plus opmask, zmm
 * upper halves, zmm16-31) may be used. */
#define XCR0_AVX 0x06u
#define XCR0_AVX512 0xe6u

static unsigned os_xsave_mask(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return lo;
}

/* F16C from CPUID leaf 1 directly: clang 14's __builtin_cpu_supports does not know it. */
static int cpu_has_f16c(void)
{
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#endif

static int cpu_has(simd_isa isa)
{
    switch (isa) {
    case SIMD_ISA_REF:
        return 1;
#if defined(TS_HAVE_AVX2) && (defined(__x86_64__) || defined(__i386__))
    case SIMD_ISA_AVX2:
        __builtin_cpu_init();
        return (os_xsave_mask() & XCR0_AVX) == XCR0_AVX && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma") && cpu_has_f16c();
#endif
#if defined(TS_HAVE_AVX512) && (defined(__x86_64__) || defined(__i386__))
    case SIMD_ISA_AVX512:
        __builtin_cpu_init();
        return (os_xsave_mask() & XCR0_AVX512) == XCR0_AVX512 &&
               __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_has_f16c();
#endif
#if defined(TS_HAVE_AVX512VNNI) && (defined(__x86_64__) || defined(__i386__))
    case SIMD_ISA_AVX512VNNI:
        __builtin_cpu_init();
        return cpu_has(SIMD_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(TS_HAVE_NEON) && defined(__aarch64__)
    case SIMD_ISA_NEON:
#if defined(__linux__)
        return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
        return 1; /* Advanced SIMD is part of the aarch64 baseline */
#endif
#endif
    default:
        return 0;
    }
}

static const simd_kernels *table_of(simd_isa isa)
{
    switch (isa) {
    case SIMD_ISA_REF:
        return &simd_ref_table;
#if defined(TS_HAVE_AVX2)
    case SIMD_ISA_AVX2:
        return &simd_avx2_table;
#endif
#if defined(TS_HAVE_AVX512)
    case SIMD_ISA_AVX512:
        return &simd_avx512_table;
#endif
#if defined(TS_HAVE_NEON)
    case SIMD_ISA_NEON:
        return &simd_neon_table;
#endif
#if defined(TS_HAVE_AVX512VNNI)
    case SIMD_ISA_AVX512VNNI:
        return &simd_avx512vnni_table;
#endif
    default:
        return NULL;
    }
}

const simd_kernels *simd_kernels_for(simd_isa isa)
{
    const simd_kernels *t = table_of(isa);
    return t && cpu_has(isa) ? t : NULL;
}

static bool env_is_1(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

const simd_kernels *simd_init(void)
{
#if defined(TESSERA_FORCE_REF)
    return &simd_ref_table;
#else
    if (env_is_1("TESSERA_FORCE_REF"))
        return &simd_ref_table;
    static const simd_isa best_first[] = {SIMD_ISA_AVX512VNNI, SIMD_ISA_AVX512, SIMD_ISA_AVX2,
                                          SIMD_ISA_NEON};
    for (size_t i = 0; i < sizeof best_first / sizeof best_first[0]; i++) {
        const simd_kernels *t = simd_kernels_for(best_first[i]);
        if (t)
            return t;
    }
    return &simd_ref_table;
#endif
}

const char *simd_isa_name(simd_isa isa)
{
    static const char *const names[SIMD_ISA_COUNT] = {"ref", "avx2", "avx512", "neon",
                                                       "avx512vnni"};
    return (unsigned)isa < SIMD_ISA_COUNT ? names[isa] : "unknown";
}

/* ---- what the packed kernels may use ---- */

#if defined(TS_HAVE_AMX) && defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define XCR0_TILE (3u << 17) /* XTILECFG, XTILEDATA */

static int amx_probe(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
        return 0;
    unsigned amx_bf16 = edx & (1u << 22), amx_tile = edx & (1u << 24),
             amx_int8 = edx & (1u << 25);
    if (!amx_tile)
        return 0;
    __builtin_cpu_init();
    /* The tile kernels' float terms use AVX-512 VNNI (qp_f32_row), as every AMX CPU has */
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("fma") ||
        !__builtin_cpu_supports("avx512vnni"))
        return 0;
    unsigned xcr0 = os_xsave_mask();
    if ((xcr0 & XCR0_AVX512) != XCR0_AVX512 || (xcr0 & XCR0_TILE) != XCR0_TILE)
        return 0;
    /* Linux (5.16+) hands out the 8 KiB tile data state only to processes that ask. */
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return 0;
    unsigned vbmi = ecx & (1u << 1); /* AVX-512 VBMI: CPUID leaf 7, ECX bit 1 */
    return (amx_int8 ? QP_CAP_INT8 : 0) | (amx_bf16 ? QP_CAP_BF16 : 0) | (vbmi ? QP_CAP_VBMI : 0);
}
#else
static int amx_probe(void) { return 0; }
#endif

int qpack_amx_caps(void)
{
    enum { KNOWN = 1 << 16 }; /* above every QP_CAP_ bit */
    static atomic_int state;  /* 0 unknown, else KNOWN | caps */
    int s = atomic_load(&state);
    if (s == 0) {
        /* Racing first callers both probe; the request is idempotent. */
        bool off = env_is_1("TESSERA_FORCE_REF") || env_is_1("TESSERA_NO_AMX");
        s = KNOWN | (off ? 0 : amx_probe());
        atomic_store(&state, s);
    }
    return s & ~KNOWN;
}

bool simd_amx_usable(void) { return (qpack_amx_caps() & QP_CAP_INT8) != 0; }

/* Where the packs' vector kernel runs: built, and the CPU has AVX-512 VNNI. */
static bool vnni_usable(void)
{
#if defined(TS_HAVE_AVX512VNNI)
    return !env_is_1("TESSERA_FORCE_REF") && simd_kernels_for(SIMD_ISA_AVX512VNNI) != NULL;
#else
    return false;
#endif
}

bool simd_qpack_fast(uint32_t type)
{
    if (type == QT_F16 || type == QT_BF16)
        return (qpack_amx_caps() & QP_CAP_BF16) != 0;
    return simd_qpack_supports(type) && (vnni_usable() || (qpack_amx_caps() & QP_CAP_INT8));
}

const char *simd_qpack_kernels(void)
{
    bool tiles = (qpack_amx_caps() & QP_CAP_INT8) != 0;
    if (vnni_usable())
        return tiles ? "AVX-512 VNNI + AMX tiles" : "AVX-512 VNNI";
    return tiles ? "AMX tiles" : "plain C";
}

int qpack_tile_kernels(const simd_qpack *p, simd_qpack_fn fns[2])
{
    int n = 0;
#if defined(TS_HAVE_AMX)
    int caps = qpack_amx_caps();
    if (p->type == QT_F16 || p->type == QT_BF16) {
        if (caps & QP_CAP_BF16)
            fns[n++] = simd_amx_qpack_gemm_bf16;
    } else if (caps & QP_CAP_INT8) {
        /* Tiles for the 8-bit units, Q4_K and Q6_K, whose sub-block scales go into the two
         * B operands (Q4_K's split as 8 sh + sl, Q6_K's multiplied in and the products
         * split as 128 h + l), so no fold per sub-block is needed; Q5_K's would need a fold
         * per sub-block, which made tiles no faster than the vector kernel. */
        if (p->bits == 8) {
            fns[n++] = simd_amx_qpack_gemm;
        } else if (p->type == QT_Q4_K) {
            if (caps & QP_CAP_VBMI)
                fns[n++] = simd_amx_qpack_gemm_q4k;
            fns[n++] = simd_amx_qpack_gemm_q4k_bw;
        } else if (p->type == QT_Q6_K) {
            fns[n++] = simd_amx_qpack_gemm_q6k;
        }
    }
#else
    (void)p, (void)fns;
#endif
    return n;
}

void simd_qpack_f32_gemm(float *out, size_t ldo, const uint16_t *x, const void *pack, int N,
                         int K, int M)
{
    simd_qpack p;
    qpack_f32_view(&p, pack, N, K);
    simd_qpack_fn tiles[2];
    if (qpack_tile_kernels(&p, tiles) > 0)
        tiles[0](out, ldo, x, &p, M, 0.0f, 0, N);
    else
        qpack_bf16_gemm_ref(out, ldo, x, &p, M, 0.0f, 0, N);
}

/* The fewest rows from which a pack of this type takes its tiles. From QP_TILE_MIN_M but
 * for Q4_K, from 32: at 16 its vector kernel is as fast or faster. On a 16-core Xeon with
 * AMX, 16 threads, the tiles one activation tile at a time, two rounds: bench_qpack
 * (N 5632, K 2048) vector against tiles, GOP/s, 16 rows 2851, 3295 / 2774, 3116; 32 rows
 * 2944, 3207 / 3865, 4020; bench_layers GEMM ms a step with the tiles from 32 / from 48
 * (the vector kernel at 32): TinyLlama Q4_K_M 32 rows 21.9, 24.5 / 28.0, 27.8;
 * stories110m 3.67, 3.43 / 3.65, 3.60; from 16, TinyLlama's 16-row GEMM took 17.2, 19.7
 * against 16.9, 16.8. (With pairs of activation tiles the vector kernel stayed ahead up
 * to 32 rows.) Q6_K's from 16: its vector kernel holds 1.4-1.8 TOPS at every M, its tiles
 * 2.7 at 16 rows and 3.2-4.8 from 32 (bench_qpack, same machine, N 2048 K 5632);
 * bench_layers, TinyLlama Q4_K_M, GEMM ms a step with Q6_K's tiles from 16 / 64 rows /
 * never: 16 rows 17.0, 18.1 / 18.0, 18.8 / 18.9, 18.8; 32 rows 24.3, 27.4 / 31.5, 31.6 /
 * 31.9, 31.4; 512 rows 314, 321 / 333, 345 / 389, 423. F16 / BF16 packs have no vector
 * kernel: their tiles run at every M. */
static int tile_min_rows(uint32_t type)
{
    if (type == QT_F16 || type == QT_BF16)
        return 0;
    return type == QT_Q4_K ? 32 : QP_TILE_MIN_M;
}

/* ---- how each matrix is multiplied ---- */

/* Rows of N a chunk on the file's blocks or f32 rows is best a multiple of: whole kernel
 * tiles (of 3, 4 or 6 weight rows) and whole 64-byte lines of out, so threads never share
 * one. */
enum { CHUNK_ALIGN = 48 };
/* The same on a pack: whole 16-row groups (a group split between chunks would be computed
 * twice), 64-byte runs of out. One group, not the int8 tile kernel's pair: with many
 * chunks a thread, a 2048-row matrix at 16 threads wants chunks of 16 rows, and rounding
 * them to 32 left each thread 4 chunks of a step's shortest GEMMs, the last of them taken
 * by only some threads. */
enum { CHUNK_ALIGN_PACKED = 16 };

bool simd_qmat_packs(simd_pack_policy policy, uint32_t type)
{
    if (policy == SIMD_PACK_NEVER || !simd_qpack_supports(type))
        return false;
    if (policy == SIMD_PACK_ALWAYS)
        return true;
    if (type == QT_F16 || type == QT_BF16) /* bf16 tiles round the activations to bf16 */
        return policy == SIMD_PACK_FAST && simd_qpack_fast(type);
    return simd_qpack_fast(type);
}

/* The record of a pack's kernels here. */
static void plan_pack(simd_qmul *u, const simd_qpack *p)
{
    bool bf16 = p->type == QT_F16 || p->type == QT_BF16;
    simd_qpack_fn tiles[2];
    int n_tiles = qpack_tile_kernels(p, tiles);
    u->how = SIMD_MUL_PACK;
    u->act = bf16 ? SIMD_ACT_BF16 : p->act;
    u->n_align = CHUNK_ALIGN_PACKED;
    u->gemm = bf16 ? qpack_bf16_gemm_ref : simd_qpack_gemm_ref;
    u->isa = "plain C";
#if defined(TS_HAVE_AVX512VNNI)
    if (!bf16 && vnni_usable()) {
        u->gemm = simd_vnni_qpack_gemm;
        u->isa = "AVX-512 VNNI";
    }
#endif
    u->tiles = n_tiles ? tiles[0] : NULL;
    u->tile_min_m = n_tiles ? tile_min_rows(p->type) : INT_MAX;
}

bool simd_qmat_plan(simd_qmat *w, const simd_kernels *k, simd_pack_policy policy)
{
    bool made = false;
    simd_qmul u = {.tile_min_m = INT_MAX, .n_align = CHUNK_ALIGN, .isa = k->name};
    if (w->type == QT_F32) {
        u.how = SIMD_MUL_F32;
        u.act = SIMD_ACT_ROWS;
        u.gemm_nt = k->gemm_nt;
    } else if (w->pack || (w->N > 0 && simd_qmat_packs(policy, w->type) &&
                           (made = (w->pack = simd_qpack_make(w)) != NULL))) {
        plan_pack(&u, w->pack);
    } else {
        u.how = SIMD_MUL_BLOCKS;
        const qtype_info *info = qtype_get(w->type);
        u.act = info ? (int)info->act : QACT_F32;
        u.qgemm = k->qgemm;
    }
    w->mul = u;
    return made;
}

size_t simd_act_row_bytes(int f, int K)
{
    return f == SIMD_ACT_BF16 ? 2 * (size_t)K * sizeof(uint16_t) : qact_row_bytes((qact)f, K);
}

void simd_act_make(const simd_kernels *k, void *out, const float *x, size_t lda, int M, int K,
                   int f)
{
    if (f == SIMD_ACT_BF16)
        k->bf16_rows(out, x, lda, M, K);
    else
        k->quantize_act(out, x, lda, M, K, (qact)f);
}

const char *simd_qmat_describe(const simd_qmat *w, char *buf, size_t n)
{
    const simd_qmul *u = &w->mul;
    const char *type = qtype_name(w->type);
    type = type ? type : "?";
    if (u->how == SIMD_MUL_F32) {
        snprintf(buf, n, "%s %s gemm_nt (OpenBLAS for large steps)", type, u->isa);
    } else if (u->how == SIMD_MUL_BLOCKS) {
        snprintf(buf, n, "%s file blocks, %s qgemm", type, u->isa);
    } else if (!u->tiles) {
        snprintf(buf, n, "%s 16-row pack, %s", type, u->isa);
    } else if (u->tile_min_m == 0) {
        snprintf(buf, n, "%s 16-row bf16 pack, AMX bf16 tiles", type);
    } else {
        snprintf(buf, n, "%s 16-row pack, %s, AMX tiles from %d rows", type, u->isa,
                 u->tile_min_m);
    }
    return buf;
}
