/* build_info.c: the build's identity and this CPU's kernels (build_info.h). The TS_BUILD_*
 * macros come from CMakeLists.txt and the generated build_commit.h, on this file only, so
 * a new commit recompiles only it. */
#include <pthread.h>
#include <stdio.h>

#include "build_commit.h" /* generated at build time: TS_BUILD_COMMIT */
#include "common/build_info.h"
#include "qpack.h"
#include "simd.h"

#ifndef TS_BUILD_VERSION
#define TS_BUILD_VERSION "unknown"
#endif
#ifndef TS_BUILD_TYPE
#define TS_BUILD_TYPE "unknown"
#endif
#ifndef TS_BUILD_COMPILER
#define TS_BUILD_COMPILER "unknown"
#endif

static char cpu_sets[96];
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* The kernel sets built in that this CPU runs, in the enum's order, then AMX. */
static void probe_cpu(void)
{
    static const simd_isa order[] = {SIMD_ISA_REF, SIMD_ISA_AVX2, SIMD_ISA_AVX512,
                                     SIMD_ISA_AVX512VNNI, SIMD_ISA_NEON};
    size_t n = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (simd_kernels_for(order[i]))
            n += (size_t)snprintf(cpu_sets + n, sizeof cpu_sets - n, "%s%s", n ? " " : "",
                                  simd_isa_name(order[i]));
    if (simd_amx_usable())
        snprintf(cpu_sets + n, sizeof cpu_sets - n, " amx");
}

void ts_build_info_get(ts_build_info *out)
{
    out->version = TS_BUILD_VERSION;
    out->commit = TS_BUILD_COMMIT;
    out->build_type = TS_BUILD_TYPE;
    out->compiler = TS_BUILD_COMPILER;
    out->vector = simd_init()->name;
    out->packed = simd_qpack_kernels();
    pthread_once(&cpu_once, probe_cpu);
    out->cpu = cpu_sets;
}

void ts_build_info_line(char *out, unsigned cap)
{
    ts_build_info b;
    ts_build_info_get(&b);
    if (cap > 0)
        snprintf(out, cap, "tessera %s (commit %s, %s, %s) kernels: %s, packed %s", b.version,
                 b.commit, b.build_type, b.compiler, b.vector, b.packed);
}
