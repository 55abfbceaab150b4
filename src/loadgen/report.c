/* report.c: a load run's settings and results as JSON (the input of bench/plot.sh). */
#include <math.h>

#include "loadgen/loadgen.h"

/* NAN (no samples) becomes null. */
static bool add_num(cJSON *o, const char *name, double v)
{
    return isfinite(v) ? cJSON_AddNumberToObject(o, name, v) != NULL
                       : cJSON_AddNullToObject(o, name) != NULL;
}

static bool add_pcts(cJSON *o, const char *name, const loadgen_pcts *p)
{
    cJSON *j = cJSON_AddObjectToObject(o, name);
    return j && add_num(j, "p50", p->p50) && add_num(j, "p90", p->p90) && add_num(j, "p99", p->p99);
}

static bool add_stats(cJSON *o, const loadgen_stats *s)
{
    return add_num(o, "sent", s->sent) && add_num(o, "ok", s->ok) &&
           add_num(o, "failed", s->failed) && add_num(o, "output_tokens", (double)s->output_tokens) &&
           add_num(o, "prompt_tokens", (double)s->prompt_tokens) &&
           add_num(o, "failed_chunks", (double)s->failed_chunks) &&
           add_pcts(o, "ttft_ms", &s->ttft_ms) && add_pcts(o, "itl_ms", &s->itl_ms) &&
           add_pcts(o, "latency_ms", &s->latency_ms);
}

/* "deviations": {name: requests} (kinds seen only), "extra_fields": [names],
 * "error_sample": the first error event's message or null, "saved": raw responses kept. */
static bool dev_json(cJSON *o, const loadgen_level *l)
{
    cJSON *devs = cJSON_AddObjectToObject(o, "deviations"), *extra;
    if (!devs || !(extra = cJSON_AddArrayToObject(o, "extra_fields")))
        return false;
    for (int d = 0; d < LOADGEN_DEV_COUNT; d++)
        if (l->dev_count[d] && !add_num(devs, loadgen_dev_name((loadgen_dev)d), l->dev_count[d]))
            return false;
    for (int k = 0; k < l->n_extra; k++) {
        cJSON *name = cJSON_CreateString(l->extra[k]);
        if (!name || !cJSON_AddItemToArray(extra, name)) {
            cJSON_Delete(name);
            return false;
        }
    }
    return (l->error_sample[0] ? cJSON_AddStringToObject(o, "error_sample", l->error_sample)
                               : cJSON_AddNullToObject(o, "error_sample")) &&
           add_num(o, "saved", l->saved);
}

/* spec.sources: {"ngram": {drafted, accepted, acceptance}, ...}, the sources that drafted
 * during the level, when the server counted them apart. False when out of memory. */
static bool spec_sources_json(cJSON *spec, const loadgen_level *l)
{
    if (!l->spec_by_source)
        return true;
    cJSON *by = cJSON_AddObjectToObject(spec, "sources");
    if (!by)
        return false;
    for (int s = 0; s < LOADGEN_SPEC_SOURCES; s++) {
        uint64_t d = l->spec_source_drafted[s], a = l->spec_source_accepted[s];
        if (d == 0)
            continue;
        cJSON *o = cJSON_AddObjectToObject(by, loadgen_spec_source_name(s));
        if (!o || !add_num(o, "drafted", (double)d) || !add_num(o, "accepted", (double)a) ||
            !add_num(o, "acceptance", (double)a / (double)d))
            return false;
    }
    return true;
}

static cJSON *level_json(const loadgen_level *l, bool mixed)
{
    cJSON *o = cJSON_CreateObject(), *errs, *cls;
    if (!o || !add_num(o, "concurrency", l->concurrency) || !add_num(o, "wall_s", l->wall_s) ||
        !add_num(o, "req_s", l->req_s) || !add_num(o, "output_tok_s", l->output_tok_s) ||
        !add_num(o, "docs_s", l->docs_s) || !add_num(o, "prompt_tok_s", l->prompt_tok_s) ||
        !add_stats(o, &l->all) || !(errs = cJSON_AddObjectToObject(o, "errors")))
        goto fail;
    for (int k = 0; k < l->n_err_kinds; k++) {
        char buf[16];
        if (!add_num(errs, loadgen_error_name(l->err_code[k], buf, sizeof buf), l->err_count[k]))
            goto fail;
    }
    if (!dev_json(o, l))
        goto fail;
    if (l->spec_seen) {
        cJSON *spec = cJSON_AddObjectToObject(o, "spec");
        if (!spec || !add_num(spec, "drafted", (double)l->spec_drafted) ||
            !add_num(spec, "accepted", (double)l->spec_accepted) ||
            !add_num(spec, "acceptance", l->spec_drafted ? (double)l->spec_accepted /
                                                               (double)l->spec_drafted : 0.0) ||
            !spec_sources_json(spec, l))
            goto fail;
    }
    if (mixed) {
        if (!(cls = cJSON_AddObjectToObject(o, "classes")))
            goto fail;
        for (int c = 0; c < LOADGEN_CLASS_COUNT; c++) {
            cJSON *j = cJSON_AddObjectToObject(cls, loadgen_class_name((loadgen_class)c));
            if (!j || !add_stats(j, &l->cls[c]))
                goto fail;
        }
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

cJSON *loadgen_result_json(const loadgen_result *r, const loadgen_config *cfg)
{
    cJSON *root = cJSON_CreateObject(), *levels, *mix;
    if (!root || !cJSON_AddStringToObject(root, "url", cfg->url) ||
        !cJSON_AddStringToObject(root, "endpoint",
                                 cfg->embed  ? "embeddings"
                                 : cfg->chat ? "chat"
                                             : "completions") ||
        !add_num(root, "batch", cfg->embed ? cfg->batch : 0) ||
        !cJSON_AddBoolToObject(root, "stream", cfg->stream) ||
        !add_num(root, "requests_per_level", cfg->requests) ||
        !add_num(root, "prompt_len", cfg->prompt_len) ||
        !add_num(root, "shared_prefix", cfg->shared_prefix) ||
        !add_num(root, "max_tokens", cfg->max_tokens) ||
        !cJSON_AddBoolToObject(root, "ignore_eos", cfg->ignore_eos) ||
        !add_num(root, "seed", (double)cfg->seed) ||
        !cJSON_AddBoolToObject(root, "deadline_hit", r->deadline_hit))
        goto fail;
    if (cfg->model && !cJSON_AddStringToObject(root, "model", cfg->model))
        goto fail;
    if (cfg->mix) {
        if (!(mix = cJSON_AddObjectToObject(root, "mix")))
            goto fail;
        for (int c = 0; c < LOADGEN_CLASS_COUNT; c++)
            if (!add_num(mix, loadgen_class_name((loadgen_class)c), cfg->mix->weight[c]))
                goto fail;
    } else if (!cJSON_AddNullToObject(root, "mix")) {
        goto fail;
    }
    if (!(levels = cJSON_AddArrayToObject(root, "levels")))
        goto fail;
    for (int i = 0; i < r->n_levels; i++) {
        cJSON *l = level_json(&r->levels[i], r->mixed);
        if (!l)
            goto fail;
        cJSON_AddItemToArray(levels, l);
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}
