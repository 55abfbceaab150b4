/* cost.h: what an engine step costs, learnt from the steps it ran (cost.c), and the prefill
 * budget that cost allows. Plain data, no engine: the scheduler owns one, tests feed it
 * timings of their own. */
#ifndef TESSERA_ENGINE_COST_H
#define TESSERA_ENGINE_COST_H

/* A step of D decode rows and P prompt rows is modelled as taking
 *     t = a + b_decode * D + b_prefill * P   seconds,
 * a being what every step pays whatever its rows (weights streamed from memory, thread
 * wake-ups, fixed scheduling), b_decode a decode row (GEMM rows, attention over its
 * context, its logits and sampling), b_prefill a prompt row. The fit is least squares over
 * the steps seen, each step's weight decaying by COST_DECAY per newer step so the model
 * follows contexts that grow and machines whose load changes; a weak pull towards the
 * proportional model (a = 0, both b = seconds per row on average) decides the directions the
 * steps never varied in (every step with the same D, say). */
typedef struct step_cost {
    double s[3][3];  /* decayed sum of x x^T, x = (1, D, P) */
    double r[3];     /* decayed sum of x t */
    double n;        /* decayed number of steps */
    double rows, t;  /* decayed sums of D + P and of t */
    int seen;        /* steps observed */
    double coef[3];  /* (a, b_decode, b_prefill), refitted after each step */
    double mixed;    /* what mixed steps (decode and prompt rows) took over what the model
                      * said before each ran, a decaying mean (1 until one is seen). The
                      * cost is not linear in rows (each kernel has its own range of rows,
                      * and a long prompt-only step weighs on the fit): on the benchmark
                      * host TinyLlama's mixed steps at 64 streams took 2.1x a decode step
                      * where the budget had aimed at 1.5x */
} step_cost;

/* Steps seen before cost_prefill_budget trusts the model. */
enum { COST_MIN_STEPS = 4 };

void cost_init(step_cost *c);

/* Adds a step of n_decode decode rows and n_prefill prompt rows that took seconds. */
void cost_observe(step_cost *c, int n_decode, int n_prefill, double seconds);

/* The steps' own least-squares coefficients (a, b_decode, b_prefill) into coef, without
 * the pull towards the proportional model that step_cost.coef has (c->coef where they
 * cannot be solved; none below 0). Where the rows a step decodes vary little (one stream,
 * a draft or two a step) that pull made a decode row cost most of a step's share; this
 * fit says what one more row adds once the decode rows have varied at all. */
void cost_plain_fit(const step_cost *c, double coef[3]);

/* Estimated seconds of a step of n_decode decode and n_prefill prompt rows. */
double cost_estimate(const step_cost *c, int n_decode, int n_prefill);

/* Prompt rows a step with n_decode decode rows may take so that it lasts at most
 * itl_target times a step decoding n_full rows alone (n_full: the batch being filled, the
 * inter-token latency that decoding settles at), at least min_rows (prompts always
 * progress) and at most max_rows; the mixed step's estimate is scaled by what mixed steps
 * took against the model (step_cost.mixed). -1 before COST_MIN_STEPS steps were seen. */
int cost_prefill_budget(const step_cost *c, int n_decode, int n_full, double itl_target,
                        int min_rows, int max_rows);

#endif /* TESSERA_ENGINE_COST_H */
