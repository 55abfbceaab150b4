/* threads.h: OpenMP defaults for a shared host, chosen in-process before the OpenMP
 * runtime reads them. */
#ifndef TESSERA_CLI_THREADS_H
#define TESSERA_CLI_THREADS_H

#include <sched.h>
#include <stddef.h>

/* libgomp's spin count before an idle thread sleeps, where the user sets none: long
 * enough that the threads of a step wait at its ~200 barriers without sleeping, and
 * short of libgomp's own default (300000, milliseconds: idle threads spin that long after
 * every step). On a 16-core Xeon (16 threads) 10000 decoded stories110m
 * 12-25% and TinyLlama ~10% faster than 1000; beside a CPU hog every spinning count
 * collapses (10000 3x, 100000 25x: a thread that lost its core holds every barrier), which
 * the engine answers by running its steps on the threads that have a core
 * (engine/team.h). docs/BENCHMARKS.md, "A shared host". */
#define CLI_GOMP_SPINCOUNT "10000"

/* Physical cores among the CPUs of set, counted by distinct (package, core) pairs of
 * sysfs_cpu (normally /sys/devices/system/cpu, cpuN/topology/{physical_package_id,
 * core_id}); a CPU without topology counts as its own core. 0 when set is empty. */
int cli_physical_cores(const char *sysfs_cpu, const cpu_set_t *set);

/* Called first in main(): where the user set none of them, sets GOMP_SPINCOUNT to
 * CLI_GOMP_SPINCOUNT and OMP_NUM_THREADS to the physical cores this process may run on
 * (when fewer than its hardware threads), then re-executes the binary so that the OpenMP
 * runtime, which reads them when it is loaded (before main), sees them. Records what it
 * chose in $TESSERA_OMP_DEFAULTS. Returns (without exec) when nothing needs setting or
 * the exec fails; the process then runs with the runtime's own defaults. */
void cli_threads_init(char **argv);

/* One line for logs: "N threads; OpenMP wait: ..." naming whether tessera or the user
 * chose each setting. Writes out (cap bytes). */
void cli_threads_describe(char *out, size_t cap, int n_threads);

#endif
