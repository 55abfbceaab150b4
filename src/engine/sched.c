/* sched.c: one engine step. Admission by effective priority (level minus aging), the
 * step's rows under a token budget (every decode, then prefill chunks), KV reservation
 * with preemption of the worst sequence when blocks run out, the batched forward pass,
 * prefix-cache publication, and sampling. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "engine/engine_internal.h"

double sched_effective_priority(const ts_engine *e, const seq *s, double now)
{
    const ts_request *r = s->job->req;
    return (double)r->priority - e->opts.aging_per_s * (now - r->submit_time);
}

/* True when a should run before b: better effective priority, then older request, then
 * lower completion index. */
static bool runs_before(const ts_engine *e, const seq *a, const seq *b, double now)
{
    double pa = sched_effective_priority(e, a, now), pb = sched_effective_priority(e, b, now);
    if (pa != pb)
        return pa < pb;
    if (a->job->req->id != b->job->req->id)
        return a->job->req->id < b->job->req->id;
    return a->index < b->index;
}

static int blocks_for(int64_t tokens)
{
    return (int)((tokens + TS_KV_BLOCK - 1) / TS_KV_BLOCK);
}

static void remove_at(seq **arr, int *n, int i)
{
    memmove(arr + i, arr + i + 1, (size_t)(*n - i - 1) * sizeof *arr);
    (*n)--;
}

static int index_of(seq *const *arr, int n, const seq *s)
{
    for (int i = 0; i < n; i++)
        if (arr[i] == s)
            return i;
    return -1;
}

ts_status engine_waiting_add(ts_engine *e, seq *s)
{
    if (!engine_alloc_ok(e)) /* fault injection: any insertion may be the one that grows */
        return TS_ERR_NOMEM;
    if (e->n_waiting == e->cap_waiting) {
        int cap = e->cap_waiting ? 2 * e->cap_waiting : 64;
        seq **grown = realloc(e->waiting, (size_t)cap * sizeof *grown);
        if (!grown)
            return TS_ERR_NOMEM;
        e->waiting = grown;
        e->cap_waiting = cap;
    }
    e->waiting[e->n_waiting++] = s;
    return TS_OK;
}

/* Frees s's blocks and sends it back to the queue to recompute prompt + generated text. */
static void preempt(ts_engine *e, seq *s)
{
    /* Queue it before it leaves the running list: should the queue fail to grow, s is still
     * where engine_fail_request finds and frees it with its job's other sequences. */
    if (engine_waiting_add(e, s) != TS_OK) {
        engine_fail_request(e, s->job, TS_ERR_NOMEM,
                            "out of memory requeueing a preempted request");
        return;
    }
    int i = index_of(e->running, e->n_running, s);
    remove_at(e->running, &e->n_running, i);
    kv_table_release(e->pool, &s->table);
    s->n_computed = 0;
    s->n_published = 0;
    s->step_rows = 0;
    e->counters.preemptions++;
}

/* The running sequence to give up first: worst effective priority, latest admitted. */
static seq *pick_victim(ts_engine *e, double now)
{
    seq *worst = NULL;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (!worst) {
            worst = s;
            continue;
        }
        double ps = sched_effective_priority(e, s, now), pw = sched_effective_priority(e, worst, now);
        if (ps > pw || (ps == pw && s->admit_order > worst->admit_order))
            worst = s;
    }
    return worst;
}

static bool cancel_requested(const seq *s)
{
    return atomic_load(&s->job->req->cancel_requested);
}

/* Ends the waiting sequence at i as cancelled. */
static void cancel_waiting(ts_engine *e, int i)
{
    seq *s = e->waiting[i];
    remove_at(e->waiting, &e->n_waiting, i);
    if (!s->job->admitted_once) {
        pthread_mutex_lock(&e->mu);
        e->n_pending--;
        e->queued[s->job->req->priority]--;
        pthread_mutex_unlock(&e->mu);
        s->job->admitted_once = true;
    }
    engine_finish_seq(e, s, TS_FINISH_CANCELLED);
}

static void cancel_flagged(ts_engine *e)
{
    for (int i = e->n_running - 1; i >= 0; i--) {
        seq *s = e->running[i];
        if (cancel_requested(s)) {
            remove_at(e->running, &e->n_running, i);
            engine_finish_seq(e, s, TS_FINISH_CANCELLED);
        }
    }
    for (int i = e->n_waiting - 1; i >= 0; i--)
        if (cancel_requested(e->waiting[i]))
            cancel_waiting(e, i);
}

/* Slots taken: running sequences, plus the completions that prompt sequences of n > 1
 * requests will fork into once their prompt is done (admission promised them). */
static int slots_in_use(const ts_engine *e)
{
    int used = e->n_running;
    for (int i = 0; i < e->n_running; i++) {
        const job *j = e->running[i]->job;
        if (!j->forked && j->req->n > 1)
            used += j->req->n - 1;
    }
    return used;
}

/* Admits waiting sequences, best first, while slots and KV blocks allow. */
static void admit(ts_engine *e, double now)
{
    while (e->n_waiting > 0) {
        int best = 0;
        for (int i = 1; i < e->n_waiting; i++)
            if (runs_before(e, e->waiting[i], e->waiting[best], now))
                best = i;
        seq *s = e->waiting[best];
        if (cancel_requested(s)) { /* flagged since cancel_flagged: never started */
            cancel_waiting(e, best);
            continue;
        }
        job *j = s->job;
        int slots = (!j->forked && j->req->n > 1) ? j->req->n : 1;
        if (slots_in_use(e) + slots > e->opts.max_seqs)
            break;

        /* Room for the whole prompt and its first generated token, counted as if no
         * block came from the prefix cache: cached blocks it would map are themselves
         * counted as available, so this is the bound that always holds. */
        if (kv_pool_available(e->pool) < blocks_for(s->n_tokens + 1))
            break;
        int64_t matched = 0;
        ts_error err = {0};
        if (e->opts.prefix_cache &&
            kv_prefix_lookup(e->pool, &s->table, s->tokens, s->n_tokens - 1, &matched, &err) != TS_OK)
            matched = 0;
        remove_at(e->waiting, &e->n_waiting, best);
        s->n_computed = (int)matched;
        s->n_published = (int)(matched / TS_KV_BLOCK);
        s->admit_order = ++e->admit_counter;
        e->running[e->n_running++] = s;
        if (!j->admitted_once) {
            j->admitted_once = true;
            j->cached_tokens = (int)matched;
            e->counters.prompt_tokens += (uint64_t)j->req->n_prompt;
            pthread_mutex_lock(&e->mu);
            e->n_pending--;
            e->queued[j->req->priority]--;
            pthread_mutex_unlock(&e->mu);
        }
    }
}

/* Orders the running sequences best first (insertion sort: at most max_seqs, mostly
 * sorted from the last step) into e->step_order. */
static void order_running(ts_engine *e, double now)
{
    seq **o = e->step_order;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        int k = i;
        while (k > 0 && runs_before(e, s, o[k - 1], now)) {
            o[k] = o[k - 1];
            k--;
        }
        o[k] = s;
    }
}

/* Decides each running sequence's rows for this step and reserves their KV slots,
 * preempting the worst sequences when the pool runs dry. */
static void plan_rows(ts_engine *e, double now)
{
    int n_decode = 0;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        s->step_rows = s->n_tokens - s->n_computed;
        if (s->step_rows == 1)
            n_decode++;
    }
    /* Prefill chunks share what the decodes leave of the budget, in admission order;
     * while streams decode, at most prefill_cap prompt tokens join a step. */
    int budget = e->opts.step_tokens - n_decode;
    if (n_decode > 0 && budget > e->opts.prefill_cap)
        budget = e->opts.prefill_cap;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (s->step_rows > 1) {
            s->step_rows = s->step_rows < budget ? s->step_rows : (budget > 0 ? budget : 0);
            budget -= s->step_rows;
        }
    }

    order_running(e, now);
    int n = e->n_running;
    for (int i = 0; i < n; i++) {
        seq *s = e->step_order[i];
        if (s->done || s->step_rows == 0 || index_of(e->running, e->n_running, s) < 0)
            continue; /* failed or preempted earlier in this loop, or no budget left */
        for (;;) {
            int64_t more = s->n_computed + s->step_rows - s->table.n_tokens;
            ts_error err = {0};
            ts_status st = more > 0 ? kv_table_reserve(e->pool, &s->table, more, &err) : TS_OK;
            if (st == TS_OK)
                break;
            if (st != TS_ERR_OUT_OF_BLOCKS) {
                engine_fail_request(e, s->job, st, err.msg);
                break;
            }
            seq *victim = pick_victim(e, now);
            preempt(e, victim);
            if (victim == s || s->done) /* s given up, or failed with the victim's job */
                break;
        }
    }
}

/* Packs the scheduled rows into the forward batch; returns the number of sequences. */
static int pack_batch(ts_engine *e, fwd_batch *b)
{
    int rows = 0, n = 0, n_logits = 0;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (s->step_rows == 0)
            continue;
        memcpy(e->step_tokens + rows, s->tokens + s->n_computed, (size_t)s->step_rows * sizeof(int32_t));
        bool samples = s->n_computed + s->step_rows == s->n_tokens;
        e->step_seqs[n] = (fwd_seq){
            .row0 = rows,
            .n_rows = s->step_rows,
            .pos0 = s->n_computed,
            .table = &s->table,
            .logits_row = samples ? n_logits++ : -1,
        };
        e->step_order[n++] = s;
        rows += s->step_rows;
    }
    *b = (fwd_batch){.n_rows = rows, .tokens = e->step_tokens, .n_seqs = n,
                     .seqs = e->step_seqs, .n_logits = n_logits};
    return n;
}

/* Offers every block that filled up to the prefix cache. */
static void publish_blocks(ts_engine *e, seq *s)
{
    while ((s->n_published + 1) * TS_KV_BLOCK <= s->n_computed) {
        if (e->opts.prefix_cache)
            kv_prefix_publish(e->pool, &s->table, s->n_published,
                              s->tokens + (size_t)s->n_published * TS_KV_BLOCK, NULL, NULL);
        s->n_published++;
    }
}

/* Turns the prompt sequence of an n > 1 request into n sequences sharing its blocks. */
static void fork_completions(ts_engine *e, seq *s)
{
    job *j = s->job;
    j->forked = true;
    if (e->n_running + j->req->n - 1 > e->opts.max_seqs) { /* admission reserved them */
        engine_fail_request(e, j, TS_ERR_INTERNAL, "no batch slots left for the n completions");
        return;
    }
    for (int i = 1; i < j->req->n; i++) {
        seq *c = NULL;
        ts_error err = {0};
        ts_status st = engine_seq_create(e, j, i, s->tokens, s->n_tokens, &c, &err);
        if (st == TS_OK) {
            /* engine_seq_create queued it as waiting: move it to running, sharing blocks. */
            e->n_waiting--;
            st = kv_table_fork(e->pool, &c->table, &s->table, &err);
            c->n_computed = s->n_computed;
            c->n_published = s->n_published;
            c->admit_order = ++e->admit_counter;
            e->running[e->n_running++] = c;
        }
        if (st != TS_OK) {
            engine_fail_request(e, j, st, err.msg);
            return;
        }
    }
}

void engine_publish_stats_locked(ts_engine *e)
{
    kv_stats ks;
    kv_pool_stats(&ks, e->pool);
    ts_engine_stats *st = &e->stats;
    uint64_t submitted = st->requests_submitted;
    *st = e->counters;
    st->requests_submitted = submitted;
    for (int p = 0; p < TS_PRIORITY_COUNT; p++)
        st->queued[p] = e->queued[p];
    st->running = e->n_running;
    st->kv_blocks_total = (int)ks.blocks_total;
    st->kv_blocks_free = (int)ks.blocks_free;
    st->kv_blocks_used = (int)ks.blocks_used;
    st->kv_blocks_cached = (int)ks.blocks_cached;
    st->prefix_lookups = ks.lookups;
    st->prefix_hit_blocks = ks.hit_blocks;
    st->prefix_miss_blocks = ks.missed_blocks;
    st->kv_evictions = ks.evictions;
}

/* Whether s samples straight from its own logits row this step (a request of n > 1
 * whose prompt just finished forks first, and its completions sample after). */
static bool samples_now(const seq *s)
{
    return s->job->forked || s->job->req->n == 1;
}

/* Below this many rows to sample, a parallel region costs more than it saves. */
enum { PARALLEL_SAMPLE_MIN_ROWS = 4 };

/* Draws the tokens of every sequence that samples now into e->picks, by batch index,
 * rows in parallel (each thread on its own scratch; a sequence's sampler is its own). */
static void sample_rows(ts_engine *e, const fwd_batch *b, int n)
{
    int vocab = e->model->cfg.vocab_size, rows = 0;
    for (int i = 0; i < n; i++)
        rows += b->seqs[i].logits_row >= 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->n_scratch) \
    if (rows >= PARALLEL_SAMPLE_MIN_ROWS)
    for (int i = 0; i < n; i++) {
        seq *s = e->step_order[i];
        const fwd_seq *fs = &b->seqs[i];
        if (fs->logits_row < 0 || s->done || !samples_now(s))
            continue;
        engine_sample(s, e->fwd.logits + (size_t)fs->logits_row * vocab,
                      &e->scratch[omp_get_thread_num()], &e->picks[i]);
    }
}

/* Adds a step's phase times (the forward pass's from e->fwd, which is reset) to the
 * profile of its kind. */
static void profile_step(ts_engine *e, const fwd_batch *b, double t_start, double t_packed,
                         double t_end)
{
    ts_step_profile *p =
        b->n_rows > b->n_seqs ? &e->counters.prompt_steps : &e->counters.decode_steps;
    double *fs = e->fwd.seconds;
    double forward = 0.0;
    for (int i = 0; i < TS_PHASE_COUNT; i++) {
        p->seconds[i] += fs[i];
        forward += fs[i];
        fs[i] = 0.0;
    }
    p->seconds[TS_PHASE_SCHEDULE] += t_packed - t_start;
    p->seconds[TS_PHASE_EMIT] += t_end - t_packed - forward;
    p->steps++;
    p->rows += (uint64_t)b->n_rows;
}

bool engine_step(ts_engine *e)
{
    double now = clock_now_s();
    cancel_flagged(e);
    admit(e, now);
    plan_rows(e, now);

    fwd_batch batch;
    int n = pack_batch(e, &batch);
    double t_packed = clock_now_s();
    if (n > 0) {
        ts_error err = {0};
        ts_status st = forward_batch(&e->fwd, e->model, e->pool, e->kernels, &batch, &err);
        e->counters.steps++;
        for (int i = 0; i < n; i++) {
            seq *s = e->step_order[i];
            if (st != TS_OK) {
                if (!s->done)
                    engine_fail_request(e, s->job, st, err.msg);
                continue;
            }
            if (s->done)
                continue;
            s->n_computed += s->step_rows;
            publish_blocks(e, s);
        }
        if (st == TS_OK) {
            int vocab = e->model->cfg.vocab_size;
            sample_rows(e, &batch, n);
            for (int i = 0; i < n; i++) {
                seq *s = e->step_order[i];
                const fwd_seq *fs = &batch.seqs[i];
                if (fs->logits_row < 0 || s->done)
                    continue;
                float *row = e->fwd.logits + (size_t)fs->logits_row * vocab;
                if (samples_now(s)) {
                    engine_emit(e, s, &e->picks[i]);
                    continue;
                }
                /* The prompt is done: make the n completions, each sampling its own
                 * first token from a copy of the prompt's logits. */
                job *j = s->job;
                fork_completions(e, s);
                seq *mine[TS_MAX_N];
                int n_mine = 0;
                for (int k = 0; k < e->n_running && n_mine < TS_MAX_N; k++)
                    if (e->running[k]->job == j)
                        mine[n_mine++] = e->running[k];
                for (int k = 0; k < n_mine; k++) {
                    if (mine[k]->done)
                        continue;
                    memcpy(e->logits_copy, row, (size_t)vocab * sizeof(float));
                    sampled pick;
                    engine_sample(mine[k], e->logits_copy, &e->scratch[0], &pick);
                    engine_emit(e, mine[k], &pick);
                }
            }
        }
    }
    engine_free_dead(e);
    if (n > 0)
        profile_step(e, &batch, now, t_packed, clock_now_s());
    pthread_mutex_lock(&e->mu);
    engine_publish_stats_locked(e);
    pthread_mutex_unlock(&e->mu);
    return n > 0;
}
