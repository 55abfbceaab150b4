/* level.c: loadgen_run: checks the settings, runs each level, and turns its request
 * records into the level's statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "loadgen/run_internal.h"

static void acc_free(loadgen_acc *a)
{
    free(a->all.v);
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++)
        free(a->cls[c].v);
    memset(a, 0, sizeof *a);
}

/* Statistics of the requests of class cls (-1 = all); scratch holds n doubles. */
static void stats_of(loadgen_stats *s, const loadgen_request *reqs, int n, int cls,
                     loadgen_gaps *gaps, double *scratch)
{
    memset(s, 0, sizeof *s);
    int k = 0;
    for (int i = 0; i < n; i++) {
        const loadgen_request *r = &reqs[i];
        if (!r->done || (cls >= 0 && r->cls != cls))
            continue;
        s->sent++;
        if (!r->ok) {
            s->failed++;
            s->failed_chunks += r->chunks;
            continue;
        }
        s->ok++;
        s->output_tokens += r->tokens;
        s->prompt_tokens += r->prompt_tokens;
    }
    for (int i = 0; i < n; i++)
        if (reqs[i].ok && (cls < 0 || reqs[i].cls == cls) && reqs[i].t_first >= 0)
            scratch[k++] = (reqs[i].t_first - reqs[i].t_send) * 1e3;
    loadgen_pcts_of(&s->ttft_ms, scratch, (size_t)k);
    k = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i].ok && (cls < 0 || reqs[i].cls == cls))
            scratch[k++] = (reqs[i].t_done - reqs[i].t_send) * 1e3;
    loadgen_pcts_of(&s->latency_ms, scratch, (size_t)k);
    loadgen_pcts_of(&s->itl_ms, gaps->v, gaps->n);
}

static void summarise(loadgen_level *l, const loadgen_request *reqs, int n, loadgen_acc *acc,
                      bool mixed, double *scratch)
{
    double t0 = INFINITY, t1 = -INFINITY;
    for (int i = 0; i < n; i++) {
        const loadgen_request *r = &reqs[i];
        if (!r->done)
            continue;
        t0 = r->t_send < t0 ? r->t_send : t0;
        t1 = r->t_done > t1 ? r->t_done : t1;
        for (int d = 0; d < LOADGEN_DEV_COUNT; d++)
            l->dev_count[d] += (r->dev >> d) & 1u;
        if (r->ok)
            continue;
        int k = 0;
        while (k < l->n_err_kinds && l->err_code[k] != r->error)
            k++;
        if (k == LOADGEN_MAX_ERROR_KINDS)
            k--; /* the table is full: lump the rarest codes into the last row */
        else if (k == l->n_err_kinds)
            l->err_code[l->n_err_kinds++] = r->error;
        l->err_count[k]++;
    }
    memcpy(l->extra, acc->extra, sizeof l->extra);
    l->n_extra = acc->n_extra;
    memcpy(l->error_sample, acc->error_sample, sizeof l->error_sample);
    l->saved = acc->saved_failed + acc->saved_dev;
    stats_of(&l->all, reqs, n, -1, &acc->all, scratch);
    if (mixed)
        for (int c = 0; c < LOADGEN_CLASS_COUNT; c++)
            stats_of(&l->cls[c], reqs, n, c, &acc->cls[c], scratch);
    l->wall_s = t1 > t0 ? t1 - t0 : 0.0;
    l->req_s = l->wall_s > 0 ? l->all.ok / l->wall_s : 0.0;
    l->output_tok_s = l->wall_s > 0 ? (double)l->all.output_tokens / l->wall_s : 0.0;
}

/* An embeddings level's documents/s and prompt tokens/s. */
static void embed_rates(loadgen_level *l, const loadgen_config *cfg)
{
    if (!cfg->embed)
        return;
    l->docs_s = l->req_s * cfg->batch;
    l->prompt_tok_s = l->wall_s > 0 ? (double)l->all.prompt_tokens / l->wall_s : 0.0;
}

/* The server's speculative-decoding counters during a level: after less before, in all
 * and, when both pages had them, by draft source. */
static void spec_level(loadgen_level *l, const loadgen_spec_counts *before,
                       const loadgen_spec_counts *after)
{
    l->spec_seen = true;
    l->spec_drafted = after->drafted - before->drafted;
    l->spec_accepted = after->accepted - before->accepted;
    l->spec_by_source = before->by_source && after->by_source;
    for (int s = 0; l->spec_by_source && s < LOADGEN_SPEC_SOURCES; s++) {
        l->spec_source_drafted[s] = after->source_drafted[s] - before->source_drafted[s];
        l->spec_source_accepted[s] = after->source_accepted[s] - before->source_accepted[s];
    }
}

static ts_status check_config(const loadgen_config *cfg, ts_error *err)
{
    if (cfg->n_levels < 1 || cfg->n_levels > LOADGEN_MAX_LEVELS)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "loadgen: 1..%d concurrency levels, not %d",
                            LOADGEN_MAX_LEVELS, cfg->n_levels);
    for (int i = 0; i < cfg->n_levels; i++)
        if (cfg->levels[i] < 1 || cfg->levels[i] > LOADGEN_MAX_CONCURRENCY)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "loadgen: concurrency %d not in 1..%d",
                                cfg->levels[i], LOADGEN_MAX_CONCURRENCY);
    if (cfg->requests < 1 || cfg->requests > LOADGEN_MAX_REQUESTS)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "loadgen: requests %d not in 1..%d",
                            cfg->requests, LOADGEN_MAX_REQUESTS);
    if (cfg->prompt_len < 0 || cfg->shared_prefix < 0 || cfg->prompt_len > 1000000 ||
        cfg->shared_prefix > 1000000 || cfg->prompt_len + cfg->shared_prefix < 1)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "loadgen: prompt %d + prefix %d words: want 1..2000000 in all",
                            cfg->prompt_len, cfg->shared_prefix);
    if (cfg->embed && (cfg->batch < 1 || cfg->batch > 2048 || cfg->stream))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "loadgen: embeddings want a batch of 1..2048 documents (not %d) "
                            "and no stream", cfg->batch);
    if (cfg->max_tokens < 1)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "loadgen: max_tokens %d < 1", cfg->max_tokens);
    if (!(cfg->timeout_s > 0) || !(cfg->deadline_s > 0) || !isfinite(cfg->timeout_s) ||
        !isfinite(cfg->deadline_s) || cfg->timeout_s > 1e6 || cfg->deadline_s > 1e6)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "loadgen: timeout and deadline want 0..1e6 s");
    return TS_OK;
}

ts_status loadgen_run(loadgen_result *out, const loadgen_config *cfg, ts_error *err)
{
    memset(out, 0, sizeof *out);
    ts_status st = check_config(cfg, err);
    if (st != TS_OK)
        return st;
    loadgen_url url;
    if ((st = loadgen_url_parse(&url, cfg->url, err)) != TS_OK)
        return st;
    if (!cfg->allow_remote && !loadgen_url_is_loopback(&url))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "loadgen: %s is not a loopback host (--allow-remote to load it)",
                            url.host);
    loadgen_runner run = {.cfg = cfg, .mixed = cfg->mix != NULL};
    if ((st = loadgen_url_format(run.endpoint, &url,
                                 cfg->embed  ? "/v1/embeddings"
                                 : cfg->chat ? "/v1/chat/completions"
                                             : "/v1/completions",
                                 sizeof run.endpoint, err)) != TS_OK)
        return st;
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++) {
        if (!cfg->keys)
            break;
        /* Without a mix every request is NORMAL: use the normal key, else any key. */
        const char *k = cfg->keys->key[c];
        for (int o = 0; !k && !run.mixed && o < LOADGEN_CLASS_COUNT; o++)
            k = cfg->keys->key[o];
        if (run.mixed && cfg->mix->weight[c] > 0 && !k)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "loadgen: the mix sends %s requests but the api keys have no %s key",
                                loadgen_class_name((loadgen_class)c), loadgen_class_name((loadgen_class)c));
        run.key[c] = k;
    }
    if (run.mixed && !cfg->keys)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "loadgen: a mix needs the api keys file");

    loadgen_request *reqs = NULL;
    double *scratch = NULL;
    loadgen_acc acc = {0};
    bool curl_up = false;
    if (!(run.prefix = loadgen_words(cfg->shared_prefix, cfg->seed ^ 0x5eedf00dull)) ||
        !(reqs = calloc((size_t)cfg->requests, sizeof *reqs)) ||
        !(scratch = malloc((size_t)cfg->requests * sizeof *scratch))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "loadgen: out of memory for %d requests", cfg->requests);
        goto fail;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        st = ts_error_set(err, TS_ERR_INTERNAL, "loadgen: libcurl failed to initialise");
        goto fail;
    }
    curl_up = true;
    if (!(run.multi = curl_multi_init())) {
        st = ts_error_set(err, TS_ERR_NOMEM, "loadgen: libcurl multi handle: out of memory");
        goto fail;
    }
    if (!cfg->scrape_metrics ||
        loadgen_url_format(run.metrics, &url, "/metrics", sizeof run.metrics, err) != TS_OK)
        run.metrics[0] = '\0';
    run.deadline = clock_now_s() + cfg->deadline_s;
    out->mixed = run.mixed;
    for (int l = 0; l < cfg->n_levels && !run.deadline_hit; l++) {
        memset(reqs, 0, (size_t)cfg->requests * sizeof *reqs);
        curl_multi_setopt(run.multi, CURLMOPT_MAXCONNECTS, (long)cfg->levels[l]);
        loadgen_spec_counts before, after;
        bool seen = loadgen_spec_scrape(&run, &before);
        st = loadgen_run_level(&run, l, reqs, &acc, err);
        loadgen_level *lv = &out->levels[out->n_levels++];
        if (seen && st == TS_OK && loadgen_spec_scrape(&run, &after))
            spec_level(lv, &before, &after);
        lv->concurrency = cfg->levels[l];
        summarise(lv, reqs, cfg->requests, &acc, run.mixed, scratch);
        embed_rates(lv, cfg);
        acc_free(&acc);
        if (st != TS_OK)
            goto fail;
    }
    out->deadline_hit = run.deadline_hit;
fail:
    acc_free(&acc);
    if (run.multi)
        curl_multi_cleanup(run.multi);
    if (curl_up)
        curl_global_cleanup();
    free(run.prefix);
    free(reqs);
    free(scratch);
    return st;
}
