/* prompt_logprobs.c: vLLM's prompt_logprobs extension on /v1/completions and
 * /v1/chat/completions: the field read, each prompt token's score kept as the engine
 * gives it (TS_EVENT_PROMPT), and the answer's list in vLLM's shape: null for the first
 * token, then per token {"token id": {"logprob", "rank", "decoded_token"}} holding the
 * prompt's own token and the top alternatives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "server/job.h"

/* ---- the field */

ts_status oai_read_prompt_logprobs(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "prompt_logprobs");
    if (!f || cJSON_IsNull(f))
        return TS_OK;
    double v = cJSON_IsNumber(f) ? f->valuedouble : NAN;
    if (!(v == floor(v)) || v < 0)
        return oai_error_set(err, 400, "prompt_logprobs", "invalid_type",
                             "'prompt_logprobs' must be an integer from 0 to %d",
                             OAI_MAX_TOP_LOGPROBS);
    if (v > OAI_MAX_TOP_LOGPROBS)
        return oai_error_set(err, 400, "prompt_logprobs", "out_of_range",
                             "'prompt_logprobs' is %.0f; at most %d alternatives per prompt "
                             "token are returned",
                             v, OAI_MAX_TOP_LOGPROBS);
    int k = (int)v;
    if (r->sampling.logprobs && r->sampling.top_logprobs != k)
        return oai_error_set(err, 400, "prompt_logprobs", "unsupported_value",
                             "'prompt_logprobs' (%d) must equal the alternatives asked for the "
                             "completion's tokens (%d) when both are given",
                             k, r->sampling.top_logprobs);
    if (r->n > 1 || r->stream)
        return oai_error_set(err, 400, "prompt_logprobs", "unsupported_value",
                             "'prompt_logprobs' is supported with n 1 and without stream");
    r->prompt_logprobs = true;
    r->prompt_logprobs_only = !r->sampling.logprobs;
    r->sampling.logprobs = true; /* the engine gives alternatives only with logprobs */
    r->sampling.top_logprobs = k;
    return TS_OK;
}

/* ---- the scores */

bool plp_collect(srv_job *j, const ts_event *ev)
{
    if (!job_grow((void **)&j->vlps, &j->cap_vlps, j->n_vlps + 1, sizeof *j->vlps))
        return false;
    plp_entry *p = &j->vlps[j->n_vlps++];
    p->token = ev->token;
    p->logprob = ev->logprob;
    p->rank = ev->rank;
    p->n_top = ev->n_top < TS_MAX_TOP_LOGPROBS ? ev->n_top : TS_MAX_TOP_LOGPROBS;
    memcpy(p->top, ev->top, (size_t)p->n_top * sizeof *p->top);
    return true;
}

/* ---- the answer (n is 1: the field refuses more) */

enum { PLP_FLOOR = -9999 }; /* what OpenAI writes for a token ruled out (-infinity) */

/* Appends "id":{"decoded_token","logprob","rank"} (a comma first unless first). */
static void add_candidate(strbuf *b, const ts_tokenizer *tok, int32_t id, float logprob,
                          int rank, bool first)
{
    size_t len = 0;
    const char *bytes = ts_token_bytes(tok, id, &len);
    cJSON *text = oai_bytes_string(bytes ? bytes : "", bytes ? len : 0);
    char *lit = text ? cJSON_PrintUnformatted(text) : NULL;
    cJSON_Delete(text);
    if (!lit) {
        b->failed = true;
        return;
    }
    double lp = logprob >= PLP_FLOOR ? (double)logprob : PLP_FLOOR;
    strbuf_addf(b, "%s\"%d\":{\"decoded_token\":%s,\"logprob\":%.6g,\"rank\":%d}",
                first ? "" : ",", (int)id, lit, lp, rank);
    free(lit);
}

/* [null, {...}, ...]: one entry per prompt token, written as text (a cJSON tree would
 * hold ~250 bytes a candidate); malloc'd, NULL out of memory. */
static char *plp_list(const srv_job *j)
{
    strbuf b = {0};
    strbuf_addf(&b, "[null");
    for (size_t k = 0; !b.failed && k < j->n_vlps; k++) {
        const plp_entry *p = &j->vlps[k];
        strbuf_addf(&b, ",{");
        add_candidate(&b, j->tok, p->token, p->logprob, p->rank, true);
        for (int i = 0; i < p->n_top; i++)
            if (p->top[i].token != p->token) /* the prompt's own token is there already */
                add_candidate(&b, j->tok, p->top[i].token, p->top[i].logprob, i + 1, false);
        strbuf_addf(&b, "}");
    }
    strbuf_addf(&b, "]");
    if (b.failed) {
        strbuf_free(&b);
        return NULL;
    }
    return b.s;
}

char *plp_attach(const srv_job *j, char *json)
{
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    free(json);
    char *text = root ? plp_list(j) : NULL;
    cJSON *list = text ? cJSON_CreateRaw(text) : NULL;
    free(text);
    /* a completion's list goes in its choice, a chat's beside the choices (vLLM's places) */
    cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    cJSON *at = j->oreq.kind == OAI_CHAT ? root : choice;
    bool ok = list && at && cJSON_AddItemToObject(at, "prompt_logprobs", list);
    if (!ok)
        cJSON_Delete(list);
    if (ok && j->oreq.prompt_logprobs_only && /* the completion's were not asked for */
        cJSON_GetObjectItemCaseSensitive(choice, "logprobs"))
        ok = cJSON_ReplaceItemInObjectCaseSensitive(choice, "logprobs", cJSON_CreateNull());
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}
