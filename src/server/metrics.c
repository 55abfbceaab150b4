/* metrics.c: request counters by route and status, token counters, latency histograms
 * (cumulative buckets, _sum, _count), rendered as Prometheus text. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/build_info.h"
#include "common/strbuf.h"
#include "server/metrics.h"

/* HTTP statuses counted separately; anything else lands in the last slot as "other". */
static const int known_status[] = {200, 400, 401, 404, 405, 413, 429, 500, 503};
#define N_STATUS (sizeof known_status / sizeof known_status[0] + 1)

static const char *const route_names[METRICS_ROUTE_COUNT] = {
    "chat_completions", "completions", "batch_chat_completions", "batch_completions",
    "models", "health", "metrics", "tokenize", "detokenize", "embeddings",
    "rerank",
    "other",
};

typedef struct hist_def {
    const char *name, *help;
    int n_bounds;
    double bounds[METRICS_MAX_BUCKETS]; /* upper bounds, ascending; +Inf is implicit */
} hist_def;

static const hist_def hist_defs[METRICS_HIST_COUNT] = {
    {"tessera_time_to_first_token_seconds", "Time from request arrival to the first token.",
     12, {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}},
    {"tessera_inter_token_latency_seconds", "Time between consecutive tokens of a completion.",
     11, {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}},
    {"tessera_request_duration_seconds", "Time from request arrival to the end of the answer.",
     12, {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}},
};

typedef struct hist {
    uint64_t counts[METRICS_MAX_BUCKETS + 1]; /* per bucket, not cumulative; last = +Inf */
    double sum;
    uint64_t count;
} hist;

struct metrics {
    pthread_mutex_t mu;
    uint64_t requests[METRICS_ROUTE_COUNT][N_STATUS];
    uint64_t prompt_tokens, generated_tokens;
    hist hists[METRICS_HIST_COUNT];
};

ts_status metrics_create(metrics **out, ts_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate metrics");
    pthread_mutex_init(&(*out)->mu, NULL);
    return TS_OK;
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

const char *metrics_route_name(metrics_route route)
{
    return (unsigned)route < METRICS_ROUTE_COUNT ? route_names[route] : "other";
}

void metrics_count_request(metrics *m, metrics_route route, int status)
{
    if ((unsigned)route >= METRICS_ROUTE_COUNT)
        route = METRICS_ROUTE_OTHER;
    size_t s = N_STATUS - 1;
    for (size_t i = 0; i + 1 < N_STATUS; i++)
        if (known_status[i] == status)
            s = i;
    pthread_mutex_lock(&m->mu);
    m->requests[route][s]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_add_tokens(metrics *m, long prompt_tokens, long generated_tokens)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (uint64_t)(prompt_tokens > 0 ? prompt_tokens : 0);
    m->generated_tokens += (uint64_t)(generated_tokens > 0 ? generated_tokens : 0);
    pthread_mutex_unlock(&m->mu);
}

void metrics_observe(metrics *m, metrics_hist h, double seconds)
{
    if ((unsigned)h >= METRICS_HIST_COUNT || !(seconds >= 0))
        return;
    const hist_def *d = &hist_defs[h];
    int b = 0;
    while (b < d->n_bounds && seconds > d->bounds[b])
        b++;
    pthread_mutex_lock(&m->mu);
    m->hists[h].counts[b]++;
    m->hists[h].sum += seconds;
    m->hists[h].count++;
    pthread_mutex_unlock(&m->mu);
}

static void header(strbuf *b, const char *name, const char *type, const char *help)
{
    strbuf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Model names come from files: keep label values to safe characters. */
static void label_value(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; s && *s && o + 1 < cap; s++)
        out[o++] = (*s == '"' || *s == '\\' || *s == '\n') ? '_' : *s;
    out[o] = '\0';
}

/* Speculative decoding by draft source (label source="ngram" or "draft_model"): draft
 * tokens verified and accepted, their ratio, and the draft model's step time. */
static void render_spec_sources(strbuf *b, const metrics_model *models, const char (*names)[128],
                                size_t n)
{
    static const char *const families[][3] = {
        {"tessera_spec_draft_tokens_total", "counter",
         "Draft tokens speculative decoding verified, by draft source."},
        {"tessera_spec_draft_accepted_tokens_total", "counter",
         "Draft tokens the model accepted, by draft source."},
        {"tessera_spec_draft_acceptance_ratio", "gauge",
         "Draft tokens accepted over draft tokens verified, by draft source (0 before any)."},
    };
    for (int f = 0; f < 3; f++) {
        header(b, families[f][0], families[f][1], families[f][2]);
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < TS_SPEC_SOURCE_COUNT; k++) {
                const ts_spec_source_stats *src = &models[i].stats.spec_source[k];
                double v = f == 0   ? (double)src->drafted
                           : f == 1 ? (double)src->accepted
                           : src->drafted ? (double)src->accepted / (double)src->drafted
                                          : 0.0;
                strbuf_addf(b, "%s{model=\"%s\",source=\"%s\"} %.17g\n", families[f][0],
                            names[i], ts_spec_source_name((ts_spec_source)k), v);
            }
    }
    header(b, "tessera_spec_draft_model_seconds_total", "counter",
           "Seconds the draft model's own steps took: what drafting costs.");
    for (size_t i = 0; i < n; i++)
        strbuf_addf(b, "tessera_spec_draft_model_seconds_total{model=\"%s\"} %.9g\n", names[i],
                    models[i].stats.spec_draft_model_seconds);
}

static void render_models(strbuf *b, const metrics_model *models, size_t n)
{
    static const char *const prio[TS_PRIORITY_COUNT] = {"high", "normal", "low"};
    char (*names)[128] = calloc(n ? n : 1, sizeof *names);
    if (!names) {
        b->failed = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        label_value(names[i], sizeof names[i], models[i].name);

    header(b, "tessera_queue_depth", "gauge", "Requests waiting, by priority.");
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < TS_PRIORITY_COUNT; p++)
            strbuf_addf(b, "tessera_queue_depth{model=\"%s\",priority=\"%s\"} %d\n", names[i],
                        prio[p], models[i].stats.queued[p]);
    header(b, "tessera_running_sequences", "gauge", "Sequences in the running batch.");
    for (size_t i = 0; i < n; i++)
        strbuf_addf(b, "tessera_running_sequences{model=\"%s\"} %d\n", names[i],
                    models[i].stats.running);
    header(b, "tessera_engine_threads", "gauge",
           "Threads the engine's steps run on: the configured count, less those another "
           "process keeps from a core.");
    for (size_t i = 0; i < n; i++)
        strbuf_addf(b, "tessera_engine_threads{model=\"%s\"} %d\n", names[i],
                    models[i].stats.threads);
    header(b, "tessera_kv_blocks", "gauge", "KV cache blocks by state.");
    for (size_t i = 0; i < n; i++) {
        const ts_engine_stats *s = &models[i].stats;
        const char *state[] = {"free", "used", "cached"};
        int blocks[] = {s->kv_blocks_free, s->kv_blocks_used, s->kv_blocks_cached};
        for (int k = 0; k < 3; k++)
            strbuf_addf(b, "tessera_kv_blocks{model=\"%s\",state=\"%s\"} %d\n", names[i],
                        state[k], blocks[k]);
    }
    /* Not _total: Prometheus keeps that suffix for counters (promtool refuses a gauge). */
    header(b, "tessera_kv_pool_blocks", "gauge", "KV cache blocks in the pool.");
    for (size_t i = 0; i < n; i++)
        strbuf_addf(b, "tessera_kv_pool_blocks{model=\"%s\"} %d\n", names[i],
                    models[i].stats.kv_blocks_total);
    header(b, "tessera_prefix_cache_hit_ratio", "gauge",
           "Prompt blocks found in the prefix cache over blocks looked up.");
    for (size_t i = 0; i < n; i++) {
        const ts_engine_stats *s = &models[i].stats;
        uint64_t looked = s->prefix_hit_blocks + s->prefix_miss_blocks;
        strbuf_addf(b, "tessera_prefix_cache_hit_ratio{model=\"%s\"} %.6g\n", names[i],
                    looked ? (double)s->prefix_hit_blocks / (double)looked : 0.0);
    }
    static const struct {
        const char *name, *help;
        size_t offset;
    } counters[] = {
        {"tessera_prefix_cache_hit_blocks_total", "Prompt blocks served from the prefix cache.",
         offsetof(ts_engine_stats, prefix_hit_blocks)},
        {"tessera_prefix_cache_miss_blocks_total", "Prompt blocks computed afresh.",
         offsetof(ts_engine_stats, prefix_miss_blocks)},
        {"tessera_kv_evictions_total", "Cached KV blocks evicted.",
         offsetof(ts_engine_stats, kv_evictions)},
        {"tessera_preemptions_total", "Sequences preempted for lack of KV blocks.",
         offsetof(ts_engine_stats, preemptions)},
        {"tessera_engine_thread_cuts_total",
         "Times the engine ran its steps on fewer threads because some waited for a core.",
         offsetof(ts_engine_stats, thread_cuts)},
        {"tessera_engine_requests_submitted_total", "Requests the engine accepted.",
         offsetof(ts_engine_stats, requests_submitted)},
        {"tessera_engine_requests_completed_total", "Requests that finished normally.",
         offsetof(ts_engine_stats, requests_completed)},
        {"tessera_engine_requests_failed_total", "Requests that ended with an error.",
         offsetof(ts_engine_stats, requests_failed)},
        {"tessera_engine_requests_cancelled_total",
         "Requests cancelled (client gone, shutdown, or output unread past the limit).",
         offsetof(ts_engine_stats, requests_cancelled)},
        {"tessera_engine_steps_total", "Engine steps run.", offsetof(ts_engine_stats, steps)},
        {"tessera_engine_prompt_tokens_total", "Prompt tokens the engine processed.",
         offsetof(ts_engine_stats, prompt_tokens)},
        {"tessera_engine_generated_tokens_total", "Tokens the engine generated.",
         offsetof(ts_engine_stats, generated_tokens)},
        {"tessera_spec_drafted_tokens_total", "Draft tokens speculative decoding verified.",
         offsetof(ts_engine_stats, spec_drafted)},
        {"tessera_spec_accepted_tokens_total",
         "Draft tokens the model accepted: tokens generated without a step of their own.",
         offsetof(ts_engine_stats, spec_accepted)},
    };
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        header(b, counters[c].name, "counter", counters[c].help);
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&models[i].stats + counters[c].offset, sizeof v);
            strbuf_addf(b, "%s{model=\"%s\"} %llu\n", counters[c].name, names[i],
                        (unsigned long long)v);
        }
    }
    header(b, "tessera_spec_acceptance_ratio", "gauge",
           "Draft tokens accepted over draft tokens verified (0 before any draft).");
    for (size_t i = 0; i < n; i++) {
        const ts_engine_stats *s = &models[i].stats;
        strbuf_addf(b, "tessera_spec_acceptance_ratio{model=\"%s\"} %.6g\n", names[i],
                    s->spec_drafted ? (double)s->spec_accepted / (double)s->spec_drafted : 0.0);
    }
    render_spec_sources(b, models, (const char(*)[128])names, n);
    header(b, "tessera_engine_step_seconds_total", "counter",
           "Engine step time by phase; kind=decode: steps of decode tokens only, "
           "kind=prompt: steps with prompt rows.");
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            const ts_step_profile *p =
                k == 0 ? &models[i].stats.decode_steps : &models[i].stats.prompt_steps;
            for (int ph = 0; ph < TS_PHASE_COUNT; ph++)
                strbuf_addf(b,
                            "tessera_engine_step_seconds_total{model=\"%s\",kind=\"%s\","
                            "phase=\"%s\"} %.9g\n",
                            names[i], k == 0 ? "decode" : "prompt",
                            ts_step_phase_name((ts_step_phase)ph), p->seconds[ph]);
        }
    free(names);
}

/* tessera_build_info: always 1, its labels say what runs (Prometheus' *_build_info idiom). */
static void render_build_info(strbuf *b)
{
    ts_build_info bi;
    ts_build_info_get(&bi);
    char v[64], commit[64], type[64], cc[96], kernels[64], packed[96];
    label_value(v, sizeof v, bi.version);
    label_value(commit, sizeof commit, bi.commit);
    label_value(type, sizeof type, bi.build_type);
    label_value(cc, sizeof cc, bi.compiler);
    label_value(kernels, sizeof kernels, bi.vector);
    label_value(packed, sizeof packed, bi.packed);
    header(b, "tessera_build_info", "gauge", "The build and the kernels this CPU runs; always 1.");
    strbuf_addf(b, "tessera_build_info{version=\"%s\",commit=\"%s\",build_type=\"%s\","
                   "compiler=\"%s\",kernels=\"%s\",packed_kernels=\"%s\"} 1\n",
                v, commit, type, cc, kernels, packed);
}

char *metrics_render(metrics *m, const metrics_model *models, size_t n)
{
    /* Snapshot under the lock, format outside it. */
    pthread_mutex_lock(&m->mu);
    uint64_t requests[METRICS_ROUTE_COUNT][N_STATUS];
    memcpy(requests, m->requests, sizeof requests);
    uint64_t prompt = m->prompt_tokens, generated = m->generated_tokens;
    hist hists[METRICS_HIST_COUNT];
    memcpy(hists, m->hists, sizeof hists);
    pthread_mutex_unlock(&m->mu);

    strbuf b = {0};
    render_build_info(&b);
    header(&b, "tessera_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (int r = 0; r < METRICS_ROUTE_COUNT; r++)
        for (size_t s = 0; s < N_STATUS; s++) {
            if (!requests[r][s])
                continue;
            if (s + 1 < N_STATUS)
                strbuf_addf(&b, "tessera_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                            route_names[r], known_status[s], (unsigned long long)requests[r][s]);
            else
                strbuf_addf(&b, "tessera_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                            route_names[r], (unsigned long long)requests[r][s]);
        }
    header(&b, "tessera_prompt_tokens_total", "counter", "Prompt tokens of answered requests.");
    strbuf_addf(&b, "tessera_prompt_tokens_total %llu\n", (unsigned long long)prompt);
    header(&b, "tessera_generated_tokens_total", "counter", "Tokens generated for answered requests.");
    strbuf_addf(&b, "tessera_generated_tokens_total %llu\n", (unsigned long long)generated);

    for (int h = 0; h < METRICS_HIST_COUNT; h++) {
        const hist_def *d = &hist_defs[h];
        header(&b, d->name, "histogram", d->help);
        uint64_t cum = 0;
        for (int k = 0; k < d->n_bounds; k++) {
            cum += hists[h].counts[k];
            strbuf_addf(&b, "%s_bucket{le=\"%g\"} %llu\n", d->name, d->bounds[k],
                        (unsigned long long)cum);
        }
        cum += hists[h].counts[d->n_bounds];
        strbuf_addf(&b, "%s_bucket{le=\"+Inf\"} %llu\n", d->name, (unsigned long long)cum);
        strbuf_addf(&b, "%s_sum %.9g\n", d->name, hists[h].sum);
        strbuf_addf(&b, "%s_count %llu\n", d->name, (unsigned long long)hists[h].count);
    }
    render_models(&b, models, n);
    if (b.failed) {
        strbuf_free(&b);
        return NULL;
    }
    return b.s;
}
