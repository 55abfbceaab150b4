/* build_info.h: what this binary is (version, git commit, build type, compiler) and which
 * kernels this CPU runs, for `tessera version`, /health and the tessera_build_info metric. */
#ifndef TESSERA_COMMON_BUILD_INFO_H
#define TESSERA_COMMON_BUILD_INFO_H

typedef struct ts_build_info {
    const char *version;    /* "0.1.0", the project's version */
    const char *commit;     /* the short git commit built, "unknown" outside a checkout */
    const char *build_type; /* CMAKE_BUILD_TYPE: "Release", "Debug", ... */
    const char *compiler;   /* "GNU 12.2.0" */
    const char *vector;     /* the vector kernel table this CPU runs: "avx512vnni", "ref" */
    const char *packed;     /* the packed quantized kernels: "AVX-512 VNNI + AMX tiles" */
    const char *cpu;        /* every kernel set built in that this CPU can run, best last:
                             * "ref avx2 avx512 avx512vnni amx" */
} ts_build_info;

/* Fills *out with static strings (valid for the process's life). Probes the CPU on the
 * first call (TESSERA_FORCE_REF and TESSERA_NO_AMX count); thread-safe. */
void ts_build_info_get(ts_build_info *out);

/* One line: "tessera 0.1.0 (commit abc1234, Release, GNU 12.2.0) kernels: avx512vnni,
 * packed AVX-512 VNNI", written into out (cap bytes, always NUL-terminated when cap > 0). */
void ts_build_info_line(char *out, unsigned cap);

#endif
