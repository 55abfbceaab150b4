/* bench_cores.c: how the machine's arithmetic throughput grows with threads, the ceiling of
 * any compute-bound step's thread scaling (issue 16 asks batched decode at 16 threads for
 * 10x one thread). Each thread runs independent instructions from registers, no memory:
 * 512-bit f32 FMAs (16 chains), 512-bit VPDPBUSD (16 chains) and, where AMX is granted,
 * TDPBUSD on four C tiles. Printed per thread count: the whole team's rate and its ratio
 * to one thread's. Then pairs: one thread on CPU 0 and one on CPU j, for every j, the
 * pair's rate over twice one thread's; near 0.5, the two ran as one (SMT siblings that the
 * guest's topology does not show, or a host that shares or throttles the unit behind it:
 * on a 16-core Xeon guest AMX pairs went from 0.93 to 0.47 midway through one run, so read
 * a run's pairs in order, as a time series as much as a map).
 * Usage: build/bench_cores [--quick] (threads: 1, 2, 4, ... up to the online CPUs) */
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "qpack.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CORES_X86 1
#include <immintrin.h>
#endif

static long g_iters = 40000000; /* loop trips a thread runs (--quick: a quarter) */
static volatile int64_t g_sink; /* the loops' results go here, so none is left out */

#ifdef CORES_X86
/* 16 independent FMA chains: 16 x 16 x 2 flops a trip. */
__attribute__((target("avx512f"))) static double run_fma(void)
{
    __m512 a[16], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < 16; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < g_iters; it++)
        for (int i = 0; i < 16; i++)
            a[i] = _mm512_fmadd_ps(a[i], x, y);
    __m512 s = a[0];
    for (int i = 1; i < 16; i++)
        s = _mm512_add_ps(s, a[i]);
    g_sink = (int64_t)_mm512_reduce_add_ps(s);
    return 16.0 * 16 * 2 * (double)g_iters;
}

/* 16 independent VPDPBUSD chains: 16 x 64 x 2 int8 ops a trip. */
__attribute__((target("avx512f,avx512vnni"))) static double run_vnni(void)
{
    __m512i a[16], x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
    for (int i = 0; i < 16; i++)
        a[i] = _mm512_set1_epi32(i);
    for (long it = 0; it < g_iters; it++)
        for (int i = 0; i < 16; i++)
            a[i] = _mm512_dpbusd_epi32(a[i], x, y);
    __m512i s = a[0];
    for (int i = 1; i < 16; i++)
        s = _mm512_add_epi32(s, a[i]);
    g_sink = _mm512_reduce_add_epi32(s);
    return 16.0 * 64 * 2 * (double)g_iters;
}
#endif

#if defined(CORES_X86) && defined(TS_BENCH_AMX)
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-int8")
/* Four TDPBUSD a trip on C tiles 0-3 from A tiles 4-5 and B tiles 6-7 (16 x 64 bytes):
 * 4 x 16 x 16 x 64 x 2 int8 ops. */
static double run_amx(void)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _Alignas(64) uint8_t buf[16 * 64];
    memset(buf, 1, sizeof buf);
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, buf, 64);
    _tile_loadd(5, buf, 64);
    _tile_loadd(6, buf, 64);
    _tile_loadd(7, buf, 64);
    long trips = g_iters / 8;
    for (long it = 0; it < trips; it++) {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, buf, 64);
    _tile_release();
    g_sink = buf[0];
    return 4.0 * 16 * 16 * 64 * 2 * (double)trips;
}
#pragma GCC pop_options
#endif

typedef double (*run_fn)(void);

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* The team's rate (ops/s) with n threads, thread i on CPU i (so the scheduler's placement
 * does not enter), each running fn once; the time is the slowest thread's. */
static double team_rate(run_fn fn, int n)
{
    double ops = 0, t0 = omp_get_wtime(), t1 = t0;
#pragma omp parallel num_threads(n) reduction(+ : ops) reduction(max : t1)
    {
        pin(omp_get_thread_num());
        ops = fn();
        t1 = omp_get_wtime();
    }
    return ops / (t1 - t0);
}

/* The rate of one thread on CPU 0 and one on CPU j together. */
static double pair_rate(run_fn fn, int j)
{
    double ops = 0, t0 = omp_get_wtime(), t1 = t0;
    int ok = 1;
#pragma omp parallel num_threads(2) reduction(+ : ops) reduction(max : t1) reduction(min : ok)
    {
        ok = pin(omp_get_thread_num() == 0 ? 0 : j) == 0;
        ops = fn();
        t1 = omp_get_wtime();
    }
    return ok ? ops / (t1 - t0) : -1.0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--quick") == 0)
        g_iters /= 4;
#ifndef CORES_X86
    (void)pair_rate;
    (void)team_rate;
    printf("bench_cores: x86 only; skipped\n");
    return 0;
#else
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct {
        const char *name, *unit;
        run_fn fn;
        int ok;
    } kinds[3] = {
        {"f32 FMA (512-bit)", "GFLOP/s", run_fma, __builtin_cpu_supports("avx512f")},
        {"int8 VPDPBUSD (512-bit)", "GOP/s", run_vnni, __builtin_cpu_supports("avx512vnni")},
#ifdef TS_BENCH_AMX
        {"int8 TDPBUSD (AMX)", "GOP/s", run_amx, simd_amx_usable()},
#else
        {"int8 TDPBUSD (AMX)", "GOP/s", NULL, 0},
#endif
    };
    printf("bench_cores: %d online CPUs, %ld trips a thread\n", cpus, g_iters);
    for (int k = 0; k < 3; k++) {
        if (!kinds[k].ok) {
            printf("\n%s: not on this machine (or not granted); skipped\n", kinds[k].name);
            continue;
        }
        printf("\n%s\nthreads %12s  x one thread\n", kinds[k].name, kinds[k].unit);
        team_rate(kinds[k].fn, cpus); /* warm: the team exists, clocks up, AMX granted */
        double one = team_rate(kinds[k].fn, 1);
        for (int n = 1; n <= cpus; n = n < cpus && 2 * n > cpus ? cpus : 2 * n) {
            double r = n == 1 ? one : team_rate(kinds[k].fn, n);
            printf("%7d %12.1f  %5.2fx\n", n, r * 1e-9, r / one);
        }
    }
    for (int k = 0; k < 3 && cpus > 1; k++) {
        if (!kinds[k].ok)
            continue;
        double one = team_rate(kinds[k].fn, 1);
        printf("\npairs, %s: CPU 0 with CPU j, the pair's rate / twice one thread's\n",
               kinds[k].name);
        for (int j = 1; j < cpus; j++) {
            double r = pair_rate(kinds[k].fn, j);
            if (r < 0)
                printf("  CPU %2d: cannot pin\n", j);
            else
                printf("  CPU %2d: %.2f%s\n", j, r / (2 * one),
                       r / (2 * one) < 0.75 ? "  (two ran as one)" : "");
        }
    }
    return 0;
#endif
}
