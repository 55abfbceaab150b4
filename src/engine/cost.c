/* cost.c: the step cost model of cost.h, a decayed least-squares fit of step time against
 * decode and prompt rows, and the prefill budget it allows. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine/cost.h"

/* Weight of a step against the next one: the fit forgets with a time constant of ~20 steps. */
#define COST_DECAY 0.95
/* The same for step_cost.mixed, over mixed steps only: they come in bursts (a 64-stream
 * start has ~20), so it follows within a few of them. Each step's ratio is clamped to
 * [1/MIXED_CLAMP, MIXED_CLAMP]: one step held up by the machine moves it little. */
#define MIXED_DECAY 0.7
#define MIXED_CLAMP 3.0
/* Strength of the pull towards the proportional model, per step seen and per row^2 of the
 * direction (ROW_SCALE rows): weak beside any direction the steps did vary in. */
#define COST_PRIOR 0.001
#define ROW_SCALE 64.0

void cost_init(step_cost *c)
{
    memset(c, 0, sizeof *c);
    c->mixed = 1.0;
}

/* Solves m x = y (3x3) by Gaussian elimination with partial pivoting; false when singular. */
static bool solve3(double x[3], double m[3][3], double y[3])
{
    for (int col = 0; col < 3; col++) {
        int piv = col;
        for (int i = col + 1; i < 3; i++)
            if (fabs(m[i][col]) > fabs(m[piv][col]))
                piv = i;
        if (fabs(m[piv][col]) < 1e-300)
            return false;
        for (int k = 0; k < 3; k++) {
            double t = m[col][k];
            m[col][k] = m[piv][k];
            m[piv][k] = t;
        }
        double t = y[col];
        y[col] = y[piv];
        y[piv] = t;
        for (int i = col + 1; i < 3; i++) {
            double f = m[i][col] / m[col][col];
            for (int k = col; k < 3; k++)
                m[i][k] -= f * m[col][k];
            y[i] -= f * y[col];
        }
    }
    for (int i = 2; i >= 0; i--) {
        double v = y[i];
        for (int k = i + 1; k < 3; k++)
            v -= m[i][k] * x[k];
        x[i] = v / m[i][i];
    }
    return true;
}

/* Refits coef: ridge regression towards prior = (0, per_row, per_row). */
static void refit(step_cost *c)
{
    double per_row = c->rows > 0 ? c->t / c->rows : 0.0;
    double prior[3] = {0.0, per_row, per_row};
    double scale[3] = {1.0, ROW_SCALE * ROW_SCALE, ROW_SCALE * ROW_SCALE};
    double m[3][3], y[3], x[3];
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 3; k++)
            m[i][k] = c->s[i][k];
        double lambda = COST_PRIOR * c->n * scale[i];
        m[i][i] += lambda;
        y[i] = c->r[i] + lambda * prior[i];
    }
    if (!solve3(x, m, y)) {
        memcpy(c->coef, prior, sizeof prior);
        return;
    }
    /* Noise can make a coefficient negative; no part of a step takes negative time, and a
     * prompt row always costs something (else the budget would be unbounded). */
    c->coef[0] = x[0] > 0 ? x[0] : 0.0;
    c->coef[1] = x[1] > 0 ? x[1] : 0.0;
    c->coef[2] = x[2] > 0.05 * per_row ? x[2] : 0.05 * per_row;
}

void cost_observe(step_cost *c, int n_decode, int n_prefill, double seconds)
{
    if (!(seconds >= 0) || n_decode + n_prefill <= 0)
        return;
    if (n_decode > 0 && n_prefill > 0 && c->seen >= COST_MIN_STEPS) {
        double est = cost_estimate(c, n_decode, n_prefill); /* as the plan saw it */
        if (est > 0) {
            double ratio = fmin(fmax(seconds / est, 1.0 / MIXED_CLAMP), MIXED_CLAMP);
            c->mixed = MIXED_DECAY * c->mixed + (1.0 - MIXED_DECAY) * ratio;
        }
    }
    double x[3] = {1.0, n_decode, n_prefill};
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 3; k++)
            c->s[i][k] = COST_DECAY * c->s[i][k] + x[i] * x[k];
        c->r[i] = COST_DECAY * c->r[i] + x[i] * seconds;
    }
    c->n = COST_DECAY * c->n + 1.0;
    c->rows = COST_DECAY * c->rows + n_decode + n_prefill;
    c->t = COST_DECAY * c->t + seconds;
    c->seen++;
    refit(c);
}

void cost_plain_fit(const step_cost *c, double coef[3])
{
    /* the normal equations as the steps gave them; a ridge a millionth of the step count
     * only keeps a direction the steps never moved in (no prompt rows) solvable */
    double m[3][3], y[3], x[3];
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 3; k++)
            m[i][k] = c->s[i][k];
        m[i][i] += 1e-6 * c->n;
        y[i] = c->r[i];
    }
    bool ok = solve3(x, m, y);
    for (int i = 0; i < 3; i++)
        coef[i] = !ok ? c->coef[i] : x[i] > 0 ? x[i] : 0.0;
}

double cost_estimate(const step_cost *c, int n_decode, int n_prefill)
{
    return c->coef[0] + c->coef[1] * n_decode + c->coef[2] * n_prefill;
}

int cost_prefill_budget(const step_cost *c, int n_decode, int n_full, double itl_target,
                        int min_rows, int max_rows)
{
    if (c->seen < COST_MIN_STEPS)
        return -1;
    if (min_rows > max_rows)
        min_rows = max_rows;
    /* mixed * (est(n_decode, 0) + b_prefill * rows) <= itl_target * est(n_full, 0) */
    double spare = itl_target * cost_estimate(c, n_full, 0) / c->mixed -
                   cost_estimate(c, n_decode, 0);
    double rows = c->coef[2] > 0 ? spare / c->coef[2] : (double)max_rows;
    if (!(rows < max_rows)) /* also NaN */
        return max_rows;
    return rows > min_rows ? (int)rows : min_rows;
}
