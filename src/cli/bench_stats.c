/* bench_stats.c: the benchmark's arithmetic and reporting: percentiles, the memory
 * bandwidth yardstick, weight bytes per token, and the JSON form of a result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "model/model.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    if (!(p > 0))
        p = 0;
    if (p > 100)
        p = 100;
    double r = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(r);
    if (lo + 1 >= n)
        return v[n - 1];
    return v[lo] + (r - (double)lo) * (v[lo + 1] - v[lo]);
}

/* The median of field f over the rounds. */
#define ROUNDS_MEDIAN(f)                                                  \
    do {                                                                  \
        for (int r_ = 0; r_ < n; r_++)                                    \
            v[r_] = rounds[r_].f;                                         \
        out->f = bench_percentile(v, (size_t)n, 50);                      \
    } while (0)

bool bench_phases_vary(const bench_level *rounds, int n)
{
    double total = 0.0, share[TS_PHASE_COUNT] = {0};
    for (int r = 0; r < n; r++)
        for (int p = 0; p < TS_PHASE_COUNT; p++) {
            share[p] += rounds[r].decode.seconds[p];
            total += rounds[r].decode.seconds[p];
        }
    for (int p = 0; p < TS_PHASE_COUNT && total > 0; p++) {
        if (share[p] < 0.05 * total)
            continue;
        double lo = 0.0, hi = 0.0;
        bool any = false;
        for (int r = 0; r < n; r++) {
            if (!rounds[r].decode.steps)
                continue;
            double ms = rounds[r].decode.seconds[p] / (double)rounds[r].decode.steps;
            lo = !any || ms < lo ? ms : lo;
            hi = !any || ms > hi ? ms : hi;
            any = true;
        }
        if (any && hi > 2.0 * lo)
            return true;
    }
    return false;
}

static void profile_add(ts_step_profile *sum, const ts_step_profile *p)
{
    sum->steps += p->steps;
    sum->rows += p->rows;
    sum->decode_rows += p->decode_rows;
    sum->mixed_steps += p->mixed_steps;
    sum->mixed_rows += p->mixed_rows;
    sum->moe_layers += p->moe_layers;
    sum->experts_read += p->experts_read;
    sum->expert_pairs += p->expert_pairs;
    for (int i = 0; i < TS_PHASE_COUNT; i++)
        sum->seconds[i] += p->seconds[i];
}

void bench_level_combine(bench_level *out, const bench_level *rounds, int n_rounds)
{
    double v[BENCH_MAX_ROUNDS];
    int n = n_rounds < BENCH_MAX_ROUNDS ? n_rounds : BENCH_MAX_ROUNDS;
    memset(out, 0, sizeof *out);
    out->concurrency = rounds[0].concurrency;
    ROUNDS_MEDIAN(decode_tok_s);
    ROUNDS_MEDIAN(prefill_tok_s);
    ROUNDS_MEDIAN(e2e_tok_s);
    ROUNDS_MEDIAN(ttft_p50_ms);
    ROUNDS_MEDIAN(ttft_p99_ms);
    ROUNDS_MEDIAN(itl_p50_ms);
    ROUNDS_MEDIAN(itl_p99_ms);
    ROUNDS_MEDIAN(speedup);
    out->all_decoding = true;
    out->threads_min = rounds[0].threads_min;
    out->speedup_min = out->speedup_max = rounds[0].speedup;
    for (int r = 0; r < n; r++) {
        const bench_level *l = &rounds[r];
        out->all_decoding &= l->all_decoding;
        out->speedup_min = l->speedup < out->speedup_min ? l->speedup : out->speedup_min;
        out->speedup_max = l->speedup > out->speedup_max ? l->speedup : out->speedup_max;
        out->thread_cuts += l->thread_cuts;
        out->threads_min = l->threads_min < out->threads_min ? l->threads_min : out->threads_min;
        out->wall_s += l->wall_s;
        out->generated += l->generated;
        out->spec_drafted += l->spec_drafted;
        out->spec_accepted += l->spec_accepted;
        for (int k = 0; k < TS_SPEC_SOURCE_COUNT; k++) {
            out->spec_source[k].drafted += l->spec_source[k].drafted;
            out->spec_source[k].accepted += l->spec_source[k].accepted;
        }
        out->spec_draft_s += l->spec_draft_s;
        profile_add(&out->decode, &l->decode);
        profile_add(&out->prompt, &l->prompt);
    }
    out->noisy = bench_phases_vary(rounds, n);
}
#undef ROUNDS_MEDIAN

static double qmat_bytes(const simd_qmat *m)
{
    return (double)m->N * (double)m->row_bytes;
}

double bench_weight_bytes(const ts_model *m)
{
    const ts_model_config *c = &m->cfg;
    const model_weights *w = &m->w;
    double bytes = qmat_bytes(&w->output) + (double)c->dim * sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        const model_layer *ly = &w->layers[l];
        bytes += qmat_bytes(&ly->wq) + qmat_bytes(&ly->wk) + qmat_bytes(&ly->wv) +
                 qmat_bytes(&ly->wo) + qmat_bytes(&ly->w1) + qmat_bytes(&ly->w3) +
                 qmat_bytes(&ly->w2) + 2.0 * c->dim * sizeof(float);
        if (c->n_experts > 0) /* the router and a token's experts (expert 0's size) */
            bytes += qmat_bytes(&ly->router) +
                     c->n_experts_used * (qmat_bytes(&ly->experts[MODEL_EXPERT_GATE]) +
                                          qmat_bytes(&ly->experts[MODEL_EXPERT_UP]) +
                                          qmat_bytes(&ly->experts[MODEL_EXPERT_DOWN])) +
                     /* and the shared expert every token reads, where it has one */
                     qmat_bytes(&ly->shexp_gate) + qmat_bytes(&ly->shexp_up) +
                     qmat_bytes(&ly->shexp_down) + qmat_bytes(&ly->shexp_gate_inp);
    }
    return bytes;
}

void bench_expert_rates(uint64_t layers, uint64_t read, uint64_t pairs, double *per_layer,
                        double *rows_each)
{
    *per_layer = layers ? (double)read / (double)layers : 0.0;
    *rows_each = read ? (double)pairs / (double)read : 0.0;
}

static cJSON *pair(double p50, double p99)
{
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddNumberToObject(o, "p50", p50) || !cJSON_AddNumberToObject(o, "p99", p99))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* {"steps", "rows_per_step", "ms_per_step": {phase: ms...}, "mixed": {"steps",
 * "decode_rows_per_step", "prompt_rows_per_step"}} of a kind of step; "mixed" counts its
 * steps that decoded beside prompt rows (0s where none did: decode-only steps have
 * decode rows but never a mixed step, so their rows must not be divided among none). */
static cJSON *profile_json(const ts_step_profile *p)
{
    cJSON *o = cJSON_CreateObject(), *ms = NULL, *mixed = NULL;
    double steps = p->steps ? (double)p->steps : 1.0;
    double n_mixed = (double)p->mixed_steps;
    double mixed_decode = n_mixed > 0 ? (double)p->decode_rows / n_mixed : 0.0;
    double mixed_prompt = n_mixed > 0 ? ((double)p->mixed_rows - (double)p->decode_rows) / n_mixed : 0.0;
    if (!o || !cJSON_AddNumberToObject(o, "steps", (double)p->steps) ||
        !cJSON_AddNumberToObject(o, "rows_per_step", (double)p->rows / steps) ||
        !(ms = cJSON_AddObjectToObject(o, "ms_per_step")) ||
        !(mixed = cJSON_AddObjectToObject(o, "mixed")) ||
        !cJSON_AddNumberToObject(mixed, "steps", (double)p->mixed_steps) ||
        !cJSON_AddNumberToObject(mixed, "decode_rows_per_step", mixed_decode) ||
        !cJSON_AddNumberToObject(mixed, "prompt_rows_per_step", mixed_prompt)) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int i = 0; i < TS_PHASE_COUNT; i++)
        if (!cJSON_AddNumberToObject(ms, ts_step_phase_name((ts_step_phase)i),
                                     1e3 * p->seconds[i] / steps)) {
            cJSON_Delete(o);
            return NULL;
        }
    cJSON *moe = NULL;
    double per_layer, rows_each;
    bench_expert_rates(p->moe_layers, p->experts_read, p->expert_pairs, &per_layer, &rows_each);
    if (p->moe_layers > 0 &&
        (!(moe = cJSON_AddObjectToObject(o, "experts")) ||
         !cJSON_AddNumberToObject(moe, "read_per_layer", per_layer) ||
         !cJSON_AddNumberToObject(moe, "rows_each", rows_each))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* spec.sources: {"ngram": {drafted, accepted, acceptance}, ...} for the sources that
 * drafted during the level. False when out of memory. */
static bool spec_sources_json(cJSON *spec, const bench_level *l)
{
    cJSON *by = cJSON_AddObjectToObject(spec, "sources");
    if (!by)
        return false;
    for (int k = 0; k < TS_SPEC_SOURCE_COUNT; k++) {
        const ts_spec_source_stats *src = &l->spec_source[k];
        if (src->drafted == 0)
            continue;
        cJSON *o = cJSON_AddObjectToObject(by, ts_spec_source_name((ts_spec_source)k));
        if (!o || !cJSON_AddNumberToObject(o, "drafted", (double)src->drafted) ||
            !cJSON_AddNumberToObject(o, "accepted", (double)src->accepted) ||
            !cJSON_AddNumberToObject(o, "acceptance",
                                     (double)src->accepted / (double)src->drafted))
            return false;
    }
    return true;
}

static cJSON *level_json(const bench_level *l)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *ttft = pair(l->ttft_p50_ms, l->ttft_p99_ms), *itl = pair(l->itl_p50_ms, l->itl_p99_ms);
    if (!o || !ttft || !itl)
        goto fail;
    if (!cJSON_AddNumberToObject(o, "concurrency", l->concurrency) ||
        !cJSON_AddNumberToObject(o, "decode_tok_s", l->decode_tok_s) ||
        !cJSON_AddBoolToObject(o, "all_decoding", l->all_decoding) ||
        !cJSON_AddBoolToObject(o, "noisy", l->noisy) ||
        !cJSON_AddNumberToObject(o, "thread_cuts", l->thread_cuts) ||
        !cJSON_AddNumberToObject(o, "threads_min", l->threads_min) ||
        !cJSON_AddNumberToObject(o, "prefill_tok_s", l->prefill_tok_s) ||
        !cJSON_AddNumberToObject(o, "e2e_tok_s", l->e2e_tok_s))
        goto fail;
    cJSON_AddItemToObject(o, "ttft_ms", ttft);
    ttft = NULL;
    cJSON_AddItemToObject(o, "itl_ms", itl);
    itl = NULL;
    double range[2] = {l->speedup_min, l->speedup_max};
    cJSON *speedup_range = cJSON_CreateDoubleArray(range, 2);
    if (!speedup_range)
        goto fail;
    cJSON_AddItemToObject(o, "speedup_range", speedup_range);
    if (!cJSON_AddNumberToObject(o, "speedup", l->speedup) ||
        !cJSON_AddNumberToObject(o, "generated", (double)l->generated) ||
        !cJSON_AddNumberToObject(o, "wall_s", l->wall_s))
        goto fail;
    cJSON *spec = cJSON_AddObjectToObject(o, "spec");
    if (!spec || !cJSON_AddNumberToObject(spec, "drafted", (double)l->spec_drafted) ||
        !cJSON_AddNumberToObject(spec, "accepted", (double)l->spec_accepted) ||
        !cJSON_AddNumberToObject(spec, "acceptance",
                                 l->spec_drafted ? (double)l->spec_accepted /
                                                       (double)l->spec_drafted : 0.0) ||
        !cJSON_AddNumberToObject(spec, "draft_model_s", l->spec_draft_s) ||
        !spec_sources_json(spec, l))
        goto fail;
    cJSON *prof = profile_json(&l->decode);
    if (!prof)
        goto fail;
    cJSON_AddItemToObject(o, "decode_steps", prof);
    if (!(prof = profile_json(&l->prompt)))
        goto fail;
    cJSON_AddItemToObject(o, "prompt_steps", prof);
    return o;

fail:
    cJSON_Delete(ttft);
    cJSON_Delete(itl);
    cJSON_Delete(o);
    return NULL;
}

cJSON *bench_result_json(const bench_result *r, const bench_config *cfg, const char *model,
                         int threads)
{
    cJSON *root = cJSON_CreateObject(), *levels = NULL;
    if (!root || !cJSON_AddStringToObject(root, "model", model) ||
        !cJSON_AddNumberToObject(root, "threads", threads) ||
        !cJSON_AddNumberToObject(root, "prompt_len", cfg->prompt_len) ||
        !cJSON_AddNumberToObject(root, "n_tokens", cfg->n_tokens) ||
        !cJSON_AddNumberToObject(root, "rounds", cfg->rounds) ||
        !(levels = cJSON_AddArrayToObject(root, "levels")))
        goto fail;
    for (int i = 0; i < r->n_levels; i++) {
        cJSON *l = level_json(&r->levels[i]);
        if (!l)
            goto fail;
        cJSON_AddItemToArray(levels, l);
    }
    if (r->has_prefix) {
        cJSON *p = cJSON_AddObjectToObject(root, "prefix");
        if (!p || !cJSON_AddNumberToObject(p, "tokens", cfg->shared_prefix) ||
            !cJSON_AddNumberToObject(p, "ttft_cold_ms", r->ttft_cold_ms) ||
            !cJSON_AddNumberToObject(p, "ttft_cached_ms", r->ttft_cached_ms) ||
            !cJSON_AddNumberToObject(p, "cached_tokens", r->cached_tokens))
            goto fail;
    }
    return root;

fail:
    cJSON_Delete(root);
    return NULL;
}
