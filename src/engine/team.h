/* team.h: how many threads the engine's steps run on. A step's threads meet at a barrier
 * after every stage (~200 a step), so one thread whose core another process takes holds
 * up all the others at each of them: on a 16-core Xeon one CPU hog beside 16 threads made
 * stories110m's 16-stream decoding 3x slower when they spun 10000 times at each wait than
 * with 1000, and 25x with 100000 (docs/BENCHMARKS.md, "A shared host"). The engine
 * therefore watches each thread's run delay (common/run_delay.h: time it was ready but had
 * no CPU) and runs its steps on fewer threads while some are starved, trying one more from
 * time to time. Plain data, no engine: the step thread owns one, tests feed it waits of
 * their own. */
#ifndef TESSERA_ENGINE_TEAM_H
#define TESSERA_ENGINE_TEAM_H

#include <stdbool.h>
#include <stdint.h>

enum { TEAM_MAX_THREADS = 256 }; /* threads a team tracks; a larger team is not adapted */

/* The window over which each thread's delay is summed before a decision, seconds. */
#define TEAM_WINDOW_S 0.25
/* A thread that waited for a CPU this share of the window or more is starved. */
#define TEAM_STARVED 0.25
/* After a cut, the first try of one thread more; each failed try doubles the wait, up to
 * TEAM_PROBE_MAX_S. After a try that held, the next one follows TEAM_PROBE_MIN_S later. */
#define TEAM_PROBE_MIN_S 1.0
#define TEAM_PROBE_FIRST_S 2.0
#define TEAM_PROBE_MAX_S 64.0

typedef struct team_size {
    int max;        /* threads configured: never more */
    int n;          /* threads the next step runs on */
    int tracked;    /* threads of the steps in this window (0: none yet) */
    double last_t;  /* when the last step ended */
    double waited[TEAM_MAX_THREADS]; /* this window's run delay per thread */
    double window;                   /* this window's length */
    double probe_at; /* when to try one thread more (while n < max) */
    double backoff;  /* the wait after the next failed try */
    bool probing;    /* n was raised by a try that has not held a window yet */
    uint64_t cuts;   /* times n was lowered */
} team_size;

/* A team of max threads (1 to any: beyond TEAM_MAX_THREADS it is never changed). */
void team_init(team_size *t, int max, double now);

/* Feeds a step that ran from start to end: waited[i] is how long thread i waited for a CPU
 * since its previous step (run_delay_since_s(), read as it finished this one), for the n
 * threads that ran it; n = 0, or a negative wait, when the step had no team or the kernel
 * gives no delays. A step on another number of threads, or one that starts more than a
 * window after the last one ended (the threads slept in between), starts a new window
 * without its waits. Returns the threads the next step should run on. */
int team_observe(team_size *t, const double *waited, int n, double start, double end);

#endif
