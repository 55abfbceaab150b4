/* llama_settings.c: llama.cpp's "generation_settings" of a /completion answer: the
 * settings the request ran with, under llama.cpp's names. Settings tessera does not have
 * (dynatemp, n_keep, samplers order, lora, ...) are left out rather than given a value. */
#include <stdbool.h>

#include <cjson/cJSON.h>

#include "server/api.h"

/* llama.cpp's seed for "none given: the engine draws one" (LLAMA_DEFAULT_SEED). */
#define LLAMA_NO_SEED 4294967295.0

static bool add_strings(cJSON *o, const char *key, char *const *v, int n)
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i])))
            return false;
    return a != NULL;
}

static bool add_breakers(cJSON *o, const ts_sampling_params *p)
{
    cJSON *a = cJSON_AddArrayToObject(o, "dry_sequence_breakers");
    for (int i = 0; a && i < p->n_dry_breakers; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(p->dry_breakers[i])))
            return false;
    return a != NULL;
}

/* [{"bias", "token"}], as llama.cpp lists logit_bias. */
static bool add_logit_bias(cJSON *o, const ts_sampling_params *p)
{
    cJSON *a = cJSON_AddArrayToObject(o, "logit_bias");
    for (int i = 0; a && i < p->n_logit_bias; i++) {
        cJSON *e = cJSON_CreateObject();
        bool ok = e && cJSON_AddNumberToObject(e, "bias", p->logit_bias[i].bias) &&
                  cJSON_AddNumberToObject(e, "token", p->logit_bias[i].token);
        if (!ok || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            return false;
        }
    }
    return a != NULL;
}

/* tessera's own field: which constraint the output ran under. llama.cpp's "grammar" holds
 * GBNF text, which tessera does not keep once compiled: it is written ("") only when the
 * request had no constraint. */
static bool add_constraint(cJSON *o, const oai_request *r)
{
    const char *kind = r->format == OAI_FORMAT_JSON_OBJECT   ? "json_object"
                       : r->format == OAI_FORMAT_JSON_SCHEMA ? "json_schema"
                       : r->format == OAI_FORMAT_GRAMMAR     ? "grammar"
                                                             : "none";
    return cJSON_AddStringToObject(o, "constraint", kind) &&
           (r->format != OAI_FORMAT_TEXT || cJSON_AddStringToObject(o, "grammar", ""));
}

static bool add_samplers(cJSON *o, const ts_sampling_params *p)
{
    return cJSON_AddNumberToObject(o, "seed", p->has_seed ? (double)p->seed : LLAMA_NO_SEED) &&
           cJSON_AddNumberToObject(o, "temperature", p->temperature) &&
           cJSON_AddNumberToObject(o, "top_k", p->top_k) &&
           cJSON_AddNumberToObject(o, "top_p", p->top_p) &&
           cJSON_AddNumberToObject(o, "min_p", p->min_p) &&
           cJSON_AddNumberToObject(o, "top_n_sigma", p->top_n_sigma) &&
           cJSON_AddNumberToObject(o, "xtc_probability", p->xtc_probability) &&
           cJSON_AddNumberToObject(o, "xtc_threshold", p->xtc_threshold) &&
           cJSON_AddNumberToObject(o, "typical_p", p->typical_p) &&
           cJSON_AddNumberToObject(o, "repeat_last_n", p->repeat_last_n) &&
           cJSON_AddNumberToObject(o, "repeat_penalty", p->repetition_penalty) &&
           cJSON_AddNumberToObject(o, "presence_penalty", p->presence_penalty) &&
           cJSON_AddNumberToObject(o, "frequency_penalty", p->frequency_penalty) &&
           cJSON_AddNumberToObject(o, "dry_multiplier", p->dry_multiplier) &&
           cJSON_AddNumberToObject(o, "dry_base", p->dry_base) &&
           cJSON_AddNumberToObject(o, "dry_allowed_length", p->dry_allowed_length) &&
           cJSON_AddNumberToObject(o, "dry_penalty_last_n", p->dry_penalty_last_n) &&
           add_breakers(o, p) && cJSON_AddNumberToObject(o, "mirostat", p->mirostat) &&
           cJSON_AddNumberToObject(o, "mirostat_tau", p->mirostat_tau) &&
           cJSON_AddNumberToObject(o, "mirostat_eta", p->mirostat_eta) &&
           cJSON_AddNumberToObject(o, "min_keep", p->min_keep) && add_logit_bias(o, p);
}

cJSON *api__llama_settings(const oai_request *r)
{
    const ts_sampling_params *p = &r->sampling;
    int n_predict = r->max_tokens ? r->max_tokens : -1; /* -1: until the context is full */
    cJSON *o = cJSON_CreateObject();
    bool ok = o && add_samplers(o, p) && add_strings(o, "stop", r->stop, r->n_stop) &&
              cJSON_AddNumberToObject(o, "max_tokens", n_predict) &&
              cJSON_AddNumberToObject(o, "n_predict", n_predict) &&
              cJSON_AddBoolToObject(o, "ignore_eos", r->ignore_eos) &&
              cJSON_AddBoolToObject(o, "stream", r->stream) &&
              cJSON_AddNumberToObject(o, "n_probs", p->logprobs ? p->top_logprobs : 0) &&
              add_constraint(o, r);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
