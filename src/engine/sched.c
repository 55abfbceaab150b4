/* sched.c: the step's stages before the forward pass: cancellation, admission by
 * effective priority (level minus aging), the step's rows under a token budget (every
 * decode, then prefill chunks sized by the step cost model), KV reservation with
 * preemption of the worst sequence when blocks run out, and packing the rows into the
 * forward batch. */
#include <string.h>

#include "engine/sched.h"
#include "engine/seq.h"

/* Effective priority of a waiting or running sequence: its level minus what it gained by
 * waiting (aging). Lower runs first. */
static double effective_priority(const ts_engine *e, const seq *s, double now)
{
    const ts_request *r = s->job->req;
    return (double)r->priority - e->opts.aging_per_s * (now - r->submit_time);
}

/* True when a should run before b: better effective priority, then older request, then
 * lower completion index. */
static bool runs_before(const ts_engine *e, const seq *a, const seq *b, double now)
{
    double pa = effective_priority(e, a, now), pb = effective_priority(e, b, now);
    if (pa != pb)
        return pa < pb;
    if (a->job->req->id != b->job->req->id)
        return a->job->req->id < b->job->req->id;
    return a->index < b->index;
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
    int i = engine_seq_find(e->step.running, e->step.n_running, s);
    engine_seq_remove_at(e->step.running, &e->step.n_running, i);
    kv_table_release(e->step.pool, &s->table);
    s->n_computed = 0;
    s->n_published = 0;
    s->step_rows = 0;
    e->step.counters.preemptions++;
}

/* The running sequence to give up first: worst effective priority, latest admitted. */
static seq *pick_victim(ts_engine *e, double now)
{
    seq *worst = NULL;
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        if (!worst) {
            worst = s;
            continue;
        }
        double ps = effective_priority(e, s, now), pw = effective_priority(e, worst, now);
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
    seq *s = e->step.waiting[i];
    engine_seq_remove_at(e->step.waiting, &e->step.n_waiting, i);
    if (!s->job->admitted_once) {
        pthread_mutex_lock(&e->mu);
        e->shared.n_pending--;
        e->shared.queued[s->job->req->priority]--;
        pthread_mutex_unlock(&e->mu);
        s->job->admitted_once = true;
    }
    engine_finish_seq(e, s, TS_FINISH_CANCELLED);
}

void sched_cancel(ts_engine *e)
{
    for (int i = e->step.n_running - 1; i >= 0; i--) {
        seq *s = e->step.running[i];
        if (cancel_requested(s)) {
            engine_seq_remove_at(e->step.running, &e->step.n_running, i);
            engine_finish_seq(e, s, TS_FINISH_CANCELLED);
        }
    }
    for (int i = e->step.n_waiting - 1; i >= 0; i--)
        if (cancel_requested(e->step.waiting[i]))
            cancel_waiting(e, i);
}

/* Slots taken: running sequences, plus the completions that prompt sequences of n > 1
 * requests will fork into once their prompt is done (admission promised them). */
static int slots_in_use(const ts_engine *e)
{
    int used = e->step.n_running;
    for (int i = 0; i < e->step.n_running; i++) {
        const job *j = e->step.running[i]->job;
        if (!j->forked && j->req->n > 1)
            used += j->req->n - 1;
    }
    return used;
}

void sched_admit(ts_engine *e, double now)
{
    while (e->step.n_waiting > 0) {
        int best = 0;
        for (int i = 1; i < e->step.n_waiting; i++)
            if (runs_before(e, e->step.waiting[i], e->step.waiting[best], now))
                best = i;
        seq *s = e->step.waiting[best];
        if (cancel_requested(s)) { /* flagged since sched_cancel: never started */
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
        if (!e->model->cfg.encoder && /* an encoder reserves no KV (sched_plan) */
            kv_pool_available(e->step.pool) < engine_blocks_for(s->n_tokens + 1))
            break;
        int64_t matched = 0;
        ts_error err = {0};
        if (e->opts.prefix_cache && !engine_seq_scores(s) &&
            !j->req->embed && /* an embedding pools every row */
            kv_prefix_lookup(e->step.pool, &s->table, s->tokens, s->n_tokens - 1, &matched,
                             &err) != TS_OK)
            matched = 0;
        engine_seq_remove_at(e->step.waiting, &e->step.n_waiting, best);
        s->n_computed = (int)matched;
        s->n_published = (int)(matched / TS_KV_BLOCK);
        s->admit_order = ++e->step.admit_counter;
        e->step.running[e->step.n_running++] = s;
        if (!j->admitted_once) {
            j->admitted_once = true;
            j->cached_tokens = (int)matched;
            e->step.counters.prompt_tokens += (uint64_t)j->req->n_prompt;
            pthread_mutex_lock(&e->mu);
            e->shared.n_pending--;
            e->shared.queued[j->req->priority]--;
            pthread_mutex_unlock(&e->mu);
        }
    }
}

/* Orders the running sequences best first (insertion sort: at most max_seqs, mostly
 * sorted from the last step) into e->step.order. */
static void order_running(ts_engine *e, double now)
{
    seq **o = e->step.order;
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        int k = i;
        while (k > 0 && runs_before(e, s, o[k - 1], now)) {
            o[k] = o[k - 1];
            k--;
        }
        o[k] = s;
    }
}

/* Prompt rows of a step with n_decode decode rows. Decodes always go, whatever prompts
 * wait: a decoding sequence is in every step. A step with nothing to decode takes the whole
 * token budget. Otherwise the cost model sizes the chunk so the step lasts at most
 * itl_target times a step that decodes the batch being filled (the running and waiting
 * sequences, up to max_seqs) alone, never under prefill_min nor over prefill_cap; with
 * itl_target 0, or while the model has seen too few steps, prefill_cap tokens. The cap
 * bounds the model's first guesses when a burst of requests arrives: the first steps that
 * decode a few of them estimated the full batch's decode step from steps of other shapes,
 * 34% high on a 2-core machine, and took a chunk that held those few decoders 1.9x a
 * full decode step. */
static int prefill_budget(ts_engine *e, int n_decode)
{
    const ts_engine_options *o = &e->opts;
    int full = e->step.n_running + e->step.n_waiting;
    full = full < o->max_seqs ? full : o->max_seqs;
    e->step.plan_full = full;
    int room = o->step_tokens - n_decode;
    if (n_decode == 0 || room <= 0)
        return room;
    int cap = o->prefill_cap < room ? o->prefill_cap : room;
    int rows = -1;
    if (o->itl_target > 0) {
        int min_rows = o->prefill_min > 1 ? o->prefill_min : 1;
        rows = cost_prefill_budget(&e->step.cost, n_decode, full, o->itl_target, min_rows, cap);
    }
    return rows < 0 ? cap : rows;
}

/* An encoder's sequence is computed whole in one step (its rows attend to each other):
 * all its rows where the budget holds them, or where it is the step's first prompt (an
 * input longer than the budget runs alone over it rather than never), else none. */
static int whole_rows(int rows, int budget, bool first)
{
    return rows <= budget || first ? rows : 0;
}

/* A sequence that scores prompt rows gets a logits row for each (fwd_seq.all_logits):
 * its chunk is cut so the step's logits rows, one for each other sequence, stay within
 * max_seqs, the forward pass's bound. */
static void cap_scored_rows(ts_engine *e)
{
    int room = e->opts.max_seqs - e->step.n_running;
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        if (!engine_seq_scores(s) || s->step_rows <= 1)
            continue;
        s->step_rows = s->step_rows < 1 + room ? s->step_rows : 1 + room;
        room -= s->step_rows - 1;
    }
}

void sched_plan(ts_engine *e, double now)
{
    int n_decode = 0;
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        s->step_rows = s->n_tokens - s->n_computed;
        if (s->step_rows == 1)
            n_decode++;
    }
    /* Prefill chunks share what the decodes leave of the budget, in admission order. */
    int budget = prefill_budget(e, n_decode);
    bool first = true;
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        if (s->step_rows > 1) {
            s->step_rows = e->model->cfg.encoder ? whole_rows(s->step_rows, budget, first)
                           : s->step_rows < budget ? s->step_rows
                                                   : (budget > 0 ? budget : 0);
            budget -= s->step_rows;
            first &= s->step_rows == 0;
        }
    }
    cap_scored_rows(e);

    order_running(e, now);
    int n = e->step.n_running;
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        if (s->done || s->step_rows == 0 || e->model->cfg.encoder ||
            engine_seq_find(e->step.running, e->step.n_running, s) < 0)
            continue; /* failed or preempted earlier in this loop, or no budget left; an
                       * encoder's pass reads its rows from the step, not from KV blocks */
        for (;;) {
            int64_t more = s->n_computed + s->step_rows - s->table.n_tokens;
            ts_error err = {0};
            ts_status st = more > 0 ? kv_table_reserve(e->step.pool, &s->table, more, &err) : TS_OK;
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

int sched_pack(ts_engine *e, fwd_batch *b)
{
    int rows = 0, n = 0, n_logits = 0, n_pooled = 0, n_decode = 0;
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        if (s->step_rows == 0)
            continue;
        memcpy(e->step.tokens + rows, s->tokens + s->n_computed,
               (size_t)s->step_rows * sizeof(int32_t));
        bool embeds = s->job->req->embed;
        bool samples = !embeds && s->n_computed + s->step_rows == s->n_tokens;
        bool all = engine_seq_scores(s);
        if (all)
            n_logits += s->step_rows;
        e->step.seqs[n] = (fwd_seq){
            .row0 = rows,
            .n_rows = s->step_rows,
            .pos0 = s->n_computed,
            .table = &s->table,
            .logits_row = all ? n_logits - 1 : samples ? n_logits++ : -1,
            .all_logits = all,
            .pool_row = embeds ? n_pooled++ : -1,
        };
        e->step.order[n++] = s;
        rows += s->step_rows;
        n_decode += s->step_rows == 1 && s->n_generated > 0; /* not a prompt's last token */
    }
    e->step.step_decode = n_decode;
    *b = (fwd_batch){.n_rows = rows, .tokens = e->step.tokens, .n_seqs = n,
                     .seqs = e->step.seqs, .n_logits = n_logits, .n_pooled = n_pooled};
    return n;
}
