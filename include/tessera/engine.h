/* tessera/engine.h: the continuous-batching engine. One engine per loaded model runs
 * its own step thread; any thread may submit requests and read their events. */
#ifndef TESSERA_ENGINE_H
#define TESSERA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera/model.h"
#include "tessera/sampling.h"
#include "tessera/grammar.h"
#include "tessera/schema.h"
#include "tessera/status.h"
#include "tessera/step_phase.h"

typedef struct ts_engine ts_engine;
typedef struct ts_request ts_request;

typedef enum ts_priority {
    TS_PRIORITY_HIGH = 0,
    TS_PRIORITY_NORMAL = 1,
    TS_PRIORITY_LOW = 2,
} ts_priority;
#define TS_PRIORITY_COUNT 3

enum {
    TS_MAX_STOP = 4,          /* stop strings per request */
    TS_MAX_STOP_LEN = 256,    /* bytes per stop string */
    TS_MAX_N = 16,            /* completions per request */
    TS_MAX_TOP_LOGPROBS = TS_SAMPLING_MAX_TOP_LOGPROBS,
    TS_EVENT_OVERHEAD = 512,  /* bytes an unread event counts beside its text */
    TS_KV_BLOCK_TOKENS = 32,  /* token slots of a KV block, the unit of kv_blocks */
};

/* How a step multiplies its activation rows by a weight matrix. */
typedef enum ts_gemm_path {
    TS_GEMM_AUTO,   /* the SIMD skinny GEMM for steps of few rows, OpenBLAS above */
    TS_GEMM_BLAS,   /* OpenBLAS always */
    TS_GEMM_KERNEL, /* the SIMD skinny GEMM always */
} ts_gemm_path;

/* Where speculative decoding takes its draft tokens from. */
typedef enum ts_spec_kind {
    TS_SPEC_OFF,   /* one token per sequence a step */
    TS_SPEC_NGRAM, /* prompt lookup: the continuation of the latest earlier match of the
                    * text's last tokens in the prompt and the text so far */
    TS_SPEC_DRAFT, /* a draft model (ts_engine_options.draft_model) proposes each draft
                    * greedily, in batched steps of its own; prompt lookup is not consulted */
} ts_spec_kind;

/* What the KV pool stores keys and values as. */
typedef enum ts_kv_type {
    TS_KV_AUTO, /* f32 for a model whose matrices are all f32, else f16 (llama.cpp's
                 * default cache type): half the bytes attention reads, at the precision
                 * the weights already gave up */
    TS_KV_F32,
    TS_KV_F16,
    TS_KV_Q8_0, /* int8 with an f16 scale per 32 values, as llama.cpp's q8_0 cache: about
                 * half of f16's bytes, for long contexts whose decode reads mostly K/V */
} ts_kv_type;

typedef struct ts_engine_options {
    size_t kv_mem_bytes;   /* KV pool size in bytes; 0 = use kv_blocks */
    int kv_blocks;         /* KV pool size in 32-token blocks when kv_mem_bytes is 0;
                            * 0 = enough for max_seqs full contexts, capped at 1 GiB */
    ts_kv_type kv_type;    /* how K and V are stored (default auto) */
    int max_seqs;          /* sequences decoding at once (default 64) */
    int step_tokens;       /* token budget of one step: decodes + prefill chunks; 0 (the
                            * default): by model, ts_engine_step_tokens */
    int prefill_cap;       /* prompt tokens in a step that also decodes (128) when
                            * itl_target is 0, and until the engine has timed a few steps;
                            * the most the adaptive rule takes after that; a step with
                            * nothing to decode uses the whole budget */
    double itl_target;     /* adaptive prefill (1.5): a step that decodes takes as many
                            * prompt tokens as keep it within this many times the time of a
                            * step decoding the whole batch alone (the engine's running
                            * estimate); 0 = the fixed prefill_cap */
    int prefill_min;       /* prompt tokens a step that also decodes takes at least (32), so
                            * waiting prompts always progress */
    int max_queue;         /* waiting requests before submit answers TS_ERR_QUEUE_FULL */
    double aging_per_s;    /* priority levels a waiting request gains per second (0.1) */
    int n_threads;         /* OpenMP threads in a step; 0 = all cores */
    bool prefix_cache;     /* share KV blocks of common prompt prefixes (default on) */
    int fail_alloc_at;     /* fault injection: the n-th allocation the step thread makes
                            * for requests fails (0 = never); the CLI fills it from
                            * TESSERA_FAIL_ALLOC_AT */
    ts_gemm_path gemm;     /* the step's GEMM (default auto); the CLI fills it from
                            * TESSERA_GEMM */
    ts_spec_kind spec;     /* speculative decoding (default off): a decoding sequence's
                            * draft tokens ride as extra rows of its step and the target's
                            * own logits accept or reject them; the output is the same */
    int spec_max;          /* draft tokens a sequence may add to a step (default 8, 1..64) */
    int spec_rows;         /* drafts only fill a step up to this many rows (default 16):
                            * beyond it the step is compute-bound and rows are not free;
                            * a step that already holds as many takes no draft */
    bool spec_eager;       /* draft as deep as spec_max and spec_rows allow, whatever the
                            * step's cost model says a row costs (off: each draft must be
                            * likelier to be accepted than a row's share of the step's
                            * cost); for tests and measurements at a fixed depth */
    int spec_draft_vocab;  /* with TS_SPEC_DRAFT: the draft model's LM head scores only the
                            * first N token ids and drafts among them (0, default: all).
                            * A 128k-token head is a fifth of a 1B draft's bytes a token;
                            * byte-pair vocabularies number their tokens by merge rank,
                            * so the first ids are roughly the most frequent (as a draft
                            * head restricted to frequent tokens, FR-Spec or EAGLE-3's).
                            * The target still decides every token: the output is the
                            * same; a token past N is never drafted */
    const ts_model *draft_model; /* with TS_SPEC_DRAFT: the model that drafts (borrowed,
                            * outlives the engine); its vocabulary must be the target's:
                            * the same size, token bytes and special ids, else
                            * ts_engine_create refuses it naming the difference */
    double spec_force_accept; /* a measuring aid (tessera bench), 0 = off: each draft is
                            * accepted with this probability once the one before it was,
                            * whatever the target drew (the target's token is replaced
                            * by the draft's), so the mechanism's cost can be timed at a
                            * chosen acceptance on random weights. The text is then not
                            * the model's: never for serving */
    const int32_t *spec_script; /* a measuring aid (tessera bench --edit-script), NULL = off:
                            * (n_spec_script) tokens, borrowed, outliving the engine; every
                            * request's token at generated position i < n_spec_script is
                            * script[i] instead of the one it sampled (the forward pass,
                            * the sampling and the verification of drafts all still run).
                            * With a script that copies the prompt, prompt lookup drafts
                            * as it would for a model that copies, on random weights. The
                            * text is then not the model's (its logprobs are the sampled
                            * token's; a constrained request fails): never for serving */
    int n_spec_script;     /* tokens in spec_script, 0..1<<20, each an id of the vocabulary */
    FILE *step_log;        /* a line a step, for tuning the prefill budget, its columns
                            * TS_STEP_LOG_COLUMNS (NULL = none; tessera bench --step-log).
                            * Written on the step thread; the caller owns it */
} ts_engine_options;

/* ts_engine_options.step_log's columns, space-separated: the step's decode rows, prompt
 * rows and milliseconds; what the cost model estimated of it before it ran (ms; a mixed
 * step's estimate scaled by the mixed steps' scale); the batch being filled, the estimate
 * of its decode step (ms); the mixed steps' scale. */
#define TS_STEP_LOG_COLUMNS "decode prompt ms est_ms full est_full_ms mixed"

/* Fills the defaults above. */
void ts_engine_options_default(ts_engine_options *opts);

/* The step budget opts gives model (ts_engine_options.step_tokens): its own where set, else
 * 512 rows for a generative model (a step that decodes stays short) and 4096 for an encoder,
 * whose steps only embed: a step of 16 documents of 256 tokens keeps every thread on long
 * GEMMs (a step of one document spends much of its time in fork-join and imbalance). */
int ts_engine_step_tokens(const ts_engine_options *opts, const ts_model *model);

/* What a request's generated text must be: the engine masks, before sampling, every
 * token that cannot continue it, and ends a completion (TS_FINISH_STOP) once the text is
 * complete. max_tokens may still cut it short (TS_FINISH_LENGTH). */
typedef enum ts_constraint_kind {
    TS_CONSTRAINT_NONE = 0,
    TS_CONSTRAINT_JSON_OBJECT, /* one JSON object, no text before or after */
    TS_CONSTRAINT_JSON_SCHEMA, /* one JSON value that ts_request_params.schema accepts, no
                                * text before or after */
    TS_CONSTRAINT_GRAMMAR,     /* one text of ts_request_params.grammar (GBNF, a regex or a
                                * choice), no text before or after */
} ts_constraint_kind;

typedef struct ts_request_params {
    const int32_t *prompt;   /* (n_prompt) token ids, BOS included; copied */
    size_t n_prompt;
    int max_tokens;          /* new tokens per completion, >= 1; 0 with prompt_logprobs
                              * and n 1: score the prompt, generate nothing */
    ts_sampling_params sampling;
    const char *stop[TS_MAX_STOP]; /* n_stop NUL-terminated strings; copied */
    int n_stop;
    ts_priority priority;
    int n;                   /* completions sharing the prompt's KV blocks, 1..TS_MAX_N */
    bool ignore_eos;         /* keep generating past end-of-generation tokens */
    /* Report each prompt token's log-probability (TS_EVENT_PROMPT), with
     * sampling.top_logprobs alternatives. The prompt then skips the prefix cache (every
     * row is computed, its logits too). */
    bool prompt_logprobs;
    ts_constraint_kind constraint; /* default TS_CONSTRAINT_NONE */
    /* TS_CONSTRAINT_JSON_SCHEMA: the compiled schema (required then, ignored otherwise).
     * Borrowed: the engine takes its own reference at submit, so the caller may release
     * its own as soon as ts_engine_submit returns. */
    ts_schema *schema;
    /* TS_CONSTRAINT_GRAMMAR: the compiled grammar (required then, ignored otherwise);
     * borrowed as schema is. */
    ts_grammar *grammar;
    /* Prefix-cache namespace: the request reuses and publishes cached KV blocks only
     * among requests of the same value (a server gives each tenant its own, so that
     * cached_tokens and timing tell no tenant about another's prompts). 0 = shared. */
    uint64_t cache_namespace;
    /* Bounded buffering for slow readers: when the events not yet read hold more than
     * this many bytes (text plus TS_EVENT_OVERHEAD per event), the engine ends the
     * request with an ERROR event of status TS_ERR_CANCELLED. 0 = unbounded. */
    size_t max_unread_bytes;
    /* Called from the engine thread whenever this request gets a new event, so a server
     * can resume a suspended connection; must not block or call back into the engine.
     * May be NULL (then callers block in ts_request_next_event). */
    void (*notify)(void *user);
    void *notify_user;       /* borrowed */
    /* An embedding: the prompt is prefilled, never generated from, and the request's one
     * event is a DONE whose `embedding` is the model's pooling (ts_model_config.pooling,
     * which must not be none) of the prompt's final-normalised hidden states, scaled to
     * unit L2 norm. max_tokens, n, sampling, stop and constraint are ignored. Its KV
     * blocks are freed once the vector is out and never enter the prefix cache. On an
     * encoder (ts_model_config.encoder) the whole prompt runs in one step with no KV, the
     * hidden states are the last layer's as they are, and with rank pooling the vector
     * holds the classification head's cls_out scores, unscaled (the rest zero). An encoder
     * takes embed requests only. */
    bool embed;
    bool no_speculation;     /* opt out of the engine's speculative decoding */
} ts_request_params;

/* Fills max_tokens 16, default sampling, NORMAL priority, n 1. */
void ts_request_params_default(ts_request_params *params);

typedef enum ts_event_kind {
    TS_EVENT_TOKEN,  /* text of one new token of completion `index` (may be empty while a
                      * UTF-8 character or a possible stop string is held back) */
    TS_EVENT_DONE,   /* completion `index` finished: finish reason, usage, and in text any
                      * held-back text released at the end (may be empty) */
    TS_EVENT_ERROR,  /* the request failed; status and message say why; no more events */
    TS_EVENT_PROMPT, /* prompt_logprobs: the log-probability of prompt token `token`
                      * given the tokens before it, with n_top alternatives; one for each
                      * prompt token from the second on, in order, before any TOKEN
                      * event; index 0, empty text */
} ts_event_kind;

typedef enum ts_finish_reason {
    TS_FINISH_NONE = 0,
    TS_FINISH_STOP,      /* end-of-generation token or a stop string */
    TS_FINISH_LENGTH,    /* max_tokens or the context length reached */
    TS_FINISH_CANCELLED, /* ts_request_cancel() */
} ts_finish_reason;

typedef struct ts_logprob {
    int32_t token;
    float logprob;
} ts_logprob;

typedef struct ts_event {
    ts_event_kind kind;
    int index;               /* completion 0..n-1 */
    char *text;              /* TOKEN, DONE: owned by the event, NUL-terminated valid UTF-8;
                              * the completion's text is the concatenation of these */
    size_t text_len;
    int32_t token;           /* TOKEN: the sampled id; PROMPT: the prompt's */
    float logprob;           /* TOKEN, PROMPT: its log-probability */
    int n_top;               /* TOKEN, PROMPT: entries in top[] (the request's
                              * top_logprobs) */
    ts_logprob top[TS_MAX_TOP_LOGPROBS];
    ts_finish_reason finish; /* DONE */
    int stop_index;          /* DONE: the index in the request's stop[] of the stop string
                              * that ended the completion, -1 when none did */
    int rank;                /* PROMPT: the token's rank in the model's distribution (1: the
                              * most likely; 1 + the tokens of a higher logit) */
    int prompt_tokens;       /* DONE: usage of the whole request */
    int cached_tokens;       /* DONE: prompt tokens served from the prefix cache */
    int completion_tokens;   /* DONE: tokens generated by this completion */
    ts_status status;        /* ERROR */
    char message[256];       /* ERROR */
    float *embedding;        /* DONE of an embed request: (n_embedding) owned by the event,
                              * unit L2 norm; NULL otherwise */
    int n_embedding;
} ts_event;

/* Frees what the event owns (its text, its embedding); the struct can be reused. */
void ts_event_clear(ts_event *ev);

/* Starts an engine and its step thread. model is borrowed and must outlive the engine. */
ts_status ts_engine_create(const ts_model *model, const ts_engine_options *opts,
                           ts_engine **out, ts_error *err);

/* Cancels every request, joins the step thread, frees the engine. Accepts NULL.
 * Requests not yet released stay valid (they get a CANCELLED/ERROR event) until released. */
void ts_engine_destroy(ts_engine *engine);

/* Queues a request; thread-safe. Refuses at once (with err naming the numbers) a request
 * that can never fit: prompt + max_tokens over the context, or more KV blocks than the
 * pool holds; and answers TS_ERR_QUEUE_FULL when max_queue requests wait. On success *out
 * is a handle the caller must pass to ts_request_release(). */
ts_status ts_engine_submit(ts_engine *engine, const ts_request_params *params,
                           ts_request **out, ts_error *err);

/* The largest max_tokens that a request of n_prompt prompt tokens and n completions may
 * ask for and still fit the engine's KV pool (the pool check of ts_engine_submit); 0 when
 * not even one new token fits. The context length is a separate bound. Thread-safe. */
int ts_engine_max_new_tokens(const ts_engine *engine, size_t n_prompt, int n);

/* Waits up to timeout_ms (-1 = forever, 0 = poll) for the request's next event and moves
 * it into *ev. Returns TS_ERR_TIMEOUT when none came, TS_ERR_NOT_FOUND once every event
 * has been read (after all DONE events, or the ERROR event). Thread-safe. */
ts_status ts_request_next_event(ts_request *req, ts_event *ev, int timeout_ms);

/* Asks the engine to stop the request; queued or running. Its KV blocks are freed at the
 * next step boundary and each unfinished completion gets a DONE event with
 * TS_FINISH_CANCELLED. Thread-safe, idempotent. */
void ts_request_cancel(ts_request *req);

/* The caller is done with the handle: cancels the request if it still runs and frees the
 * handle once the engine is done with it too. Accepts NULL. */
void ts_request_release(ts_request *req);

/* Cumulative time of a kind of step. */
typedef struct ts_step_profile {
    uint64_t steps, rows;
    uint64_t decode_rows; /* of rows: those of sequences decoding (one token each) */
    uint64_t mixed_steps, mixed_rows; /* of steps: those with decode and prompt rows both,
                                       * and their rows */
    double seconds[TS_PHASE_COUNT];
    /* A mixture of experts: its layers' passes (a layer a step), the experts they read and
     * the (row, expert) pairs those multiplied: experts_read / moe_layers of the model's
     * experts is the share of its expert weights a step reads, pairs / experts_read the
     * rows each expert read was multiplied with. 0 for a dense model. */
    uint64_t moe_layers, experts_read, expert_pairs;
} ts_step_profile;

/* The draft sources speculative decoding counts apart (ts_engine_stats.spec_source). */
typedef enum ts_spec_source {
    TS_SPEC_SOURCE_NGRAM,       /* prompt lookup (TS_SPEC_NGRAM) */
    TS_SPEC_SOURCE_DRAFT_MODEL, /* a draft model (TS_SPEC_DRAFT) */
    TS_SPEC_SOURCE_COUNT
} ts_spec_source;

/* The source's name as /metrics labels it: "ngram", "draft_model"; "unknown" out of range. */
const char *ts_spec_source_name(ts_spec_source source);

/* Draft tokens of one source the target verified, and those it accepted. */
typedef struct ts_spec_source_stats {
    uint64_t drafted, accepted;
} ts_spec_source_stats;

typedef struct ts_engine_stats {
    int queued[TS_PRIORITY_COUNT]; /* waiting requests per priority */
    int running;                   /* sequences in the batch */
    int kv_blocks_total, kv_blocks_free, kv_blocks_used, kv_blocks_cached;
    uint64_t prefix_lookups, prefix_hit_blocks, prefix_miss_blocks, kv_evictions;
    uint64_t preemptions;
    /* Threads the steps run on now: the configured count, less those another process
     * keeps from a core (engine/team.h); and the times the engine lowered it. */
    int threads;
    uint64_t thread_cuts;
    /* Once the engine is idle: submitted = completed + failed + cancelled. A request
     * ended for unread output (max_unread_bytes) counts as cancelled. */
    uint64_t requests_submitted, requests_completed, requests_failed, requests_cancelled;
    uint64_t prompt_tokens, generated_tokens, steps;
    /* Steps whose rows are all decode tokens, and steps with prompt rows, apart: the
     * first is what steady decoding costs. */
    ts_step_profile decode_steps, prompt_steps;
    /* Speculative decoding: draft tokens verified, and those the target accepted (each
     * one a token generated without a step of its own). */
    uint64_t spec_drafted, spec_accepted;
    /* The same by the source that drafted them (spec_drafted and spec_accepted are their
     * sums), and the seconds the draft model's own steps took: what drafting costs. */
    ts_spec_source_stats spec_source[TS_SPEC_SOURCE_COUNT];
    double spec_draft_model_seconds;
} ts_engine_stats;

/* A consistent snapshot; never waits for a step to finish. */
void ts_engine_get_stats(ts_engine *engine, ts_engine_stats *stats);

/* A busy sequence slot as the engine's last step left it (ts_engine_get_slots). */
typedef struct ts_slot_info {
    uint64_t request_id; /* the request's submission number, unique per engine */
    int index;           /* its completion, 0..n-1 */
    int n_prompt;        /* the prompt's tokens */
    int n_prompt_done;   /* prompt tokens whose K/V are computed, cached ones included */
    int n_cached;        /* prompt tokens taken from the prefix cache */
    int n_decoded;       /* tokens generated so far */
    int n_remain;        /* tokens it may still generate */
} ts_slot_info;

/* The engine's sequence slots (opts.max_seqs), fixed at creation. */
int ts_engine_max_seqs(const ts_engine *engine);

/* Copies up to cap busy slots (out: caller's array) in admission order, as published at the
 * end of the last step, and returns how many there are. Takes the engine's lock only for the
 * copy; never waits for a step. Any thread. */
int ts_engine_get_slots(ts_engine *engine, ts_slot_info *out, int cap);

/* Waits up to timeout_ms (-1 = forever, 0 = just look) until the engine is idle: nothing
 * submitted, queued or running, and the stats of its last step published. TS_OK, or
 * TS_ERR_TIMEOUT while it is still busy. A new engine counts as busy until its step thread
 * has written the KV pool once (seconds for a pool of many GB). */
ts_status ts_engine_wait_idle(ts_engine *engine, int timeout_ms);

/* The model the engine serves (borrowed). */
const ts_model *ts_engine_get_model(const ts_engine *engine);

/* How the engine's KV pool stores K and V: TS_KV_F32 or TS_KV_F16 (auto resolved). */
ts_kv_type ts_engine_kv_type(const ts_engine *engine);

#endif /* TESSERA_ENGINE_H */
