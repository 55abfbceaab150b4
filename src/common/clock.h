/* clock.h: the one clock for durations, timestamps and deadlines: seconds on
 * CLOCK_MONOTONIC (never jumps with the wall clock). */
#ifndef TESSERA_COMMON_CLOCK_H
#define TESSERA_COMMON_CLOCK_H

#include <time.h>

static inline double clock_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* TESSERA_COMMON_CLOCK_H */
