/* run_delay.c: the calling thread's run delay from /proc/thread-self/schedstat (run_delay.h),
 * whose second field is nanoseconds spent waiting on a run queue. */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "common/run_delay.h"

/* Each thread's open schedstat file, stored as fd + 1 (0: not opened yet; -1: none). */
static pthread_key_t fd_key;
static pthread_once_t fd_once = PTHREAD_ONCE_INIT;
static bool fd_key_made;

static void close_fd(void *v)
{
    if ((intptr_t)v > 0)
        close((int)((intptr_t)v - 1));
}

static void make_key(void)
{
    fd_key_made = pthread_key_create(&fd_key, close_fd) == 0;
}

double run_delay_s(void)
{
    pthread_once(&fd_once, make_key);
    if (!fd_key_made)
        return -1.0;
    intptr_t v = (intptr_t)pthread_getspecific(fd_key);
    if (v == 0) {
        int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        v = fd >= 0 ? fd + 1 : -1;
        if (pthread_setspecific(fd_key, (void *)v) != 0) {
            close_fd((void *)v);
            return -1.0;
        }
    }
    if (v < 0)
        return -1.0;
    char buf[128];
    ssize_t n = pread((int)(v - 1), buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1.0;
    buf[n] = '\0';
    unsigned long long on_cpu, waited;
    if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
        return -1.0;
    return (double)waited * 1e-9;
}

double run_delay_since_s(void)
{
    static _Thread_local double mark; /* this thread's run delay at its last call */
    double now = run_delay_s();
    if (now < 0.0)
        return -1.0;
    double waited = now - mark;
    mark = now;
    return waited > 0.0 ? waited : 0.0;
}
