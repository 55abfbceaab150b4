/* cost.c: the step cost model of cost.h, step times kept per range of rows and joined by
 * straight lines, and the prefill budget it allows. */
#include <math.h>
#include <string.h>

#include "engine/cost.h"

/* Weight of a step against the next one: each range's means follow with a time constant
 * of ~20 steps, so the model follows contexts that grow and machines whose load changes. */
#define COST_DECAY 0.95
/* A range whose decayed count fell under this is not used: one step, ~80 steps ago. */
#define COST_FRESH 0.02
/* The same decay for step_cost.mixed, over mixed steps only: they come in bursts (a
 * 64-stream start has ~20), so it follows within a few of them. Each step's ratio is
 * clamped to [1/MIXED_CLAMP, MIXED_CLAMP]: one step held up by the machine moves it little. */
#define MIXED_DECAY 0.7
#define MIXED_CLAMP 3.0

void cost_init(step_cost *c)
{
    memset(c, 0, sizeof *c);
    c->mixed = 1.0;
}

static int range_of(int rows)
{
    int r = (int)(2.0 * log2((double)rows));
    return r < COST_RANGES - 1 ? r : COST_RANGES - 1;
}

void cost_observe(step_cost *c, int n_decode, int n_prefill, double seconds)
{
    if (!(seconds >= 0) || !(seconds < 1e6) || n_decode < 0 || n_prefill < 0 ||
        n_decode + n_prefill <= 0)
        return;
    if (n_decode > 0 && n_prefill > 0 && c->seen >= COST_MIN_STEPS) {
        double est = cost_estimate(c, n_decode, n_prefill); /* as the plan saw it */
        if (est > 0) {
            double ratio = fmin(fmax(seconds / est, 1.0 / MIXED_CLAMP), MIXED_CLAMP);
            c->mixed = MIXED_DECAY * c->mixed + (1.0 - MIXED_DECAY) * ratio;
        }
    }
    for (int i = 0; i < COST_RANGES; i++) {
        c->w[i] *= COST_DECAY;
        c->rows[i] *= COST_DECAY;
        c->secs[i] *= COST_DECAY;
    }
    int rows = n_decode + n_prefill, i = range_of(rows);
    c->w[i] += 1.0;
    c->rows[i] += rows;
    c->secs[i] += seconds;
    c->seen++;
}

/* The fresh ranges' means, rows ascending; seconds never less than a smaller step's (a
 * step with more rows does all a smaller one does and more, whatever noise said).
 * Returns how many. */
static int means(const step_cost *c, double rows[COST_RANGES], double secs[COST_RANGES])
{
    int n = 0;
    double floor = 0.0;
    for (int i = 0; i < COST_RANGES; i++) {
        if (c->w[i] < COST_FRESH)
            continue;
        rows[n] = c->rows[i] / c->w[i];
        secs[n] = fmax(c->secs[i] / c->w[i], floor);
        floor = secs[n++];
    }
    return n;
}

/* Seconds at `at` rows: between two means, the line joining them; outside them, in
 * proportion to the nearest (the most a step can cost where each row costs no more than
 * in the smaller steps, the least where it costs no less than in the larger). */
static double estimate_rows(const double *rows, const double *secs, int n, double at)
{
    if (n == 0)
        return 0.0;
    if (at <= rows[0])
        return secs[0] * at / rows[0];
    for (int i = 1; i < n; i++)
        if (at <= rows[i])
            return secs[i - 1] +
                   (secs[i] - secs[i - 1]) * (at - rows[i - 1]) / (rows[i] - rows[i - 1]);
    return secs[n - 1] * at / rows[n - 1];
}

double cost_estimate(const step_cost *c, int n_decode, int n_prefill)
{
    double rows[COST_RANGES], secs[COST_RANGES];
    int n = means(c, rows, secs);
    return estimate_rows(rows, secs, n, (double)n_decode + n_prefill);
}

int cost_prefill_budget(const step_cost *c, int n_decode, int n_full, double itl_target,
                        int min_rows, int max_rows)
{
    if (c->seen < COST_MIN_STEPS)
        return -1;
    if (min_rows > max_rows)
        min_rows = max_rows;
    double rows[COST_RANGES], secs[COST_RANGES];
    int n = means(c, rows, secs);
    /* mixed * est(n_decode + p) <= itl_target * est(n_full): the largest such p, by
     * bisection (the estimate grows with rows) */
    double limit = itl_target * estimate_rows(rows, secs, n, n_full) / c->mixed;
    if (estimate_rows(rows, secs, n, (double)n_decode + max_rows) <= limit)
        return max_rows;
    int lo = 0, hi = max_rows; /* est(lo) within the limit, or lo = 0; est(hi) past it */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (estimate_rows(rows, secs, n, (double)n_decode + mid) <= limit)
            lo = mid;
        else
            hi = mid;
    }
    return lo > min_rows ? lo : min_rows;
}
