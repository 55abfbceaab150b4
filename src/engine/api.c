/* api.c: the top of the engine: its public entry points (options, create, submit, wait,
 * stats, destroy) and the step thread's loop, which runs engine_step (step.c). */
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "engine/seq.h"
#include "engine/spec.h"
#include "engine/spec_draft.h"
#include "engine/step.h"

/* OpenBLAS's OpenMP build reads its thread count from here. */
void openblas_set_num_threads(int num_threads);

enum { DEFAULT_KV_CAP_BYTES = 1 << 30 };

_Static_assert((int)TS_GEMM_AUTO == (int)FWD_GEMM_AUTO && (int)TS_GEMM_BLAS == (int)FWD_GEMM_BLAS &&
                   (int)TS_GEMM_KERNEL == (int)FWD_GEMM_KERNEL,
               "ts_gemm_path names fwd_gemm_path's values");
_Static_assert(TS_KV_BLOCK_TOKENS == TS_KV_BLOCK, "engine.h states the KV block size");

void ts_engine_options_default(ts_engine_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_seqs = 64;
    o->step_tokens = 0; /* by model: ts_engine_step_tokens */
    o->prefill_cap = 128;
    o->itl_target = 1.5;
    o->prefill_min = 32;
    o->max_queue = 1024;
    o->aging_per_s = 0.1;
    o->prefix_cache = true;
    o->spec_max = 8;
    o->spec_rows = 16;
}

int ts_engine_step_tokens(const ts_engine_options *opts, const ts_model *model)
{
    if (opts->step_tokens > 0)
        return opts->step_tokens;
    return model->cfg.encoder ? 4096 : 512;
}

void ts_request_params_default(ts_request_params *p)
{
    memset(p, 0, sizeof *p);
    p->max_tokens = 16;
    p->sampling = ts_sampling_params_default();
    p->priority = TS_PRIORITY_NORMAL;
    p->n = 1;
}

const char *ts_step_phase_name(ts_step_phase phase)
{
    static const char *const names[TS_PHASE_COUNT] = {
        [TS_PHASE_SCHEDULE] = "schedule", [TS_PHASE_ROWWISE] = "rowwise",
        [TS_PHASE_GEMM] = "gemm",         [TS_PHASE_ATTENTION] = "attention",
        [TS_PHASE_LM_HEAD] = "lm_head",   [TS_PHASE_EMIT] = "emit",
    };
    return (unsigned)phase < TS_PHASE_COUNT ? names[phase] : "unknown";
}

const ts_model *ts_engine_get_model(const ts_engine *e)
{
    return e->model;
}

ts_kv_type ts_engine_kv_type(const ts_engine *e)
{
    return e->opts.kv_type;
}

/* Sizes the KV pool: explicit bytes, explicit blocks, or enough for max_seqs full
 * contexts capped at DEFAULT_KV_CAP_BYTES. */
static ts_status create_pool(ts_engine *e, ts_error *err)
{
    const ts_model_config *c = &e->model->cfg;
    if (e->opts.kv_type == TS_KV_AUTO)
        e->opts.kv_type = model_all_f32(&e->model->w) ? TS_KV_F32 : TS_KV_F16;
    kv_config kc = {
        .n_layers = c->n_layers,
        .n_kv_heads = c->n_kv_heads,
        .head_dim = c->head_dim,
        .dtype = e->opts.kv_type == TS_KV_Q8_0  ? KV_DTYPE_Q8_0
                 : e->opts.kv_type == TS_KV_F16 ? KV_DTYPE_F16
                                                : KV_DTYPE_F32,
        .n_blocks = e->opts.kv_blocks,
        .mem_bytes = e->opts.kv_mem_bytes,
        .to_f16 = e->kernels->f32_to_f16,
    };
    if (kc.mem_bytes == 0 && kc.n_blocks <= 0 && c->encoder) {
        kc.n_blocks = 1; /* an encoder keeps no K/V: a token pool */
    } else if (kc.mem_bytes == 0 && kc.n_blocks <= 0) {
        size_t per_block = kv_block_bytes(&kc);
        /* A sequence of a full context may need one block more than the context's (a
         * prompt and its completion each end in a partial block) and admission counts one
         * block of slack per completion (worst_case_blocks): each sequence gets two more,
         * and the 1 GiB cap never cuts the pool below one full context. */
        int64_t one = engine_blocks_for(c->context_len) + 2;
        int64_t want = (int64_t)e->opts.max_seqs * one;
        int64_t cap = per_block ? (int64_t)(DEFAULT_KV_CAP_BYTES / per_block) : 0;
        kc.n_blocks = want < cap ? want : cap;
        if (kc.n_blocks < one)
            kc.n_blocks = one;
    }
    return kv_pool_init(&e->step.pool, &kc, err);
}

static void *engine_thread(void *arg);

/* The draft model's state when opts.spec asks for one, after its vocabulary is checked. */
static ts_status create_drafter(ts_engine *e, ts_error *err)
{
    if (e->opts.spec != TS_SPEC_DRAFT)
        return TS_OK;
    if (!e->opts.draft_model)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "speculation by a draft model needs a draft model (--draft-model)");
    ts_status st = spec_draft_check_vocab(e->model, e->opts.draft_model, err);
    return st != TS_OK ? st : spec_draft_create(e, err);
}

/* A sampler scratch for each thread the step may sample on (--threads, else OpenMP's
 * default team size), and the step's table of picks. */
static ts_status init_scratch(ts_engine *e, ts_error *err)
{
    int n = e->opts.n_threads > 0 ? e->opts.n_threads : omp_get_max_threads();
    e->step.scratch = calloc((size_t)n, sizeof *e->step.scratch);
    e->step.picks = malloc((size_t)e->opts.max_seqs * sizeof *e->step.picks);
    if (!e->step.scratch || !e->step.picks)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for %d sampler scratches", n);
    for (; e->step.n_scratch < n; e->step.n_scratch++) {
        ts_status st =
            sampler_scratch_init(&e->step.scratch[e->step.n_scratch], e->model->cfg.vocab_size,
                                 err);
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

/* opts.spec_script: as many tokens as it says, each an id of model's vocabulary. */
static ts_status check_script(const ts_engine_options *o, const ts_model *model, ts_error *err)
{
    if (o->n_spec_script == 0)
        return TS_OK;
    if (o->n_spec_script < 0 || o->n_spec_script > (1 << 20) || !o->spec_script)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the scripted output has %d tokens%s",
                            o->n_spec_script, o->spec_script ? "" : " and no array");
    for (int i = 0; i < o->n_spec_script; i++)
        if (o->spec_script[i] < 0 || o->spec_script[i] >= model->cfg.vocab_size)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "the scripted output's token %d is %d, outside the "
                                "vocabulary of %d", i, (int)o->spec_script[i],
                                model->cfg.vocab_size);
    return TS_OK;
}

ts_status ts_engine_create(const ts_model *model, const ts_engine_options *opts,
                           ts_engine **out, ts_error *err)
{
    *out = NULL;
    ts_status st;
    ts_engine *e = calloc(1, sizeof *e);
    if (!e)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for an engine");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->shared.cv, NULL);
    clock_cond_init(&e->shared.idle_cv);
    e->model = model;
    if (opts)
        e->opts = *opts;
    else
        ts_engine_options_default(&e->opts);
    const ts_engine_options *o = &e->opts;
    if (o->max_seqs < 1 || o->max_seqs > 4096 || o->step_tokens < 0 || o->prefill_cap < 1 ||
        o->max_queue < 1 || !(o->itl_target >= 0 && o->itl_target <= 1000) ||
        o->prefill_min < 0 ||
        o->aging_per_s < 0 || o->n_threads < 0 || (unsigned)o->gemm > TS_GEMM_KERNEL ||
        (unsigned)o->kv_type > TS_KV_Q8_0 || (unsigned)o->spec > TS_SPEC_DRAFT ||
        o->spec_max < 1 || o->spec_max > SPEC_MAX_DRAFT || o->spec_rows < 0 ||
        o->spec_rows > 4096 || o->spec_draft_vocab < 0 ||
        !(o->spec_force_accept >= 0 && o->spec_force_accept <= 1)) {
        st = ts_error_set(err, TS_ERR_INVALID_ARG,
                          "engine options out of range (max_seqs %d, step_tokens %d, max_queue "
                          "%d, kv_type %d)",
                          o->max_seqs, o->step_tokens, o->max_queue, (int)o->kv_type);
        goto fail;
    }
    e->opts.step_tokens = ts_engine_step_tokens(o, model); /* from here on, the budget */
    if ((st = check_script(o, model, err)) != TS_OK)
        goto fail;
    e->kernels = simd_init();
    e->step.allocs_left = o->fail_alloc_at;
    cost_init(&e->step.cost);
    /* Every running sequence may decode while prefill chunks fill the token budget. */
    e->max_rows = o->step_tokens + o->max_seqs;
    /* An encoder's input over the budget runs whole in a step of its own (sched_plan). */
    if (model->cfg.encoder)
        e->max_rows += model->cfg.context_len;
    /* Draft rows (spec.h) ride on top, each with logits of its own. */
    int draft_rows = spec_rows_cap(o);
    e->max_rows += draft_rows;
    if ((st = create_pool(e, err)) != TS_OK ||
        (st = fwd_state_init(&e->step.fwd, model, e->max_rows, o->max_seqs + draft_rows,
                             err)) != TS_OK ||
        (st = init_scratch(e, err)) != TS_OK || (st = create_drafter(e, err)) != TS_OK)
        goto fail;
    e->step.fwd.gemm_path = (fwd_gemm_path)o->gemm;
    e->step.running = calloc((size_t)o->max_seqs, sizeof *e->step.running);
    e->shared.slots = calloc((size_t)o->max_seqs, sizeof *e->shared.slots);
    e->step.tokens = malloc((size_t)e->max_rows * sizeof *e->step.tokens);
    e->step.seqs = malloc((size_t)o->max_seqs * sizeof *e->step.seqs);
    e->step.order = malloc((size_t)o->max_seqs * sizeof *e->step.order);
    e->step.logits_copy = malloc((size_t)model->cfg.vocab_size * sizeof(float));
    e->step.allowed = malloc((size_t)e->step.n_scratch * (size_t)engine_mask_width(e));
    if (!e->step.running || !e->shared.slots || !e->step.tokens || !e->step.seqs ||
        !e->step.order || !e->step.logits_copy || !e->step.allowed) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for engine buffers");
        goto fail;
    }
    kv_stats ks;
    kv_pool_stats(&ks, e->step.pool);
    e->kv_blocks_total = (int)ks.blocks_total;
    e->shared.stats.kv_blocks_total = (int)ks.blocks_total;
    e->shared.stats.kv_blocks_free = (int)ks.blocks_free;
    if (pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
        st = ts_error_set(err, TS_ERR_INTERNAL, "cannot start the engine thread");
        goto fail;
    }
    e->thread_started = true;
    *out = e;
    return TS_OK;

fail:
    ts_engine_destroy(e);
    return st;
}

/* Fails every request still held (shutdown): queued ones, waiting and running. */
static void drain_all(ts_engine *e)
{
    static const char bye[] = "the engine is shutting down";
    pthread_mutex_lock(&e->mu);
    int n_inbox = e->shared.n_inbox;
    e->shared.n_inbox = 0;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n_inbox; i++)
        engine_fail_request(e, e->shared.inbox[i], TS_ERR_SHUTDOWN, bye);
    while (e->step.n_running > 0)
        engine_fail_request(e, e->step.running[0]->job, TS_ERR_SHUTDOWN, bye);
    while (e->step.n_waiting > 0)
        engine_fail_request(e, e->step.waiting[0]->job, TS_ERR_SHUTDOWN, bye);
}

void ts_engine_destroy(ts_engine *e)
{
    if (!e)
        return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->shared.stopping = true;
        pthread_cond_broadcast(&e->shared.cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    drain_all(e);
    engine_free_dead(e);
    free(e->step.dead);
    free(e->step.dead_jobs);
    free(e->shared.inbox);
    free(e->step.waiting);
    free(e->step.running);
    free(e->shared.slots);
    free(e->step.tokens);
    free(e->step.seqs);
    free(e->step.order);
    free(e->step.logits_copy);
    free(e->step.allowed);
    token_trie_free(&e->step.trie);
    for (int i = 0; i < e->step.n_scratch; i++)
        sampler_scratch_free(&e->step.scratch[i]);
    free(e->step.scratch);
    free(e->step.picks);
    spec_draft_destroy(e);
    fwd_state_free(&e->step.fwd);
    kv_pool_free(e->step.pool);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->shared.cv);
    pthread_cond_destroy(&e->shared.idle_cv);
    free(e);
}

/* The most KV blocks a request can hold at once: its prompt's, and for each completion
 * its new tokens' plus one (its first tokens may go into a copy of the prompt's partly
 * filled last block). ts_engine_submit refuses a request past the pool by this count
 * and ts_engine_max_new_tokens inverts it. */
static int64_t worst_case_blocks(size_t n_prompt, int n, int max_tokens)
{
    return engine_blocks_for((int64_t)n_prompt) +
           (int64_t)n * (engine_blocks_for(max_tokens) + 1);
}

int ts_engine_max_new_tokens(const ts_engine *e, size_t n_prompt, int n)
{
    if (n < 1)
        return 0;
    /* The largest whole number of blocks per completion, each block's tokens in full:
     * worst_case_blocks(n_prompt, n, max) <= the pool < that of max + 1. */
    int64_t per = ((int64_t)e->kv_blocks_total - engine_blocks_for((int64_t)n_prompt)) / n - 1;
    if (per < 1)
        return 0;
    int64_t max = per * TS_KV_BLOCK;
    return max < INT_MAX ? (int)max : INT_MAX / TS_KV_BLOCK * TS_KV_BLOCK;
}

/* Refuses, with the numbers, an embed request that could never run: a model that does
 * not pool, an input over the context or the pool. */
static ts_status check_embed_fits(const ts_engine *e, const ts_request_params *p,
                                  ts_error *err)
{
    const ts_model_config *c = &e->model->cfg;
    /* an encoder reranker's embed request is a (query, document) pair's scores */
    if (c->pooling == TS_POOLING_NONE || (c->pooling == TS_POOLING_RANK && !c->encoder))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "the model does not pool its hidden states (%s.pooling_type is "
                            "%s): it serves no embeddings", c->arch,
                            c->pooling == TS_POOLING_RANK ? "rank" : "none or absent");
    if (p->n_prompt > (size_t)c->context_len)
        return ts_error_set(err, TS_ERR_TOO_LONG,
                            "input of %zu tokens exceeds the context length %d", p->n_prompt,
                            c->context_len);
    /* admission's bound: the input and one slot more, as for a prompt (sched_admit); an
     * encoder keeps no KV */
    int64_t need = engine_blocks_for((int64_t)p->n_prompt + 1);
    if (!c->encoder && need > e->kv_blocks_total)
        return ts_error_set(err, TS_ERR_TOO_LONG,
                            "input of %zu tokens needs %lld KV blocks; the pool has %d",
                            p->n_prompt, (long long)need, e->kv_blocks_total);
    return TS_OK;
}

/* Refuses, with the numbers, a request that could never run. */
static ts_status check_fits(const ts_engine *e, const ts_request_params *p, ts_error *err)
{
    const ts_model_config *c = &e->model->cfg;
    if (p->embed && p->prompt && p->n_prompt > 0) {
        if ((unsigned)p->priority >= TS_PRIORITY_COUNT)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "unknown priority %d", (int)p->priority);
        for (size_t i = 0; i < p->n_prompt; i++)
            if (p->prompt[i] < 0 || p->prompt[i] >= c->vocab_size)
                return ts_error_set(err, TS_ERR_INVALID_ARG,
                                    "input token %d at index %zu is outside the vocabulary of %d",
                                    p->prompt[i], i, c->vocab_size);
        return check_embed_fits(e, p, err);
    }
    if (c->encoder) /* no LM head: nothing to sample or score; the request's fault (400) */
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "the model is an encoder (%s): it serves embeddings%s, not "
                            "completions", c->arch,
                            c->pooling == TS_POOLING_RANK ? " and reranking" : "");
    if (!p->prompt || p->n_prompt == 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the prompt is empty");
    if (p->max_tokens < 1 && !(p->max_tokens == 0 && p->prompt_logprobs && p->n == 1))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "max_tokens must be at least 1, or 0 to score the prompt of one "
                            "completion (got %d)", p->max_tokens);
    if (p->n < 1 || p->n > TS_MAX_N)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "n must be in 1..%d (got %d)", TS_MAX_N, p->n);
    if (p->n > e->opts.max_seqs)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "n = %d exceeds max_seqs %d", p->n,
                            e->opts.max_seqs);
    if (p->n_stop < 0 || p->n_stop > TS_MAX_STOP)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "at most %d stop strings (got %d)",
                            TS_MAX_STOP, p->n_stop);
    if (p->constraint != TS_CONSTRAINT_NONE && p->constraint != TS_CONSTRAINT_JSON_OBJECT &&
        p->constraint != TS_CONSTRAINT_JSON_SCHEMA && p->constraint != TS_CONSTRAINT_GRAMMAR)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "unknown constraint %d", (int)p->constraint);
    if (p->constraint == TS_CONSTRAINT_JSON_SCHEMA && !p->schema)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "a JSON-schema constraint needs a schema");
    if (p->constraint == TS_CONSTRAINT_GRAMMAR && !p->grammar)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "a grammar constraint needs a grammar");
    if ((unsigned)p->priority >= TS_PRIORITY_COUNT)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "unknown priority %d", (int)p->priority);
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= c->vocab_size)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "prompt token %d at index %zu is outside the vocabulary of %d",
                                p->prompt[i], i, c->vocab_size);
    if (p->n_prompt + (size_t)p->max_tokens > (size_t)c->context_len)
        return ts_error_set(err, TS_ERR_TOO_LONG,
                            "prompt of %zu tokens + max_tokens %d exceeds the context length %d",
                            p->n_prompt, p->max_tokens, c->context_len);
    int64_t need = worst_case_blocks(p->n_prompt, p->n, p->max_tokens);
    if (need > e->kv_blocks_total)
        return ts_error_set(err, TS_ERR_TOO_LONG,
                            "prompt of %zu tokens + %d x %d new tokens needs %lld KV blocks; "
                            "the pool has %d",
                            p->n_prompt, p->n, p->max_tokens, (long long)need,
                            e->kv_blocks_total);
    ts_error serr;
    if (ts_sampling_params_check_vocab(&p->sampling, c->vocab_size, NULL, &serr) != TS_OK)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "%s", serr.msg);
    for (int i = 0; i < p->n_stop; i++) {
        size_t len = p->stop[i] ? strlen(p->stop[i]) : 0;
        if (len == 0 || len > TS_MAX_STOP_LEN)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "stop string %d must have 1..%d bytes", i, TS_MAX_STOP_LEN);
    }
    return TS_OK;
}

ts_status ts_engine_submit(ts_engine *e, const ts_request_params *p, ts_request **out,
                           ts_error *err)
{
    *out = NULL;
    ts_status st = check_fits(e, p, err);
    if (st != TS_OK)
        return st;
    job *j = calloc(1, sizeof *j);
    if (!j)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a request");

    pthread_mutex_lock(&e->mu);
    if (e->shared.stopping) {
        st = ts_error_set(err, TS_ERR_SHUTDOWN, "the engine is shutting down");
    } else if (e->shared.n_pending >= e->opts.max_queue) {
        st = ts_error_set(err, TS_ERR_QUEUE_FULL,
                          "the request queue is full: %d requests are already waiting; retry",
                          e->shared.n_pending);
    } else if (e->shared.n_inbox == e->shared.cap_inbox) {
        int cap = e->shared.cap_inbox ? 2 * e->shared.cap_inbox : 16;
        job **grown = realloc(e->shared.inbox, (size_t)cap * sizeof *grown);
        if (grown) {
            e->shared.inbox = grown;
            e->shared.cap_inbox = cap;
        } else {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory queueing a request");
        }
    }
    if (st == TS_OK)
        st = request_create(p, e->shared.next_id, clock_now_s(), &j->req, err);
    if (st == TS_OK) {
        e->shared.next_id++;
        e->shared.inbox[e->shared.n_inbox++] = j;
        e->shared.n_pending++;
        e->shared.queued[p->priority]++;
        e->shared.stats.queued[p->priority]++;
        e->shared.stats.requests_submitted++;
        pthread_cond_signal(&e->shared.cv);
        *out = j->req;
    }
    pthread_mutex_unlock(&e->mu);
    if (st != TS_OK)
        free(j);
    return st;
}

ts_status ts_engine_wait_idle(ts_engine *e, int timeout_ms)
{
    struct timespec deadline = {0}; /* read only when timeout_ms > 0 */
    if (timeout_ms > 0)
        deadline = clock_deadline(timeout_ms);
    ts_status st = TS_OK;
    pthread_mutex_lock(&e->mu);
    while (!e->shared.idle || e->shared.n_inbox > 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&e->shared.idle_cv, &e->mu);
        } else if (timeout_ms == 0 ||
                   pthread_cond_timedwait(&e->shared.idle_cv, &e->mu, &deadline) == ETIMEDOUT) {
            st = e->shared.idle && e->shared.n_inbox == 0 ? TS_OK : TS_ERR_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

void ts_engine_get_stats(ts_engine *e, ts_engine_stats *stats)
{
    pthread_mutex_lock(&e->mu);
    *stats = e->shared.stats;
    pthread_mutex_unlock(&e->mu);
}

/* Moves submitted jobs into the waiting queue as their first sequence. Called with mu. */
static void take_inbox(ts_engine *e)
{
    for (int i = 0; i < e->shared.n_inbox; i++) {
        job *j = e->shared.inbox[i];
        seq *s = NULL;
        ts_error err = {0};
        ts_status st = engine_seq_create(e, j, 0, j->req->prompt, j->req->n_prompt, &s, &err);
        if (st != TS_OK) {
            e->shared.n_pending--;
            e->shared.queued[j->req->priority]--;
            j->admitted_once = true;
            engine_fail_request(e, j, st, err.msg);
        }
    }
    e->shared.n_inbox = 0;
}

static void *engine_thread(void *arg)
{
    ts_engine *e = arg;
    if (e->opts.n_threads > 0) {
        omp_set_num_threads(e->opts.n_threads);
        openblas_set_num_threads(e->opts.n_threads);
    }
    /* Every page of the pool committed before the first step, on the engine's own
     * threads: the memory is committed at start-up (an overcommitted machine fails now,
     * not in the middle of a request), and no step pays for first-touch page faults, which
     * took most of the K/V store time of a 16-stream decode step in `tessera bench` on the
     * 16-core VM. */
    kv_pool_prefault(e->step.pool);
    team_init(&e->step.team, omp_get_max_threads(), clock_now_s());
    e->step.counters.threads = e->step.team.n;
    pthread_mutex_lock(&e->mu);
    while (!e->shared.stopping) {
        take_inbox(e);
        if (e->step.n_running == 0 && e->step.n_waiting == 0) {
            engine_publish_stats_locked(e); /* requests refused by take_inbox */
            e->shared.idle = true;
            pthread_cond_broadcast(&e->shared.idle_cv);
            pthread_cond_wait(&e->shared.cv, &e->mu);
            e->shared.idle = false;
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        engine_step(e);
        pthread_mutex_lock(&e->mu);
    }
    e->shared.idle = true; /* stopping: no waiter may block past the end */
    pthread_cond_broadcast(&e->shared.idle_cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}
