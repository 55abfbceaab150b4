/* clock.h: the one clock for durations, timestamps and deadlines: seconds on
 * CLOCK_MONOTONIC (never jumps with the wall clock). */
#ifndef TESSERA_COMMON_CLOCK_H
#define TESSERA_COMMON_CLOCK_H

#include <pthread.h>
#include <time.h>

static inline double clock_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The CLOCK_MONOTONIC time timeout_ms (>= 0) from now, for pthread_cond_timedwait on a
 * condition variable made by clock_cond_init. */
static inline struct timespec clock_deadline(int timeout_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* A condition variable whose timed waits run on CLOCK_MONOTONIC. */
static inline void clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

#endif /* TESSERA_COMMON_CLOCK_H */
