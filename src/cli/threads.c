/* threads.c: OpenMP defaults for a shared host (threads.h): a short spin before idle
 * threads sleep, and one thread per physical core. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/threads.h"

enum { MAX_CORES = CPU_SETSIZE };

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

int cli_physical_cores(const char *sysfs_cpu, const cpu_set_t *set)
{
    static const long none = -1;
    long (*seen)[2] = malloc(sizeof(long[2]) * MAX_CORES);
    if (!seen)
        return CPU_COUNT(set);
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/cpu%d/topology/physical_package_id", sysfs_cpu, cpu);
        long pkg = read_long(path);
        snprintf(path, sizeof path, "%s/cpu%d/topology/core_id", sysfs_cpu, cpu);
        long core = read_long(path);
        if (pkg == none || core == none) { /* unknown topology: a core of its own */
            pkg = -2 - cpu;
            core = none;
        }
        bool dup = false;
        for (int i = 0; i < n && !dup; i++)
            dup = seen[i][0] == pkg && seen[i][1] == core;
        if (!dup) {
            seen[n][0] = pkg;
            seen[n][1] = core;
            n++;
        }
    }
    free(seen);
    return n;
}

static bool unset(const char *name)
{
    return getenv(name) == NULL;
}

void cli_threads_init(char **argv)
{
    /* Set by the exec below: never a second time, whatever the environment says now. */
    if (!unset("TESSERA_OMP_DEFAULTS"))
        return;
    char chosen[256] = "";
    size_t len = 0;
    if (unset("OMP_WAIT_POLICY") && unset("GOMP_SPINCOUNT")) {
        setenv("GOMP_SPINCOUNT", CLI_GOMP_SPINCOUNT, 1);
        len += (size_t)snprintf(chosen + len, sizeof chosen - len,
                                "GOMP_SPINCOUNT=" CLI_GOMP_SPINCOUNT " ");
    }
    cpu_set_t set;
    if (unset("OMP_NUM_THREADS") && sched_getaffinity(0, sizeof set, &set) == 0) {
        int cores = cli_physical_cores("/sys/devices/system/cpu", &set);
        if (cores > 0 && cores < CPU_COUNT(&set)) {
            char v[16];
            snprintf(v, sizeof v, "%d", cores);
            setenv("OMP_NUM_THREADS", v, 1);
            len += (size_t)snprintf(chosen + len, sizeof chosen - len, "OMP_NUM_THREADS=%d ",
                                    cores);
        }
    }
    if (!len)
        return;
    chosen[len - 1] = '\0';
    setenv("TESSERA_OMP_DEFAULTS", chosen, 1);
    execv("/proc/self/exe", argv);
    /* No exec (no /proc, say): run on with the runtime's defaults, as before. */
}

void cli_threads_describe(char *out, size_t cap, int n_threads)
{
    const char *mine = getenv("TESSERA_OMP_DEFAULTS");
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    char wait[96];
    if (policy)
        snprintf(wait, sizeof wait, "OMP_WAIT_POLICY=%.40s", policy);
    else if (spin)
        snprintf(wait, sizeof wait, "GOMP_SPINCOUNT=%.40s", spin);
    else
        snprintf(wait, sizeof wait, "the OpenMP runtime's default");
    snprintf(out, cap, "%d thread%s per step; idle OpenMP threads wait by %s%s", n_threads,
             n_threads == 1 ? "" : "s", wait,
             mine && *mine ? " (tessera's defaults: " : "");
    if (mine && *mine) {
        size_t n = strlen(out);
        snprintf(out + n, cap > n ? cap - n : 0, "%s; set them to choose)", mine);
    }
}
