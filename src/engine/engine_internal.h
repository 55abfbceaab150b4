/* engine_internal.h: the engine's private state and the calls between its files, which
 * form layers (each calls only those below it):
 *   engine.c  lifecycle, submit, the step thread's loop
 *   step.c    one step as named stages
 *   sched.c   cancel, admit, plan, pack            emit.c  sample, emit, fork
 *   seq.c     a sequence's life: create, the waiting queue, its text, finish, fail, free
 */
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

/* What submitting threads and the step thread share: read and written only with the
 * engine's mu held. */
typedef struct engine_shared {
    pthread_cond_t cv;      /* signalled on submit and at stop */
    pthread_cond_t idle_cv; /* broadcast when the step thread runs out of work */
    bool idle;              /* the step thread waits for work, its stats published */
    job **inbox;            /* submitted, not yet seen by the step thread */
    int n_inbox, cap_inbox;
    int n_pending;          /* inbox + waiting queue: compared with max_queue */
    int queued[TS_PRIORITY_COUNT];
    bool stopping;
    uint64_t next_id;
    ts_engine_stats stats;  /* the snapshot ts_engine_get_stats() copies */
} engine_shared;

/* What the step thread alone touches (and ts_engine_create / ts_engine_destroy while no
 * step thread runs), without a lock. */
typedef struct engine_step_state {
    kv_pool *pool;
    fwd_state fwd;
    sampler_scratch *scratch; /* (n_scratch) one per thread that samples */
    int n_scratch;
    struct sampled *picks;  /* (max_seqs) the step's sampled tokens, by fwd_seq index */
    seq **running;          /* (max_seqs) admitted sequences, in admission order */
    int n_running;
    seq **waiting;          /* new and preempted sequences */
    int n_waiting, cap_waiting;
    int32_t *tokens;        /* (max_rows) the step's tokens */
    fwd_seq *seqs;          /* (max_seqs) the step's sequences */
    seq **order;            /* (max_seqs) sequence of each fwd_seq */
    float *logits_copy;     /* (vocab) a row to sample from, for forks */
    seq **dead;             /* finished sequences, freed at the end of the step so that
                             * pointers held during the step stay valid */
    int n_dead, cap_dead;
    job **dead_jobs;        /* finished requests, freed likewise */
    int n_dead_jobs, cap_dead_jobs;
    int allocs_left;        /* fault injection countdown; 0 = off (see fail_alloc_at) */
    uint64_t admit_counter;
    ts_engine_stats counters; /* cumulative counters, copied into stats after each step */
} engine_step_state;

/* The locking rule is in the type: `shared` only under mu, `step` only on the step
 * thread, the rest fixed at creation. */
struct ts_engine {
    const ts_model *model;  /* borrowed */
    ts_engine_options opts;
    const simd_kernels *kernels;
    int max_rows;           /* rows one step may hold */
    int kv_blocks_total;    /* pool size, fixed at creation (read by submitting threads) */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    engine_shared shared;   /* guarded by mu */
    engine_step_state step; /* step thread only */
};

/* A token drawn for a sequence, not yet appended or emitted. */
typedef struct sampled {
    int32_t token;
    ts_status status;     /* TS_OK, or why sampling failed (err) */
    bool want_logprobs;
    sampler_logprobs lp;  /* when want_logprobs */
    ts_error err;
} sampled;

static inline int engine_blocks_for(int64_t tokens)
{
    return (int)((tokens + TS_KV_BLOCK - 1) / TS_KV_BLOCK);
}

/* ---- seq.c */

/* False when fault injection says this allocation must fail. Every allocation the step
 * thread makes on a request's behalf asks first. */
bool engine_alloc_ok(ts_engine *e);

/* Creates sequence `index` of job j holding a copy of tokens, appended to the waiting
 * queue. */
ts_status engine_seq_create(ts_engine *e, job *j, int index, const int32_t *tokens,
                            int n_tokens, seq **out, ts_error *err);

/* Appends s to the waiting queue. */
ts_status engine_waiting_add(ts_engine *e, seq *s);

/* Position of s in arr (n), or -1; removal of the entry at i, keeping the order. */
int engine_seq_find(seq *const *arr, int n, const seq *s);
void engine_seq_remove_at(seq **arr, int *n, int i);

/* Runs bytes (NULL: the end of the text) through s's detokenizer and stop matcher; *out
 * (malloc'd, n_out bytes) receives what may be shown now. */
ts_status engine_seq_text(seq *s, const char *bytes, size_t len, char **out, size_t *n_out,
                          ts_error *err);

/* Ends sequence s with finish reason `why`: flushes its held-back text into a DONE
 * event, releases its blocks, marks it done. The caller has removed it from running and
 * waiting. When it was its request's last sequence the request is closed. */
void engine_finish_seq(ts_engine *e, seq *s, ts_finish_reason why);

/* Fails request j with an ERROR event: removes its sequences from running and waiting
 * and ends them. Counted as failed, or as cancelled when st is TS_ERR_CANCELLED. Queue
 * accounting (n_pending) of a never-admitted request is the caller's. */
void engine_fail_request(ts_engine *e, job *j, ts_status st, const char *msg);

/* Frees the sequences and requests that ended during the step. */
void engine_free_dead(ts_engine *e);

/* ---- sched.c: the step's first stages, in order */

/* Ends every sequence whose request asked to be cancelled. */
void sched_cancel(ts_engine *e);

/* Admits waiting sequences, best effective priority first, while slots and KV blocks
 * allow. */
void sched_admit(ts_engine *e, double now);

/* Decides each running sequence's rows for this step and reserves their KV slots,
 * preempting the worst sequences when the pool runs dry. */
void sched_plan(ts_engine *e, double now);

/* Packs the scheduled rows into b (the sequence of b->seqs[i] is step.order[i]); returns
 * the number of sequences. */
int sched_pack(ts_engine *e, fwd_batch *b);

/* ---- emit.c: the step's stages after the forward pass */

/* Draws the tokens of every sequence of b (n) that samples now into picks, rows in
 * parallel (each thread on its own scratch; a sequence's sampler is its own). */
void emit_sample(ts_engine *e, const fwd_batch *b, int n);

/* Appends each sampled token and emits its text, ending the sequences that are done; the
 * prompt sequence of an n > 1 request whose prompt just finished forks into its n
 * completions, which sample their first tokens from its logits. */
void emit_tokens(ts_engine *e, const fwd_batch *b, int n);

/* ---- step.c */

/* One engine step: cancel, admit, plan, pack, forward, publish, sample, emit, free.
 * Returns false when there was nothing to do. */
bool engine_step(ts_engine *e);

/* Copies the counters and gauges into the snapshot others read. Called with mu held. */
void engine_publish_stats_locked(ts_engine *e);

#endif /* TESSERA_ENGINE_INTERNAL_H */
