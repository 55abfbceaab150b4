/* bench.h: the in-process engine benchmark behind `tessera bench`: concurrency levels of
 * random-prompt requests through one engine, their throughput and latency, a cached
 * prefix's effect on time to first token, and the memory-bandwidth yardstick.
 *
 * Metrics of one level (C requests submitted together, each prompt_len random tokens and
 * exactly n_tokens generated, greedy, EOS ignored; every time is CLOCK_MONOTONIC taken by
 * the request's own reader thread as each event arrives):
 *   TTFT        submit -> first TOKEN event of a request; p50/p99 over the C requests.
 *   ITL         gap between consecutive TOKEN events of one request; p50/p99 over the
 *               pooled gaps of all C requests.
 *   decode tok/s  aggregate steady-state decode throughput: the TOKEN events that arrive
 *               in the window (A, B], A = the latest first token of the level (every
 *               prompt is done), B = the earliest last token (no request has finished),
 *               divided by B - A. Every step in that window decodes all C sequences and
 *               nothing else, so this is what C-way batched decoding delivers. When the
 *               window is empty (n_tokens too small for the requests to overlap) it falls
 *               back to sum(tokens - 1) / (latest last token - earliest first token).
 *   e2e tok/s   every generated token / (latest last token - earliest submit): the
 *               throughput with prefill, ramp-up and tail included.
 *   prefill tok/s  C * prompt_len / (latest first token - earliest submit): the prompt
 *               tokens of the level over the time until every prompt has its first token
 *               (decode steps of early requests share that time, so it is a lower bound).
 *   speedup     decode tok/s / decode tok/s of the concurrency-1 level of the same run.
 *   rounds      with rounds R > 1 every level runs R times, the levels in turn (1, 16, 64,
 *               1, 16, 64, ...), so a slow spell of a shared machine hits every level
 *               alike. Each metric is then its median over the rounds, except speedup:
 *               the median of each round's own ratio (against that round's concurrency-1
 *               rate), reported with the range of those ratios.
 *   spec        with speculative decoding on: the draft tokens the engine verified during
 *               the level and the share it accepted (ts_engine_stats.spec_*), in all and
 *               by draft source, and the seconds the draft model's steps took.
 *   decode step profile  the engine's own timing of its decode-only steps during the
 *               level (ts_engine_stats.decode_steps, difference of the snapshots before
 *               the level and once the engine is idle after it): mean rows per step and
 *               milliseconds per step in each phase.
 *   mixed step profile  likewise for the steps with prompt rows: per step, the rows that
 *               decoded beside the prompt chunks and the prompt rows.
 */
#ifndef TESSERA_CLI_BENCH_H
#define TESSERA_CLI_BENCH_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/engine.h"

typedef struct bench_config {
    const int *levels;   /* (n_levels) concurrency levels, run in order; borrowed. A level
                          * of 1 is run first when the list has none (the baseline). */
    int n_levels;
    int n_tokens;        /* generated tokens per request, >= 1 */
    int prompt_len;      /* random prompt tokens per request (BOS included), >= 1 */
    int shared_prefix;   /* tokens of the common prefix for the TTFT test; 0 = skip */
    int prefix_suffix;   /* tokens after the prefix in that test, >= 1 */
    uint64_t seed;       /* prompts are a function of the seed */
    int rounds;          /* times every level runs, in turn; 1..BENCH_MAX_ROUNDS */
    const int32_t *prompt; /* (prompt_len) every request's prompt instead of random tokens
                            * (the editing workload, bench_edit_prompt), each request in a
                            * prefix-cache namespace of its own; borrowed. NULL: random */
} bench_config;

enum { BENCH_MAX_ROUNDS = 64 };

/* Fills 1 level of concurrency 1 (no levels array: the caller sets it), n 128, prompt
 * 128, no prefix test, suffix 16, seed 1, 1 round. */
void bench_config_default(bench_config *cfg);

typedef struct bench_level {
    int concurrency;
    double decode_tok_s, prefill_tok_s, e2e_tok_s; /* as defined above */
    bool all_decoding;   /* decode tok/s is from the window (A, B]; false: the fallback */
    double ttft_p50_ms, ttft_p99_ms;
    double itl_p50_ms, itl_p99_ms;
    double speedup;
    double speedup_min, speedup_max; /* range of the rounds' speedups */
    bool noisy;          /* a phase of the decode steps took over 2x longer per step in one
                          * round than another (bench_phases_vary) */
    int thread_cuts;     /* times the engine ran its steps on fewer threads during the level
                          * (engine/team.h: other processes held cores), all rounds */
    int threads_min;     /* the fewest threads its steps ran on at a level's end */
    double wall_s;       /* first submit -> last event, summed over the rounds */
    long generated;      /* TOKEN events of the level, all rounds */
    ts_step_profile decode; /* the engine's decode-only steps during the level, all rounds
                             * (where their time went; ramp-up and tail steps included) */
    ts_step_profile prompt; /* its steps with prompt rows likewise (decode_rows of them:
                             * the streams that decoded beside the prefill chunks) */
    uint64_t spec_drafted, spec_accepted; /* speculative decoding's draft tokens during the
                                           * level and those accepted, all rounds */
    ts_spec_source_stats spec_source[TS_SPEC_SOURCE_COUNT]; /* the same by draft source */
    double spec_draft_s; /* seconds the draft model's steps took during the level */
} bench_level;

typedef struct bench_result {
    bench_level *levels; /* (n_levels) owned */
    int n_levels;
    int has_prefix;
    double ttft_cold_ms;   /* prefix + suffix, the prefix never seen before */
    double ttft_cached_ms; /* same prefix, another suffix: the prefix's blocks cached */
    int cached_tokens;     /* prompt tokens the cached request got from the prefix cache */
} bench_result;

/* Sizes opts for cfg on a model of config c: max_seqs at least the largest level, and,
 * unless the caller chose a KV size (kv_mem_bytes or kv_blocks non-zero), enough KV
 * blocks for every request of the largest level plus the prefix test, so no level
 * preempts. */
void bench_engine_options(ts_engine_options *opts, const ts_model_config *c,
                          const bench_config *cfg);

/* `bench --embed` (bench_embed.c): after one warm-up document, for each level n of cfg,
 * n documents of cfg->prompt_len random tokens (at most the context) submitted together
 * as embed requests, cfg->rounds times; prints documents/s, tokens/s and the batch's
 * milliseconds (medians over the rounds). Returns the exit status (1 for a model that does
 * not pool, or a failed request). */
int bench_embed(ts_engine *e, const bench_config *cfg);

/* Warms the engine up with one request, then runs every level and the prefix test.
 * engine and cfg are borrowed; *out owns its levels (free with bench_result_free()).
 * Fails when a request is refused or fails, or generates other than n_tokens tokens. */
ts_status bench_run(bench_result *out, ts_engine *engine, const bench_config *cfg,
                    ts_error *err);

/* Accepts a zeroed result. */
void bench_result_free(bench_result *r);

/* {"model", "threads", "prompt_len", "n_tokens", "rounds", "levels": [{"concurrency",
 * "decode_tok_s", "all_decoding", "noisy", "thread_cuts", "threads_min", "prefill_tok_s",
 * "e2e_tok_s", "ttft_ms": {"p50", "p99"}, "itl_ms": {"p50", "p99"}, "speedup",
 * "speedup_range": [min, max], "spec": {"drafted", "accepted", "acceptance"}}...], "prefix":
 * {"tokens", "ttft_cold_ms", "ttft_cached_ms", "cached_tokens"} when measured}. cfg is the
 * config bench_run ran r with: prompt_len, n_tokens, rounds and the prefix's tokens come
 * from it. The caller owns the result (cJSON_Delete); NULL when out of memory. model is
 * copied. */
cJSON *bench_result_json(const bench_result *r, const bench_config *cfg, const char *model,
                         int threads);

/* The p-th percentile (p clamped to [0, 100]) of n values by linear interpolation between
 * the closest ranks (numpy's default): with v sorted and r = p/100 * (n-1), it is
 * v[floor r] + (r - floor r) * (v[floor r + 1] - v[floor r]). Sorts v in place; 0 when n
 * is 0. */
double bench_percentile(double *v, size_t n, double p);


/* One level of the result from its n_rounds rounds (1..BENCH_MAX_ROUNDS; any past that
 * are ignored), each with its speedup set: the medians, the speedups' range and the
 * totals that bench.h describes; all_decoding when every round had it; noisy from
 * bench_phases_vary. */
void bench_level_combine(bench_level *out, const bench_level *rounds, int n_rounds);

/* True when, across the n rounds, some phase of the decode steps that takes at least 5%
 * of the step time took more than twice as long per step in one round as in another:
 * on a busy machine, a level's figures then say more about its neighbours. Phases under
 * 5% are left out: microseconds vary by more than 2x without meaning anything. */
bool bench_phases_vary(const bench_level *rounds, int n);

/* The editing workload's prompt for model m: a document of plain prose, then a cue to
 * copy it out again, so most of the answer repeats the prompt (what prompt lookup drafts
 * from). *out (malloc'd, *n ids, BOS first where the vocabulary wants it) is the caller's. */
ts_status bench_edit_prompt(const ts_model *m, int32_t **out, int *n, ts_error *err);

/* The scripted answer of the editing workload (--edit-script R, a measuring aid for
 * ts_engine_options.spec_script): the document's own tokens, each replaced with
 * probability rate (0..1) by a plain token of the vocabulary drawn from seed, so the answer
 * copies the prompt with edits whatever the weights. *out (malloc'd, *n ids) is the
 * caller's. */
ts_status bench_edit_script(const ts_model *m, double rate, uint64_t seed, int32_t **out,
                            int *n, ts_error *err);

/* Bytes of weights one decode step reads, in the matrices' own types: every matrix and
 * norm but the embedding table, of which it reads one row per token (the tied output reads
 * the whole table). */
double bench_weight_bytes(const ts_model *m);

/* A mixture's decode counts (layer passes, experts they read, (row, expert) pairs) as the
 * bench reports them: experts read a layer and the rows each read was multiplied with;
 * both 0 where nothing was read. */
void bench_expert_rates(uint64_t layers, uint64_t read, uint64_t pairs, double *per_layer,
                        double *rows_each);

/* llama-batched-bench's schedule (bench_pptg.c): n_seqs streams of prompt_len random
 * tokens each all prefilled first, then n_tokens decode steps of every stream together,
 * each row a random token, straight on the forward pass (no scheduler, no sampling: the
 * peer's loop). Its measures:
 *   S_PP  n_seqs * prompt_len / the prefill's time
 *   S_TG  n_seqs * n_tokens / the decode steps' time
 *   S     all those tokens / both times */
typedef struct bench_pptg_config {
    int n_seqs, prompt_len, n_tokens;
    uint64_t seed; /* the prompts are a function of it */
} bench_pptg_config;

typedef struct bench_pptg {
    int n_seqs;
    double t_pp, t_tg;    /* seconds */
    double s_pp, s_tg, s; /* tok/s, as above */
    /* A mixture of experts' decode steps: layer passes, experts they read and (row,
     * expert) pairs, as ts_step_profile's moe_* (0 for a dense model). */
    uint64_t moe_layers, experts_read, expert_pairs;
} bench_pptg;

/* Runs the schedule once on model m (borrowed) with the engine options o (borrowed: the
 * KV type, gemm path, threads and step_tokens, the rows of a prefill step) after a one-row
 * warm-up. TS_ERR_INVALID_ARG when prompt + n_tokens exceeds the context. */
ts_status bench_pptg_run(bench_pptg *out, const ts_model *m, const ts_engine_options *o,
                         const bench_pptg_config *c, ts_error *err);

#endif
