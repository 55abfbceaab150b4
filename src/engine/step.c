/* step.c: one engine step, read top to bottom as its stages: cancel, admit, plan, pack
 * (sched.c), forward, publish, pool (pool.c), sample, emit (emit.c), free (seq.c); then
 * its times and the stats snapshot. Speculative decoding (spec.c) drafts after the plan,
 * adds its rows to the pack and verifies them after the emit. */
#include <omp.h>

#include "common/clock.h"
#include "engine/emit.h"
#include "engine/pool.h"
#include "engine/sched.h"
#include "engine/seq.h"
#include "engine/slots.h"
#include "engine/spec.h"
#include "engine/step.h"

/* team_observe reads as many waits as the forward pass records. */
_Static_assert((int)FWD_TEAM_MAX == (int)TEAM_MAX_THREADS, "a team's waits: one bound");

/* The threads of the forward pass that ran from start: fewer when some waited for a core
 * (engine/team.h), one more when a try is due. */
static void size_team(ts_engine *e, double start)
{
    const fwd_state *f = &e->step.fwd;
    int n = team_observe(&e->step.team, f->waited, f->team_threads, start, clock_now_s());
    if (n != omp_get_max_threads())
        omp_set_num_threads(n);
    e->step.counters.threads = n;
    e->step.counters.thread_cuts = e->step.team.cuts;
}

/* Runs the batched forward pass over b (n sequences); when it fails, every request in the
 * batch fails with its error. */
static ts_status forward(ts_engine *e, const fwd_batch *b, int n)
{
    ts_error err = {0};
    double start = clock_now_s();
    ts_status st = forward_batch(&e->step.fwd, e->model, e->step.pool, e->kernels, b, &err);
    size_team(e, start);
    e->step.counters.steps++;
    if (st != TS_OK)
        for (int i = 0; i < n; i++)
            if (!e->step.order[i]->done)
                engine_fail_request(e, e->step.order[i]->job, st, err.msg);
    return st;
}

/* Advances each sequence of the batch past its computed rows and offers every block that
 * filled up to the prefix cache. */
static void publish(ts_engine *e, int n)
{
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        if (s->done)
            continue;
        s->n_computed += s->step_rows;
        engine_seq_publish(e, s);
    }
}

/* A line of opts.step_log, its columns TS_STEP_LOG_COLUMNS: the cost model is as the plan
 * saw it (the step is observed after). */
static void log_step(const ts_engine *e, int decode, int prompt, double seconds)
{
    const step_cost *c = &e->step.cost;
    double est = cost_estimate(c, decode, prompt) * (decode > 0 && prompt > 0 ? c->mixed : 1.0);
    fprintf(e->opts.step_log, "%d %d %.3f %.3f %d %.3f %.3f\n", decode, prompt, seconds * 1e3,
            est * 1e3, e->step.plan_full, cost_estimate(c, e->step.plan_full, 0) * 1e3, c->mixed);
}

/* Adds a step's phase times (the forward pass's from e->step.fwd, which is reset) to the
 * profile of its kind, and its duration to the cost model that sizes prefill chunks. */
static void profile_step(ts_engine *e, const fwd_batch *b, double t_start, double t_packed,
                         double t_end)
{
    ts_step_profile *p = b->n_rows - e->step.step_drafts > b->n_seqs
                             ? &e->step.counters.prompt_steps
                             : &e->step.counters.decode_steps;
    double *fs = e->step.fwd.seconds;
    double forward = 0.0;
    for (int i = 0; i < TS_PHASE_COUNT; i++) {
        p->seconds[i] += fs[i];
        forward += fs[i];
        fs[i] = 0.0;
    }
    fwd_moe_counts mo = fwd_moe_take_counts(&e->step.fwd);
    p->moe_layers += mo.layers;
    p->experts_read += mo.experts_read;
    p->expert_pairs += mo.pairs;
    p->seconds[TS_PHASE_SCHEDULE] += t_packed - t_start;
    p->seconds[TS_PHASE_EMIT] += t_end - t_packed - forward;
    p->steps++;
    p->rows += (uint64_t)b->n_rows;
    p->decode_rows += (uint64_t)e->step.step_decode;
    if (e->step.step_decode > 0 && e->step.step_decode < b->n_rows) {
        p->mixed_steps++;
        p->mixed_rows += (uint64_t)b->n_rows;
    }
    int decode = e->step.step_decode, prompt = b->n_rows - decode;
    if (e->opts.step_log)
        log_step(e, decode, prompt, t_end - t_start);
    cost_observe(&e->step.cost, decode, prompt, t_end - t_start - e->step.step_draft_s);
}

void engine_publish_stats_locked(ts_engine *e)
{
    kv_stats ks;
    kv_pool_stats(&ks, e->step.pool);
    ts_engine_stats *st = &e->shared.stats;
    uint64_t submitted = st->requests_submitted;
    *st = e->step.counters;
    st->requests_submitted = submitted;
    for (int p = 0; p < TS_PRIORITY_COUNT; p++)
        st->queued[p] = e->shared.queued[p];
    st->running = e->step.n_running;
    st->kv_blocks_total = (int)ks.blocks_total;
    st->kv_blocks_free = (int)ks.blocks_free;
    st->kv_blocks_used = (int)ks.blocks_used;
    st->kv_blocks_cached = (int)ks.blocks_cached;
    st->prefix_lookups = ks.lookups;
    st->prefix_hit_blocks = ks.hit_blocks;
    st->prefix_miss_blocks = ks.missed_blocks;
    st->kv_evictions = ks.evictions;
    engine_publish_slots_locked(e);
}

bool engine_step(ts_engine *e)
{
    double now = clock_now_s();
    sched_cancel(e);
    sched_admit(e, now);
    sched_plan(e, now);
    spec_plan(e);
    fwd_batch batch;
    int n = sched_pack(e, &batch);
    spec_pack(e, &batch, n);
    double t_packed = clock_now_s();
    if (n > 0 && forward(e, &batch, n) == TS_OK) {
        publish(e, n);
        emit_prompt_logprobs(e, &batch, n);
        pool_collect(e, &batch, n);
        emit_sample(e, &batch, n);
        emit_tokens(e, &batch, n);
        spec_verify(e, n);
    }
    engine_free_dead(e);

    if (n > 0)
        profile_step(e, &batch, now, t_packed, clock_now_s());
    pthread_mutex_lock(&e->mu);
    engine_publish_stats_locked(e);
    pthread_mutex_unlock(&e->mu);
    return n > 0;
}
