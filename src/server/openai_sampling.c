/* openai_sampling.c: the sampling fields of llama.cpp's and vLLM's requests (repeat_penalty,
 * typical_p, mirostat, DRY, XTC, top_n_sigma, min_keep, n_probs) into the request's
 * sampling parameters; their ranges are checked with the others (ts_sampling_params_check). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"

static const cJSON *given(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNull(f) ? NULL : f;
}

static ts_status wrong_type(oai_error *err, const char *name, const char *want)
{
    return oai_error_set(err, 400, name, "invalid_type", "'%s' must be %s", name, want);
}

static ts_status number(const cJSON *root, const char *name, float *out, oai_error *err)
{
    const cJSON *f = given(root, name);
    if (!f)
        return TS_OK;
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
        return wrong_type(err, name, "a number");
    *out = (float)f->valuedouble;
    return TS_OK;
}

/* An integer within int's range; the field's own range is checked later. */
static ts_status integer(const cJSON *root, const char *name, int *out, oai_error *err)
{
    const cJSON *f = given(root, name);
    if (!f)
        return TS_OK;
    double v = cJSON_IsNumber(f) ? f->valuedouble : NAN;
    if (!isfinite(v) || v != trunc(v))
        return wrong_type(err, name, "an integer");
    if (v < -2147483647.0 || v > 2147483647.0)
        return oai_error_set(err, 400, name, "out_of_range", "'%s' is out of range (got %.0f)",
                             name, v);
    *out = (int)v;
    return TS_OK;
}

/* repeat_penalty is llama.cpp's name of repetition_penalty: both may be given only alike. */
static ts_status read_repeat_penalty(const cJSON *root, ts_sampling_params *p, oai_error *err)
{
    const cJSON *a = given(root, "repeat_penalty"), *b = given(root, "repetition_penalty");
    if (a && b && !(cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble == b->valuedouble))
        return oai_error_set(err, 400, "repeat_penalty", "invalid_value",
                             "'repeat_penalty' and 'repetition_penalty' name one setting; "
                             "they differ");
    return number(root, "repeat_penalty", &p->repetition_penalty, err);
}

/* An array of strings; [] turns DRY's breakers off. */
static ts_status read_breakers(const cJSON *root, ts_sampling_params *p, oai_error *err)
{
    const char *name = "dry_sequence_breakers";
    const cJSON *f = given(root, name), *x;
    if (!f)
        return TS_OK;
    if (!cJSON_IsArray(f))
        return wrong_type(err, name, "an array of strings");
    if (cJSON_GetArraySize(f) > TS_SAMPLING_MAX_DRY_BREAKERS)
        return oai_error_set(err, 400, name, "out_of_range", "'%s' may hold at most %d strings",
                             name, TS_SAMPLING_MAX_DRY_BREAKERS);
    p->n_dry_breakers = 0;
    cJSON_ArrayForEach(x, f) {
        if (!cJSON_IsString(x))
            return wrong_type(err, name, "an array of strings");
        size_t n = strlen(x->valuestring);
        if (n == 0 || n >= TS_SAMPLING_MAX_DRY_BREAKER_LEN)
            return oai_error_set(err, 400, name, "out_of_range",
                                 "each of '%s' must be 1 to %d bytes (got %zu)", name,
                                 TS_SAMPLING_MAX_DRY_BREAKER_LEN - 1, n);
        memcpy(p->dry_breakers[p->n_dry_breakers++], x->valuestring, n + 1);
    }
    return TS_OK;
}

/* n_probs (llama.cpp): this many top tokens' log-probabilities with each token, as
 * top_logprobs; given with logprobs, they must agree. */
static ts_status read_n_probs(const cJSON *root, ts_sampling_params *p, oai_error *err)
{
    int k = 0;
    if (integer(root, "n_probs", &k, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    if (k < 0 || k > TS_SAMPLING_MAX_TOP_LOGPROBS)
        return oai_error_set(err, 400, "n_probs", "out_of_range",
                             "'n_probs' must be between 0 and %d", TS_SAMPLING_MAX_TOP_LOGPROBS);
    if (k == 0)
        return TS_OK;
    if (p->logprobs && p->top_logprobs != k)
        return oai_error_set(err, 400, "n_probs", "invalid_value",
                             "'n_probs' (%d) differs from the logprobs asked for (%d)", k,
                             p->top_logprobs);
    p->logprobs = true;
    p->top_logprobs = k;
    return TS_OK;
}

ts_status oai_read_llama_sampling(const cJSON *root, oai_request *r, oai_error *err)
{
    ts_sampling_params *p = &r->sampling;
    if (read_repeat_penalty(root, p, err) != TS_OK ||
        integer(root, "repeat_last_n", &p->repeat_last_n, err) != TS_OK ||
        number(root, "typical_p", &p->typical_p, err) != TS_OK ||
        number(root, "top_n_sigma", &p->top_n_sigma, err) != TS_OK ||
        integer(root, "min_keep", &p->min_keep, err) != TS_OK ||
        number(root, "xtc_probability", &p->xtc_probability, err) != TS_OK ||
        number(root, "xtc_threshold", &p->xtc_threshold, err) != TS_OK ||
        integer(root, "mirostat", &p->mirostat, err) != TS_OK ||
        number(root, "mirostat_tau", &p->mirostat_tau, err) != TS_OK ||
        number(root, "mirostat_eta", &p->mirostat_eta, err) != TS_OK ||
        number(root, "dry_multiplier", &p->dry_multiplier, err) != TS_OK ||
        number(root, "dry_base", &p->dry_base, err) != TS_OK ||
        integer(root, "dry_allowed_length", &p->dry_allowed_length, err) != TS_OK ||
        integer(root, "dry_penalty_last_n", &p->dry_penalty_last_n, err) != TS_OK ||
        read_breakers(root, p, err) != TS_OK || read_n_probs(root, p, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    return TS_OK;
}
