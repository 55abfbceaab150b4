/* team.c: the engine's step threads, fewer while another process holds some of their
 * cores (team.h). */
#include <stdbool.h>
#include <string.h>

#include "engine/team.h"

void team_init(team_size *t, int max, double now)
{
    memset(t, 0, sizeof *t);
    t->max = t->n = max < 1 ? 1 : max;
    t->last_t = now;
    t->backoff = TEAM_PROBE_FIRST_S;
}

/* Starts the window afresh after a step of n threads that ended at end, leaving out its
 * waits (none counts where they are not usable). */
static void restart(team_size *t, const double *waited, int n, double end)
{
    bool known = n > 0 && n <= TEAM_MAX_THREADS;
    for (int i = 0; known && i < n; i++)
        known = waited[i] >= 0.0;
    t->tracked = known ? n : 0;
    memset(t->waited, 0, sizeof t->waited);
    t->window = 0.0;
    t->last_t = end;
}

/* The window is full: lowers n by its starved threads, or tries one more. */
static void decide(team_size *t, int n, double now)
{
    int starved = 0;
    for (int i = 0; i < n; i++)
        starved += t->waited[i] >= TEAM_STARVED * t->window;
    if (starved > 0 && t->n > 1) {
        t->n = t->n - starved > 1 ? t->n - starved : 1;
        t->cuts++;
        /* a try that failed waits twice as long as the last; a first cut the least */
        t->backoff = !t->probing ? TEAM_PROBE_FIRST_S
                     : 2 * t->backoff < TEAM_PROBE_MAX_S ? 2 * t->backoff
                                                         : TEAM_PROBE_MAX_S;
        t->probe_at = now + t->backoff;
        t->probing = false;
    } else if (starved == 0 && t->probing) {
        t->probing = false; /* the try held a whole window: the next one soon */
        t->backoff = TEAM_PROBE_FIRST_S;
        t->probe_at = now + TEAM_PROBE_MIN_S;
    } else if (starved == 0 && t->n < t->max && now >= t->probe_at) {
        t->n++;
        t->probing = true;
    }
}

int team_observe(team_size *t, const double *waited, int n, double start, double end)
{
    if (t->max > TEAM_MAX_THREADS)
        return t->n;
    bool usable = n > 0 && n == t->tracked && start - t->last_t <= TEAM_WINDOW_S;
    for (int i = 0; usable && i < n; i++)
        usable = waited[i] >= 0.0;
    if (!usable) { /* a new team, a first step, a step after a pause: the next window */
        restart(t, waited, n, end);
        return t->n;
    }
    for (int i = 0; i < n; i++)
        t->waited[i] += waited[i];
    t->window += end - t->last_t;
    t->last_t = end;
    if (t->window >= TEAM_WINDOW_S) {
        decide(t, n, end);
        memset(t->waited, 0, sizeof t->waited);
        t->window = 0.0;
    }
    return t->n;
}
