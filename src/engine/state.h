/* state.h: the engine's private state, below all of its files. The engine's files form
 * layers, each calling only those below it:
 *   api.c     the public entry points (create, submit, stats, destroy), the step thread
 *   step.c    one step as named stages
 *   sched.c   cancel, admit, plan, pack            emit.c  sample, emit, fork
 *   seq.c     a sequence's life: create, the waiting queue, its text, finish, fail, free
 * The locking rule is in the types: engine_shared only under mu, engine_step_state only on
 * the step thread, the rest of ts_engine fixed at creation. */
#ifndef TESSERA_ENGINE_STATE_H
#define TESSERA_ENGINE_STATE_H

#include <pthread.h>
#include <stdbool.h>

#include "engine/cost.h"
#include "engine/detok.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop.h"
#include "engine/team.h"
#include "grammar/constraint.h"
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

/* Most draft tokens a sequence adds to a step (ts_engine_options.spec_max's bound). */
enum { SPEC_MAX_DRAFT = 64 };

/* A sequence's speculative decoding (spec.c): the step's drafts and its recent acceptance. */
typedef struct spec_seq {
    int32_t draft[SPEC_MAX_DRAFT]; /* this step's draft tokens, verified after the pass */
    int n_draft;                   /* 0: none this step */
    int logits_row0;               /* logits row of the first draft's row */
    int depth;                     /* drafts to propose next (0: not set yet) */
    int misses;                    /* verifications in a row that accepted nothing */
    int rest;                      /* steps left to skip drafting after misses */
    double hits, trials;           /* decayed counts of drafts accepted and of drafts
                                    * decided (accepted, or the one rejected): a draft's
                                    * chance once the one before it was accepted */
    kv_table draft_table;          /* the draft model's K/V of this sequence's leading
                                    * draft_computed tokens (spec_draft.c) */
    int draft_computed;
} spec_seq;

typedef struct spec_drafter spec_drafter;

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
    int n_scored;          /* prompt_logprobs: prompt tokens 1..n_scored have had their
                            * PROMPT event (a recomputed prompt does not repeat them) */
    kv_table table;
    sampler smp;
    uint8_t *dry_bits;     /* (vocab bits) DRY's breaker tokens, which smp borrows; NULL:
                            * DRY off or no breakers */
    detok detok;
    stop_matcher stop;
    ts_schema *schema;     /* a reference of its own to the schema cons walks, or NULL */
    ts_grammar *grammar;   /* a reference of its own to the grammar cons walks, or NULL */
    uint32_t mask_limit;   /* the closing limit mask_bits was computed under ... */
    uint32_t mask_max_cost; /* ... and the largest closing cost among its tokens */
    constraint cons;       /* what the generated text must be (its state so far) */
    uint8_t *mask_bits;    /* (engine_mask_width bits) the allowed tokens of mask_state,
                            * reused while cons allows the same (inside a string, token
                            * after token); NULL when unconstrained */
    constraint mask_state;
    bool mask_valid;
    uint64_t admit_order;  /* latest admitted is preempted first among equals */
    float *pooled;         /* (dim) an embed request's pooled rows so far (engine/pool.h);
                            * NULL for a completion */
    int step_rows;         /* rows scheduled in the current step */
    spec_seq spec;
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
    ts_slot_info *slots;    /* (opts.max_seqs) the busy slots ts_engine_get_slots() copies */
    int n_slots;
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
    token_trie trie;        /* the vocabulary's, built at the first constrained sample */
    bool trie_built;
    uint8_t *allowed;       /* (n_scratch, vocab) a constrained row's allowed tokens */
    seq **dead;             /* finished sequences, freed at the end of the step so that
                             * pointers held during the step stay valid */
    int n_dead, cap_dead;
    job **dead_jobs;        /* finished requests, freed likewise */
    int n_dead_jobs, cap_dead_jobs;
    int allocs_left;        /* fault injection countdown; 0 = off (see fail_alloc_at) */
    uint64_t admit_counter;
    step_cost cost;         /* what steps cost, learnt from their times (sched_plan's budget) */
    team_size team;         /* the threads steps run on, fewer while some lack a core */
    int step_decode;        /* the current step's rows of decoding sequences, those that
                             * generated a token already (sched_pack), drafts included */
    int step_drafts;        /* the current step's draft rows (spec_pack) */
    double step_draft_s;    /* seconds the current step's draft model steps took
                             * (spec_draft_run; in its schedule phase): not the target's
                             * cost, so the cost model does not learn them */
    int plan_full;          /* the batch being filled, as the plan saw it: the prefill
                             * budget's reference (opts.step_log) */
    ts_engine_stats counters; /* cumulative counters, copied into stats after each step */
    spec_drafter *drafter;  /* the draft model's pool and scratch (TS_SPEC_DRAFT), or NULL */
    uint64_t spec_rng;      /* opts.spec_force_accept's draws */
} engine_step_state;

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

/* Bytes of one row of step.allowed: the model's vocabulary or the tokenizer's, the larger. */
static inline int engine_mask_width(const ts_engine *e)
{
    int v = ts_tokenizer_vocab_size(e->model->tokenizer);
    return v > e->model->cfg.vocab_size ? v : e->model->cfg.vocab_size;
}

#endif /* TESSERA_ENGINE_STATE_H */
