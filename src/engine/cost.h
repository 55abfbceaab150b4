/* cost.h: what an engine step costs, learnt from the steps it ran (cost.c), and the prefill
 * budget that cost allows. Plain data, no engine: the scheduler owns one, tests feed it
 * timings of their own. */
#ifndef TESSERA_ENGINE_COST_H
#define TESSERA_ENGINE_COST_H

/* Ranges of a step's rows the model keeps apart: rows R go to range floor(2 log2 R), so
 * each spans a factor of sqrt 2, the last holding every step of 2^16.5 rows or more
 * (--step-tokens and --max-seqs allow up to 69632). */
enum { COST_RANGES = 34 };

/* A step's time is modelled as a function of its rows R (decode and prompt rows alike:
 * the weight GEMMs, ~90% of a step, do not tell them apart), learnt per range of rows:
 * each range keeps the mean rows and mean seconds of the steps that fell in it, every
 * step's weight decaying by COST_DECAY per newer step, and a step of R rows is estimated
 * by the straight line between the neighbouring ranges' means. A range no step has
 * visited for ~80 steps drops out. The cost is not linear in rows: small steps stream
 * the weights from memory whatever their rows, large ones are bound by the arithmetic,
 * and the tile kernels amortise more of their operand work over longer steps. On the
 * benchmark host (session 16) TinyLlama Q4_K_M took ~6 ms a step at 1 row, 16 at 16, 33
 * at 52, 71 at 129 and 231 at 512: the one straight line the model fitted before
 * (seconds = a + b_decode D + b_prefill P over every step) sized the mixed steps of a
 * 64-stream start at 2.1-2.4x a decode step where the budget aimed at 1.5x, and given
 * those times in test_sched_cost it does the same (2.1x; this model 1.6x at most). */
typedef struct step_cost {
    double w[COST_RANGES];    /* decayed count of steps in the range */
    double rows[COST_RANGES]; /* decayed sum of their rows */
    double secs[COST_RANGES]; /* decayed sum of their seconds */
    int seen;                 /* steps observed */
    double mixed;             /* what mixed steps (decode and prompt rows) took over what
                               * the model said before each ran, a decaying mean (1 until
                               * one is seen): a prompt row and a decode row do differ (a
                               * prompt row has no logits; its attention reads up to its
                               * own position), and where that shows in mixed steps it
                               * scales their estimate */
} step_cost;

/* Steps seen before cost_prefill_budget trusts the model. */
enum { COST_MIN_STEPS = 4 };

void cost_init(step_cost *c);

/* Adds a step of n_decode decode rows and n_prefill prompt rows that took seconds. */
void cost_observe(step_cost *c, int n_decode, int n_prefill, double seconds);

/* Estimated seconds of a step of n_decode decode and n_prefill prompt rows: 0 before any
 * step was seen. */
double cost_estimate(const step_cost *c, int n_decode, int n_prefill);

/* Prompt rows a step with n_decode decode rows may take so that it lasts at most
 * itl_target times a step decoding n_full rows alone (n_full: the batch being filled, the
 * inter-token latency that decoding settles at), at least min_rows (prompts always
 * progress) and at most max_rows; the mixed step's estimate is scaled by what mixed steps
 * took against the model (step_cost.mixed). -1 before COST_MIN_STEPS steps were seen. */
int cost_prefill_budget(const step_cost *c, int n_decode, int n_full, double itl_target,
                        int min_rows, int max_rows);

#endif /* TESSERA_ENGINE_COST_H */
