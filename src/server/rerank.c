/* rerank.c: POST /v1/rerank's request shape (query, documents as strings or objects with
 * a text, top_n, return_documents, and tessera's "instruction"), the reranker's user turn,
 * its score and the order of the results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/rerank.h"

void rerank_request_clear(rerank_request *r)
{
    for (size_t i = 0; r->documents && i < r->n_documents; i++)
        free(r->documents[i]);
    free(r->documents);
    free(r->model);
    free(r->query);
    free(r->instruction);
    memset(r, 0, sizeof *r);
}

/* An optional string field of root into *out (strdup'd); missing or null leaves it. */
static ts_status opt_string(const cJSON *root, const char *name, char **out, oai_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v))
        return TS_OK;
    if (!cJSON_IsString(v))
        return oai_error_set(e, 400, name, "invalid_type", "'%s' must be a string", name);
    if (!(*out = strdup(v->valuestring)))
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    return TS_OK;
}

/* documents: an array of strings or of objects with a string "text" (Jina's form). */
static ts_status parse_documents(const cJSON *docs, rerank_request *r, oai_error *e)
{
    if (!docs)
        return oai_error_set(e, 400, "documents", "missing_required_parameter",
                             "'documents' is required");
    if (!cJSON_IsArray(docs))
        return oai_error_set(e, 400, "documents", "invalid_type",
                             "'documents' must be an array of strings");
    int n = cJSON_GetArraySize(docs);
    if (n == 0)
        return oai_error_set(e, 400, "documents", "invalid_value", "'documents' is empty");
    if (n > RERANK_MAX_DOCUMENTS)
        return oai_error_set(e, 400, "documents", "invalid_value",
                             "'documents' holds %d items, over the limit of %d", n,
                             RERANK_MAX_DOCUMENTS);
    if (!(r->documents = calloc((size_t)n, sizeof *r->documents)))
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    r->n_documents = (size_t)n;
    int i = 0;
    for (const cJSON *d = docs->child; d; d = d->next, i++) {
        const cJSON *text = cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "text") : d;
        if (!cJSON_IsString(text)) {
            char param[32];
            snprintf(param, sizeof param, "documents[%d]", i);
            return oai_error_set(e, 400, param, "invalid_type",
                                 "'%s' must be a string or an object with a string 'text'",
                                 param);
        }
        if (!(r->documents[i] = strdup(text->valuestring)))
            return oai_error_set(e, 500, NULL, NULL, "out of memory");
    }
    return TS_OK;
}

/* top_n (a non-negative integer; 0 or absent: every document) and return_documents. */
static ts_status parse_options(const cJSON *root, rerank_request *r, oai_error *e)
{
    r->top_n = r->n_documents;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "top_n");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
            return oai_error_set(e, 400, "top_n", "invalid_value",
                                 "'top_n' must be a non-negative integer");
        if (v->valuedouble >= 1 && v->valuedouble < (double)r->n_documents)
            r->top_n = (size_t)v->valuedouble;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "return_documents");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v))
            return oai_error_set(e, 400, "return_documents", "invalid_type",
                                 "'return_documents' must be a boolean");
        r->return_documents = cJSON_IsTrue(v);
    }
    return TS_OK;
}

static ts_status parse_fields(const cJSON *root, rerank_request *r, oai_error *e)
{
    ts_status st = opt_string(root, "model", &r->model, e);
    if (st == TS_OK)
        st = opt_string(root, "query", &r->query, e);
    if (st == TS_OK && (!r->query || !r->query[0]))
        st = oai_error_set(e, 400, "query", r->query ? "invalid_value"
                                                     : "missing_required_parameter",
                           r->query ? "'query' is an empty string" : "'query' is required");
    if (st == TS_OK)
        st = opt_string(root, "instruction", &r->instruction, e);
    if (st == TS_OK && !r->instruction && !(r->instruction = strdup(RERANK_DEFAULT_INSTRUCTION)))
        st = oai_error_set(e, 500, NULL, NULL, "out of memory");
    if (st == TS_OK)
        st = parse_documents(cJSON_GetObjectItemCaseSensitive(root, "documents"), r, e);
    if (st == TS_OK)
        st = parse_options(root, r, e);
    return st;
}

ts_status rerank_parse(const char *body, size_t len, rerank_request *r, oai_error *e)
{
    memset(r, 0, sizeof *r);
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return oai_error_set(e, 400, NULL, "invalid_json", "the body is not a JSON object");
    }
    ts_status st = parse_fields(root, r, e);
    cJSON_Delete(root);
    if (st != TS_OK)
        rerank_request_clear(r);
    return st;
}

char *rerank_user_turn(const char *instruction, const char *query, const char *document)
{
    static const char fmt[] = "<Instruct>: %s\n<Query>: %s\n<Document>: %s";
    size_t n = sizeof fmt + strlen(instruction) + strlen(query) + strlen(document);
    char *s = malloc(n);
    if (s)
        snprintf(s, n, fmt, instruction, query, document);
    return s;
}

double rerank_score(double yes, double no)
{
    /* softmax over the two: 1 / (1 + e^(no - yes)), exp never overflowing to NaN */
    double d = no - yes;
    if (d > 0)
        return exp(-d) / (1.0 + exp(-d));
    return 1.0 / (1.0 + exp(d));
}

void rerank_order(const double *scores, size_t n, size_t *order)
{
    /* insertion sort: stable (ties keep the documents' order), n is small */
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && scores[order[j - 1]] < scores[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* The bias that puts "yes" and "no" above every other token; the alternatives asked for,
 * so that both are found even where other tokens come near them. */
#define RERANK_BIAS 100.0f
enum { RERANK_TOP = 8 };

void rerank_params(ts_request_params *p, const int32_t *prompt, size_t n, int32_t yes,
                   int32_t no)
{
    ts_request_params_default(p);
    p->prompt = prompt;
    p->n_prompt = n;
    p->max_tokens = 1;
    p->ignore_eos = true;
    p->no_speculation = true;
    p->sampling.temperature = 0.0f;
    p->sampling.logprobs = true;
    p->sampling.top_logprobs = RERANK_TOP;
    p->sampling.logit_bias[0] = (ts_logit_bias){yes, RERANK_BIAS};
    p->sampling.logit_bias[1] = (ts_logit_bias){no, RERANK_BIAS};
    p->sampling.n_logit_bias = 2;
}

bool rerank_event_score(const ts_event *ev, int32_t yes, int32_t no, double *score)
{
    double lp_yes = NAN, lp_no = NAN;
    for (int k = 0; ev->kind == TS_EVENT_TOKEN && k < ev->n_top; k++) {
        if (ev->top[k].token == yes)
            lp_yes = ev->top[k].logprob;
        if (ev->top[k].token == no)
            lp_no = ev->top[k].logprob;
    }
    if (isnan(lp_yes) || isnan(lp_no) || !isfinite(lp_yes - lp_no))
        return false;
    *score = rerank_score(lp_yes, lp_no);
    return true;
}

/* Appends id to ids (n, cap) growing it; false when out of memory. */
static bool push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 64;
        int32_t *grown = realloc(*ids, grown_cap * sizeof *grown);
        if (!grown)
            return false;
        *ids = grown;
        *cap = grown_cap;
    }
    (*ids)[(*n)++] = id;
    return true;
}

/* text's plain tokens appended to ids. */
static ts_status push_text(const ts_tokenizer *tok, const char *text, int32_t **ids, size_t *n,
                           size_t *cap)
{
    ts_tokenize_opts o = {0};
    int32_t *part = NULL;
    size_t n_part = 0;
    ts_status st = ts_tokenize_alloc(tok, text, strlen(text), &o, &part, &n_part);
    for (size_t i = 0; st == TS_OK && i < n_part; i++)
        if (!push_id(ids, n, cap, part[i]))
            st = TS_ERR_NOMEM;
    free(part);
    return st;
}

ts_status rerank_pair_ids(const ts_tokenizer *tok, const char *query, const char *document,
                          int32_t **ids, size_t *n)
{
    size_t cap = 0;
    int32_t sep = ts_tokenizer_sep(tok);
    int32_t eos = ts_tokenizer_eos(tok) >= 0 ? ts_tokenizer_eos(tok) : sep;
    bool add_eos = ts_tokenizer_add_eos(tok) && eos >= 0;
    *ids = NULL;
    *n = 0;
    ts_status st = TS_OK;
    if (ts_tokenizer_add_bos(tok) && !push_id(ids, n, &cap, ts_tokenizer_bos(tok)))
        st = TS_ERR_NOMEM;
    if (st == TS_OK)
        st = push_text(tok, query, ids, n, &cap);
    if (st == TS_OK && ((add_eos && !push_id(ids, n, &cap, eos)) ||
                        (sep >= 0 && !push_id(ids, n, &cap, sep))))
        st = TS_ERR_NOMEM;
    if (st == TS_OK)
        st = push_text(tok, document, ids, n, &cap);
    if (st == TS_OK && add_eos && !push_id(ids, n, &cap, eos))
        st = TS_ERR_NOMEM;
    if (st != TS_OK) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}
