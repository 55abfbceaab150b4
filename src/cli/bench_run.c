/* bench_run.c: runs the benchmark's levels and prefix test through one engine: a reader
 * thread per request submits it and timestamps every event as it arrives. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "common/clock.h"

enum { WARMUP_TOKENS = 4 };

void bench_config_default(bench_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_levels = 1;
    cfg->n_tokens = 128;
    cfg->prompt_len = 128;
    cfg->prefix_suffix = 16;
    cfg->seed = 1;
    cfg->rounds = 1;
}

static int64_t blocks_for(int64_t tokens)
{
    return (tokens + TS_KV_BLOCK_TOKENS - 1) / TS_KV_BLOCK_TOKENS;
}

static int max_level(const bench_config *cfg)
{
    int m = 1;
    for (int i = 0; i < cfg->n_levels; i++)
        m = cfg->levels[i] > m ? cfg->levels[i] : m;
    return m;
}

void bench_engine_options(ts_engine_options *o, const ts_model_config *c,
                          const bench_config *cfg)
{
    int top = max_level(cfg);
    if (o->max_seqs < top)
        o->max_seqs = top;
    /* an encoder keeps no K/V: the engine's own one-block pool (create_pool), not one of
     * every level's contexts, faulted in at start for nothing */
    if (o->kv_mem_bytes == 0 && o->kv_blocks == 0 && !c->encoder) {
        /* Finished requests' blocks stay cached and are evicted on demand, so the largest
         * level plus the prefix test's two requests is all that must fit at once. */
        int64_t per = blocks_for(cfg->prompt_len + cfg->n_tokens) + 1;
        int64_t pre = blocks_for(cfg->shared_prefix + cfg->prefix_suffix + WARMUP_TOKENS) + 1;
        o->kv_blocks = (int)(top * per + 2 * pre + 8);
    }
}

/* xorshift64*: the prompts' random stream. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* Token ids a random prompt may use: normal tokens, not BOS/EOS/UNK/PAD or any
 * end-of-generation token. */
typedef struct id_pool {
    int32_t *ids;
    int n;
    int32_t bos; /* -1 when prompts of this vocabulary do not start with BOS */
    uint64_t rng;
} id_pool;

static ts_status id_pool_init(id_pool *p, const ts_model *m, uint64_t seed, ts_error *err)
{
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    int vocab = ts_model_get_config(m)->vocab_size;
    p->ids = malloc((size_t)vocab * sizeof *p->ids);
    p->n = 0;
    p->bos = ts_tokenizer_add_bos(tok) ? ts_tokenizer_bos(tok) : -1;
    p->rng = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (!p->ids)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for %d token ids", vocab);
    for (int32_t id = 0; id < vocab; id++)
        if (ts_token_is_plain(tok, id))
            p->ids[p->n++] = id;
    if (p->n == 0) {
        free(p->ids);
        p->ids = NULL;
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the vocabulary has no normal tokens");
    }
    return TS_OK;
}

/* Fills out with n random ids; BOS first when with_bos and the vocabulary starts prompts
 * with it, as a real prompt would. */
static void random_tokens(id_pool *p, int32_t *out, int n, bool with_bos)
{
    for (int i = 0; i < n; i++)
        out[i] = (i == 0 && with_bos && p->bos >= 0)
                     ? p->bos
                     : p->ids[next_rand(&p->rng) % (uint64_t)p->n];
}

/* Opens when every reader thread of a batch exists, so their submits go out together. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 closed, 1 go, -1 abort */
} gate;

/* One request and what its reader thread saw. */
typedef struct probe {
    ts_engine *engine;
    gate *gate;
    const int32_t *prompt; /* (n_prompt) borrowed */
    int n_prompt;
    uint64_t cache_ns;     /* its prefix-cache namespace (0: the shared one) */
    int max_tokens;
    double t_submit;
    double *t_tok;         /* (max_tokens) arrival time of each TOKEN event */
    int n_tok;
    int completion_tokens; /* from DONE */
    int cached_tokens;     /* from DONE */
    ts_status status;
    char msg[256];
} probe;

static void *probe_thread(void *arg)
{
    probe *p = arg;
    pthread_mutex_lock(&p->gate->mu);
    while (p->gate->state == 0)
        pthread_cond_wait(&p->gate->cv, &p->gate->mu);
    int go = p->gate->state > 0;
    pthread_mutex_unlock(&p->gate->mu);
    if (!go)
        return NULL;

    ts_request_params rp;
    ts_request_params_default(&rp);
    rp.prompt = p->prompt;
    rp.n_prompt = (size_t)p->n_prompt;
    rp.max_tokens = p->max_tokens;
    rp.sampling.temperature = 0.0f;
    rp.ignore_eos = true;
    rp.cache_namespace = p->cache_ns;
    ts_request *req = NULL;
    ts_error err = {0};
    p->t_submit = clock_now_s();
    p->status = ts_engine_submit(p->engine, &rp, &req, &err);
    if (p->status != TS_OK) {
        snprintf(p->msg, sizeof p->msg, "%s", err.msg);
        return NULL;
    }
    ts_event ev;
    while (ts_request_next_event(req, &ev, -1) == TS_OK) {
        double t = clock_now_s();
        if (ev.kind == TS_EVENT_TOKEN && p->n_tok < p->max_tokens) {
            p->t_tok[p->n_tok++] = t;
        } else if (ev.kind == TS_EVENT_DONE) {
            p->completion_tokens = ev.completion_tokens;
            p->cached_tokens = ev.cached_tokens;
        } else if (ev.kind == TS_EVENT_ERROR) {
            p->status = ev.status;
            snprintf(p->msg, sizeof p->msg, "%s", ev.message);
        }
        ts_event_clear(&ev);
    }
    ts_request_release(req);
    return NULL;
}

/* Runs the n probes at once (prompts and engine already set) and waits for them. */
static ts_status run_probes(probe *pr, int n, ts_error *err)
{
    gate g = {.state = 0};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    pthread_t *th = malloc((size_t)n * sizeof *th);
    int started = 0;
    ts_status st = TS_OK;
    if (!th)
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for %d threads", n);
    for (; st == TS_OK && started < n; started++) {
        pr[started].gate = &g;
        if (pthread_create(&th[started], NULL, probe_thread, &pr[started]) != 0)
            st = ts_error_set(err, TS_ERR_INTERNAL, "cannot start reader thread %d of %d",
                              started + 1, n);
    }
    if (st != TS_OK && started > 0)
        started--; /* the failed one */
    pthread_mutex_lock(&g.mu);
    g.state = st == TS_OK ? 1 : -1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
    for (int i = 0; st == TS_OK && i < n; i++) {
        if (pr[i].status != TS_OK)
            st = ts_error_set(err, pr[i].status, "request %d: %s", i, pr[i].msg);
        else if (pr[i].n_tok != pr[i].max_tokens || pr[i].completion_tokens != pr[i].max_tokens)
            st = ts_error_set(err, TS_ERR_INTERNAL,
                              "request %d generated %d tokens (%d TOKEN events), not %d", i,
                              pr[i].completion_tokens, pr[i].n_tok, pr[i].max_tokens);
    }
    return st;
}

/* The metrics of bench.h from the probes of one level. */
static ts_status level_metrics(bench_level *l, const probe *pr, int n, ts_error *err)
{
    int n_tok = pr[0].max_tokens;
    size_t n_gaps = (size_t)n * (size_t)(n_tok > 1 ? n_tok - 1 : 0);
    double *ttft = malloc((size_t)n * sizeof *ttft);
    double *gaps = malloc((n_gaps ? n_gaps : 1) * sizeof *gaps);
    if (!ttft || !gaps) {
        free(ttft);
        free(gaps);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for level statistics");
    }
    double first_submit = pr[0].t_submit, first_tok = pr[0].t_tok[0];
    double last_first = pr[0].t_tok[0], first_last = pr[0].t_tok[n_tok - 1];
    double last_tok = first_last;
    long prompt_tokens = 0;
    size_t g = 0;
    for (int i = 0; i < n; i++) {
        const probe *p = &pr[i];
        double f = p->t_tok[0], z = p->t_tok[n_tok - 1];
        first_submit = p->t_submit < first_submit ? p->t_submit : first_submit;
        first_tok = f < first_tok ? f : first_tok;
        last_first = f > last_first ? f : last_first;
        first_last = z < first_last ? z : first_last;
        last_tok = z > last_tok ? z : last_tok;
        prompt_tokens += p->n_prompt;
        ttft[i] = (f - p->t_submit) * 1e3;
        for (int k = 1; k < n_tok; k++)
            gaps[g++] = (p->t_tok[k] - p->t_tok[k - 1]) * 1e3;
    }
    long in_window = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n_tok; k++)
            in_window += pr[i].t_tok[k] > last_first && pr[i].t_tok[k] <= first_last;
    l->concurrency = n;
    l->generated = (long)n * n_tok;
    l->all_decoding = first_last > last_first && in_window > 0;
    if (l->all_decoding)
        l->decode_tok_s = (double)in_window / (first_last - last_first);
    else if (last_tok > first_tok)
        l->decode_tok_s = (double)n * (n_tok - 1) / (last_tok - first_tok);
    else
        l->decode_tok_s = 0.0;
    l->prefill_tok_s = last_first > first_submit ? prompt_tokens / (last_first - first_submit) : 0.0;
    l->e2e_tok_s = last_tok > first_submit ? (double)l->generated / (last_tok - first_submit) : 0.0;
    l->wall_s = last_tok - first_submit;
    l->ttft_p50_ms = bench_percentile(ttft, (size_t)n, 50);
    l->ttft_p99_ms = bench_percentile(ttft, (size_t)n, 99);
    l->itl_p50_ms = bench_percentile(gaps, n_gaps, 50);
    l->itl_p99_ms = bench_percentile(gaps, n_gaps, 99);
    free(ttft);
    free(gaps);
    return TS_OK;
}

/* Probes with room for n requests of prompt_len tokens and max_tokens timestamps. */
typedef struct probe_set {
    probe *pr;
    int32_t *prompts; /* (n, prompt_len) */
    double *times;    /* (n, max_tokens) */
} probe_set;

static void probe_set_free(probe_set *s)
{
    free(s->pr);
    free(s->prompts);
    free(s->times);
    memset(s, 0, sizeof *s);
}

static ts_status probe_set_init(probe_set *s, ts_engine *e, int n, int prompt_len,
                                int max_tokens, ts_error *err)
{
    s->pr = calloc((size_t)n, sizeof *s->pr);
    s->prompts = malloc((size_t)n * (size_t)prompt_len * sizeof *s->prompts);
    s->times = malloc((size_t)n * (size_t)max_tokens * sizeof *s->times);
    if (!s->pr || !s->prompts || !s->times) {
        probe_set_free(s);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for %d requests", n);
    }
    for (int i = 0; i < n; i++)
        s->pr[i] = (probe){.engine = e, .prompt = s->prompts + (size_t)i * prompt_len,
                           .n_prompt = prompt_len, .max_tokens = max_tokens,
                           .t_tok = s->times + (size_t)i * max_tokens};
    return TS_OK;
}

/* d = a - b, the steps of a profile between two snapshots. */
static void profile_diff(ts_step_profile *d, const ts_step_profile *a, const ts_step_profile *b)
{
    d->steps = a->steps - b->steps;
    d->rows = a->rows - b->rows;
    d->decode_rows = a->decode_rows - b->decode_rows;
    d->mixed_steps = a->mixed_steps - b->mixed_steps;
    d->mixed_rows = a->mixed_rows - b->mixed_rows;
    d->moe_layers = a->moe_layers - b->moe_layers;
    d->experts_read = a->experts_read - b->experts_read;
    d->expert_pairs = a->expert_pairs - b->expert_pairs;
    for (int i = 0; i < TS_PHASE_COUNT; i++)
        d->seconds[i] = a->seconds[i] - b->seconds[i];
}

static ts_status run_level(bench_level *l, ts_engine *e, id_pool *ids, int n,
                           const bench_config *cfg, ts_error *err)
{
    probe_set s;
    ts_status st = probe_set_init(&s, e, n, cfg->prompt_len, cfg->n_tokens, err);
    if (st != TS_OK)
        return st;
    for (int i = 0; i < n; i++) {
        int32_t *prompt = s.prompts + (size_t)i * cfg->prompt_len;
        if (cfg->prompt) { /* the same text, computed afresh by each request */
            memcpy(prompt, cfg->prompt, (size_t)cfg->prompt_len * sizeof *prompt);
            s.pr[i].cache_ns = next_rand(&ids->rng) | 1;
        } else {
            random_tokens(ids, prompt, cfg->prompt_len, true);
        }
    }
    ts_engine_stats before, after;
    ts_engine_get_stats(e, &before);
    st = run_probes(s.pr, n, err);
    if (st == TS_OK)
        st = level_metrics(l, s.pr, n, err);
    /* a step's stats are published just after its events, which the probes may already
     * have read: wait for the last one */
    if (st == TS_OK && ts_engine_wait_idle(e, 10000) != TS_OK)
        st = ts_error_set(err, TS_ERR_TIMEOUT, "the engine stayed busy after the level");
    if (st == TS_OK) {
        ts_engine_get_stats(e, &after);
        profile_diff(&l->decode, &after.decode_steps, &before.decode_steps);
        profile_diff(&l->prompt, &after.prompt_steps, &before.prompt_steps);
        l->thread_cuts = (int)(after.thread_cuts - before.thread_cuts);
        l->spec_drafted = after.spec_drafted - before.spec_drafted;
        l->spec_accepted = after.spec_accepted - before.spec_accepted;
        for (int k = 0; k < TS_SPEC_SOURCE_COUNT; k++) {
            l->spec_source[k].drafted =
                after.spec_source[k].drafted - before.spec_source[k].drafted;
            l->spec_source[k].accepted =
                after.spec_source[k].accepted - before.spec_source[k].accepted;
        }
        l->spec_draft_s = after.spec_draft_model_seconds - before.spec_draft_model_seconds;
        l->threads_min = after.threads;
    }
    probe_set_free(&s);
    return st;
}

/* TTFT of prefix + suffix, cold, then of the same prefix with another suffix. */
static ts_status run_prefix(bench_result *r, ts_engine *e, id_pool *ids,
                            const bench_config *cfg, ts_error *err)
{
    int len = cfg->shared_prefix + cfg->prefix_suffix;
    probe_set s;
    ts_status st = probe_set_init(&s, e, 2, len, 1, err);
    if (st != TS_OK)
        return st;
    random_tokens(ids, s.prompts, len, true);
    memcpy(s.prompts + len, s.prompts, (size_t)cfg->shared_prefix * sizeof *s.prompts);
    random_tokens(ids, s.prompts + len + cfg->shared_prefix, cfg->prefix_suffix, false);
    double ttft[2];
    for (int i = 0; i < 2 && st == TS_OK; i++)
        if ((st = run_probes(&s.pr[i], 1, err)) == TS_OK)
            ttft[i] = (s.pr[i].t_tok[0] - s.pr[i].t_submit) * 1e3;
    if (st == TS_OK) {
        r->has_prefix = 1;
        r->ttft_cold_ms = ttft[0];
        r->ttft_cached_ms = ttft[1];
        r->cached_tokens = s.pr[1].cached_tokens;
    }
    probe_set_free(&s);
    return st;
}

ts_status bench_run(bench_result *out, ts_engine *e, const bench_config *cfg, ts_error *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->n_levels < 1 || !cfg->levels || cfg->n_tokens < 1 || cfg->prompt_len < 1 ||
        cfg->shared_prefix < 0 || (cfg->shared_prefix > 0 && cfg->prefix_suffix < 1) ||
        cfg->rounds < 1 || cfg->rounds > BENCH_MAX_ROUNDS)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "bench: need levels, n_tokens >= 1, prompt_len >= 1, suffix >= 1, "
                            "rounds in 1..%d", BENCH_MAX_ROUNDS);
    for (int i = 0; i < cfg->n_levels; i++)
        if (cfg->levels[i] < 1)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "bench: concurrency %d is not positive",
                                cfg->levels[i]);
    bool has_one = false;
    for (int i = 0; i < cfg->n_levels; i++)
        has_one |= cfg->levels[i] == 1;
    int n_levels = cfg->n_levels + !has_one, n_rounds = cfg->rounds;
    bench_level *runs = NULL; /* runs[level * n_rounds + round] */
    id_pool ids = {0};
    ts_status st = id_pool_init(&ids, ts_engine_get_model(e), cfg->seed, err);
    if (st != TS_OK)
        return st;
    out->levels = calloc((size_t)n_levels, sizeof *out->levels);
    runs = calloc((size_t)n_rounds * (size_t)n_levels, sizeof *runs);
    if (!out->levels || !runs) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for %d levels", n_levels);
        goto fail;
    }
    /* Warm-up: pages the weights in, starts the OpenMP and OpenBLAS thread pools. */
    bench_config warm = *cfg;
    warm.n_tokens = WARMUP_TOKENS < cfg->n_tokens ? WARMUP_TOKENS : cfg->n_tokens;
    bench_level scratch;
    if ((st = run_level(&scratch, e, &ids, 1, &warm, err)) != TS_OK)
        goto fail;
    for (int r = 0; r < n_rounds; r++) {
        double base = 0.0;
        for (int i = 0; i < n_levels; i++) {
            bench_level *l = &runs[(size_t)i * n_rounds + r];
            int c = has_one ? cfg->levels[i] : (i == 0 ? 1 : cfg->levels[i - 1]);
            if ((st = run_level(l, e, &ids, c, cfg, err)) != TS_OK)
                goto fail;
            if (c == 1 && base == 0.0)
                base = l->decode_tok_s;
        }
        for (int i = 0; i < n_levels; i++) {
            bench_level *l = &runs[(size_t)i * n_rounds + r];
            l->speedup = base > 0 ? l->decode_tok_s / base : 0.0;
        }
    }
    for (int i = 0; i < n_levels; i++)
        bench_level_combine(&out->levels[i], &runs[(size_t)i * n_rounds], n_rounds);
    out->n_levels = n_levels;
    if (cfg->shared_prefix > 0 && (st = run_prefix(out, e, &ids, cfg, err)) != TS_OK)
        goto fail;
    free(runs);
    free(ids.ids);
    return TS_OK;

fail:
    free(runs);
    free(ids.ids);
    bench_result_free(out);
    return st;
}

void bench_result_free(bench_result *r)
{
    free(r->levels);
    memset(r, 0, sizeof *r);
}
