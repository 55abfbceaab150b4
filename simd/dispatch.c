/* dispatch.c: picks the kernel table for this CPU (CPUID on x86, HWCAP on aarch64). */
#include <stdlib.h>
#include <string.h>

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

const simd_kernels *simd_init(void)
{
#if defined(TESSERA_FORCE_REF)
    return &simd_ref_table;
#else
    const char *force = getenv("TESSERA_FORCE_REF");
    if (force && strcmp(force, "1") == 0)
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
