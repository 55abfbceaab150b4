/* api_llama.c: llama.cpp's native POST /completion over the text completions path: its
 * body (prompt, n_predict, stream, stop, n_probs and the sampling fields) becomes a
 * completions body; the answer becomes llama.cpp's object (content, stop, stop_type,
 * stopping_word, tokens_predicted, tokens_evaluated, timings, completion_probabilities),
 * or its stream of "data: {content, stop: false}" lines ended by that object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/api.h"

/* ---- the request */

/* n_predict: -1 (or left out) means "until the context is full", which is the route's
 * default; any other value is max_tokens, checked by the completions parser. */
static ts_status llama_to_completion(const cJSON *root, cJSON **out, char *ignored,
                                     oai_error *err)
{
    (void)ignored; /* the completions parser lists what it does not know */
    *out = cJSON_Duplicate(root, true);
    if (!*out)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    cJSON *np = cJSON_DetachItemFromObjectCaseSensitive(*out, "n_predict");
    bool until_full = !np || cJSON_IsNull(np) || (cJSON_IsNumber(np) && np->valuedouble == -1);
    if (!until_full) {
        cJSON_DeleteItemFromObjectCaseSensitive(*out, "max_tokens");
        cJSON_AddItemToObject(*out, "max_tokens", np);
        np = NULL;
    }
    cJSON_Delete(np);
    return TS_OK;
}

/* ---- the answer */

/* llama.cpp's stop_type: "word" for a stop string, "limit" for n_predict or the
 * context, "eos" for the model's end (and a cancelled request, which it has no name for). */
static const char *stop_type(const api_answer *a)
{
    return a->stop_sequence                 ? "word"
           : !strcmp(a->finish, "length")   ? "limit"
                                            : "eos";
}

/* {"prompt_n", "prompt_ms", ..., "predicted_per_second"}: the server's clock, the prompt
 * from arrival to the first token, generation from the first token to the last. */
static cJSON *timings_json(const oai_usage *u)
{
    double prompt_ms = u->timed ? u->ttft_ms : 0, gen_ms = u->timed ? u->generation_ms : 0;
    int pn = u->prompt_tokens - u->cached_tokens, gn = u->completion_tokens;
    cJSON *t = cJSON_CreateObject();
    bool ok = t && cJSON_AddNumberToObject(t, "cache_n", u->cached_tokens) &&
              cJSON_AddNumberToObject(t, "prompt_n", pn) &&
              cJSON_AddNumberToObject(t, "prompt_ms", prompt_ms) &&
              cJSON_AddNumberToObject(t, "prompt_per_token_ms", pn > 0 ? prompt_ms / pn : 0) &&
              cJSON_AddNumberToObject(t, "prompt_per_second",
                                      prompt_ms > 0 ? pn / (prompt_ms / 1e3) : 0) &&
              cJSON_AddNumberToObject(t, "predicted_n", gn) &&
              cJSON_AddNumberToObject(t, "predicted_ms", gen_ms) &&
              cJSON_AddNumberToObject(t, "predicted_per_token_ms",
                                      gn > 1 ? gen_ms / (gn - 1) : 0) &&
              cJSON_AddNumberToObject(t, "predicted_per_second",
                                      gn > 1 && gen_ms > 0 ? (gn - 1) / (gen_ms / 1e3) : 0);
    if (!ok) {
        cJSON_Delete(t);
        return NULL;
    }
    return t;
}

/* {"token", "bytes": [...], "logprob"} of n bytes at s; NULL out of memory. */
static cJSON *prob_entry(const char *s, size_t n, float logprob)
{
    cJSON *e = cJSON_CreateObject(), *tok = oai_bytes_string(s, n);
    cJSON *bytes = cJSON_CreateArray();
    bool ok = e && tok && bytes && cJSON_AddItemToObject(e, "token", tok);
    if (!ok)
        cJSON_Delete(tok);
    for (size_t i = 0; ok && i < n; i++)
        ok = cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)s[i]));
    ok = ok && cJSON_AddItemToObject(e, "bytes", bytes);
    if (!ok || !cJSON_AddNumberToObject(e, "logprob", logprob)) {
        if (!cJSON_GetObjectItemCaseSensitive(e, "bytes"))
            cJSON_Delete(bytes);
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* completion_probabilities: per generated token its entry and top_logprobs (n_probs). */
static cJSON *probs_json(const oai_token_logprob *lps, size_t n)
{
    cJSON *list = cJSON_CreateArray();
    bool ok = list != NULL;
    for (size_t k = 0; ok && k < n; k++) {
        cJSON *e = prob_entry(lps[k].bytes, lps[k].len, lps[k].logprob);
        cJSON *top = e ? cJSON_AddArrayToObject(e, "top_logprobs") : NULL;
        ok = top != NULL;
        for (int i = 0; ok && i < lps[k].n_top; i++) {
            cJSON *t = prob_entry(lps[k].top[i].bytes, lps[k].top[i].len, lps[k].top[i].logprob);
            ok = t && cJSON_AddItemToArray(top, t);
            if (!ok)
                cJSON_Delete(t);
        }
        ok = ok && cJSON_AddItemToArray(list, e);
        if (!ok)
            cJSON_Delete(e);
    }
    if (!ok) {
        cJSON_Delete(list);
        return NULL;
    }
    return list;
}

/* What llama.cpp repeats of the request: generation_settings, prompt, and tokens (the
 * generated ids, which it gives only for return_tokens: always [] here). */
static bool add_request(cJSON *r, const api_answer *a)
{
    if (!cJSON_AddArrayToObject(r, "tokens"))
        return false;
    if (a->req) {
        cJSON *gs = api__llama_settings(a->req);
        if (!gs || !cJSON_AddItemToObject(r, "generation_settings", gs)) {
            cJSON_Delete(gs);
            return false;
        }
    }
    if (a->prompt) {
        cJSON *p = oai_bytes_string(a->prompt, a->prompt_len);
        if (!p || !cJSON_AddItemToObject(r, "prompt", p)) {
            cJSON_Delete(p);
            return false;
        }
    }
    return true;
}

/* The final object: content (text of n bytes; "" when streamed) and the answer's
 * end, counts and timings. */
static cJSON *final_json(const api_answer *a, const char *text, size_t n)
{
    cJSON *r = cJSON_CreateObject(), *content = oai_bytes_string(text, n);
    const oai_usage *u = &a->usage;
    bool ok = r && content && cJSON_AddItemToObject(r, "content", content);
    if (!ok)
        cJSON_Delete(content);
    ok = ok && cJSON_AddNumberToObject(r, "index", 0) &&
         cJSON_AddNumberToObject(r, "id_slot", 0) && cJSON_AddTrueToObject(r, "stop") &&
         cJSON_AddStringToObject(r, "model", a->meta->model) &&
         cJSON_AddStringToObject(r, "stop_type", stop_type(a)) &&
         cJSON_AddStringToObject(r, "stopping_word", a->stop_sequence ? a->stop_sequence : "") &&
         cJSON_AddNumberToObject(r, "tokens_predicted", u->completion_tokens) &&
         cJSON_AddNumberToObject(r, "tokens_evaluated", u->prompt_tokens) &&
         cJSON_AddNumberToObject(r, "tokens_cached", u->cached_tokens) &&
         cJSON_AddFalseToObject(r, "truncated");
    cJSON *t = ok ? timings_json(u) : NULL;
    ok = t && cJSON_AddItemToObject(r, "timings", t);
    if (!ok)
        cJSON_Delete(t);
    ok = ok && add_request(r, a);
    if (ok && a->logprobs) {
        cJSON *p = probs_json(a->logprobs, a->n_logprobs);
        ok = p && cJSON_AddItemToObject(r, "completion_probabilities", p);
        if (!ok)
            cJSON_Delete(p);
    }
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static char *llama_json(const api_answer *a)
{
    cJSON *r = final_json(a, a->text, a->text_len);
    char *s = r ? cJSON_PrintUnformatted(r) : NULL;
    cJSON_Delete(r);
    return s;
}

/* ---- the stream: "data: JSON" lines, no event names, no [DONE] */

static bool data_line(strbuf *out, cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    bool ok = s && strbuf_addf(out, "data: %s\n\n", s);
    free(s);
    return ok;
}

static bool begin(api_stream *s, strbuf *out)
{
    (void)s, (void)out;
    return true;
}

static bool text(api_stream *s, const char *t, size_t len, strbuf *out)
{
    (void)s;
    cJSON *j = cJSON_CreateObject(), *content = oai_bytes_string(t, len);
    bool ok = j && content && cJSON_AddItemToObject(j, "content", content);
    if (!ok)
        cJSON_Delete(content);
    ok = ok && cJSON_AddNumberToObject(j, "index", 0) &&
         cJSON_AddNumberToObject(j, "id_slot", 0) && cJSON_AddFalseToObject(j, "stop");
    if (!ok) {
        cJSON_Delete(j);
        return false;
    }
    return data_line(out, j);
}

static bool call(api_stream *s, const oai_tool_call *c, strbuf *out)
{
    (void)s, (void)c, (void)out; /* a text completion has no tools */
    return true;
}

static bool end(api_stream *s, const api_answer *a, strbuf *out)
{
    (void)s;
    cJSON *j = final_json(a, "", 0);
    return j && data_line(out, j);
}

const api_ops api__llama_ops = {llama_to_completion, llama_json, begin, text, call, end};
