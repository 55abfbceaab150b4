/* engine_internal.h: the engine's private state, shared by engine.c (lifecycle, submit,
 * the step thread), sched.c (admission, preemption, building a step) and emit.c (sampling
 * and events). Everything below `engine thread only` is touched by the step thread alone. */
#ifndef TESSERA_ENGINE_INTERNAL_H
#define TESSERA_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "engine/detok.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop.h"
#include "kv/kv.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "simd.h"
#include "tessera/engine.h"

/* What the engine keeps per request, beside the handle's shared part. */
typedef struct job {
    ts_request *req;
    int live;              /* sequences not finished */
    bool forked;           /* the prompt sequence has become n sequences */
    int cached_tokens;     /* prompt tokens mapped from the prefix cache at first admission */
    bool admitted_once;
    bool failed;
} job;

/* One completion being generated: the unit the scheduler admits, steps and preempts.
 * A request with n > 1 starts as one sequence for the prompt and forks into n when the
 * prompt's logits are ready, so the prompt's KV blocks are computed once and shared. */
typedef struct seq {
    job *job;              /* the request it belongs to */
    int index;             /* completion number, 0..n-1 */
    int32_t *tokens;       /* (cap) prompt, then generated tokens */
    int n_tokens, cap;
    int n_generated;
    int n_computed;        /* leading tokens whose K/V are in the table */
    int n_published;       /* leading full blocks offered to the prefix cache */
    kv_table table;
    sampler smp;
    detok detok;
    stop_matcher stop;
    uint64_t admit_order;  /* latest admitted is preempted first among equals */
    int step_rows;         /* rows scheduled in the current step */
    bool done;             /* finished or failed: freed at the end of the step */
} seq;

struct ts_engine {
    const ts_model *model;  /* borrowed */
    ts_engine_options opts;
    const simd_kernels *kernels;
    int max_rows;           /* rows one step may hold */
    int kv_blocks_total;    /* pool size, fixed at creation (read by submitting threads) */
    pthread_t thread;
    bool thread_started;

    /* Guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t idle_cv; /* broadcast when the step thread runs out of work */
    bool idle;              /* the step thread waits for work, its stats published */
    job **inbox;            /* submitted, not yet seen by the step thread */
    int n_inbox, cap_inbox;
    int n_pending;          /* inbox + waiting queue: compared with max_queue */
    int queued[TS_PRIORITY_COUNT];
    bool stopping;
    uint64_t next_id;
    ts_engine_stats stats;  /* the snapshot ts_engine_get_stats() copies */

    /* Engine thread only. */
    kv_pool *pool;
    fwd_state fwd;
    sampler_scratch *scratch; /* (n_scratch) one per thread that samples */
    int n_scratch;
    struct sampled *picks;  /* (max_seqs) the step's sampled tokens, by fwd_seq index */
    seq **running;          /* (max_seqs) admitted sequences, in admission order */
    int n_running;
    seq **waiting;          /* new and preempted sequences */
    int n_waiting, cap_waiting;
    int32_t *step_tokens;   /* (max_rows) */
    fwd_seq *step_seqs;     /* (max_seqs) */
    seq **step_order;       /* (max_seqs) sequence of each fwd_seq */
    float *logits_copy;     /* (vocab) a row to sample from, for forks */
    seq **dead;             /* finished sequences, freed at the end of the step so that
                             * pointers held during the step stay valid */
    int n_dead, cap_dead;
    job **dead_jobs;        /* finished requests, freed likewise */
    int n_dead_jobs, cap_dead_jobs;
    int allocs_left;        /* fault injection countdown; 0 = off (see fail_alloc_at) */
    uint64_t admit_counter;
    ts_engine_stats counters; /* cumulative counters, copied into stats after each step */
};

/* Effective priority of a waiting or running sequence: its level minus what it gained by
 * waiting (aging). Lower runs first. */
double sched_effective_priority(const ts_engine *e, const seq *s, double now);

/* Copies the counters and gauges into the snapshot others read. Called with mu held. */
void engine_publish_stats_locked(ts_engine *e);

/* One engine step: admit, schedule rows, reserve KV (preempting when short), run the
 * forward pass, sample, emit events. Returns false when there was nothing to do. */
bool engine_step(ts_engine *e);

/* Ends sequence s with finish reason `why`: flushes its held-back text into a DONE
 * event, releases its blocks, marks it done. The caller has removed it from running and
 * waiting. When it was its request's last sequence the request is closed. */
void engine_finish_seq(ts_engine *e, seq *s, ts_finish_reason why);

/* Fails request j with an ERROR event: removes its sequences from running and waiting
 * and ends them. Counted as failed, or as cancelled when st is TS_ERR_CANCELLED. Queue
 * accounting (n_pending) of a never-admitted request is the caller's. */
void engine_fail_request(ts_engine *e, job *j, ts_status st, const char *msg);

/* Creates sequence `index` of job j holding a copy of tokens, appended to the waiting
 * queue. */
ts_status engine_seq_create(ts_engine *e, job *j, int index, const int32_t *tokens,
                            int n_tokens, seq **out, ts_error *err);

/* Appends s to the waiting queue. */
ts_status engine_waiting_add(ts_engine *e, seq *s);

/* False when fault injection says this allocation must fail. Every allocation the step
 * thread makes on a request's behalf asks first. */
bool engine_alloc_ok(ts_engine *e);

/* Frees the sequences and requests that ended during the step. */
void engine_free_dead(ts_engine *e);

/* A token drawn for a sequence, not yet appended or emitted. */
typedef struct sampled {
    int32_t token;
    ts_status status;     /* TS_OK, or why sampling failed (err) */
    bool want_logprobs;
    sampler_logprobs lp;  /* when want_logprobs */
    ts_error err;
} sampled;

/* Draws s's next token from logits (vocab; modified) with scratch sc. Touches only s's
 * sampler and sc, so several sequences may sample at once on separate scratches. */
void engine_sample(seq *s, float *logits, sampler_scratch *sc, sampled *out);

/* Appends the token drawn for s and emits its text; ends the sequence when it is done
 * (or fails the request when sampling failed). Returns true while it keeps running. */
bool engine_emit(ts_engine *e, seq *s, const sampled *pick);

#endif /* TESSERA_ENGINE_INTERNAL_H */
