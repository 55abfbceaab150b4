/* embeddings.c: POST /v1/embeddings in OpenAI's shape. Each input (a string, or token
 * ids) becomes one embed request of the model's engine, all submitted before any is
 * read, so they share the engine's batched steps with each other and with generation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "server/embeddings.h"
#include "server/server_internal.h"

void embed_request_clear(embed_request *r)
{
    for (size_t i = 0; r->inputs && i < r->n_inputs; i++) {
        free(r->inputs[i].text);
        free(r->inputs[i].ids);
    }
    free(r->inputs);
    free(r->model);
    memset(r, 0, sizeof *r);
}

/* A token-id array (arr, already known to be an array) into in->ids. */
static ts_status parse_ids(const cJSON *arr, embed_input *in, const char *param, oai_error *e)
{
    int n = cJSON_GetArraySize(arr);
    if (n == 0)
        return oai_error_set(e, 400, param, "invalid_value", "'%s' is an empty array", param);
    if (n > EMBED_MAX_TOKENS)
        return oai_error_set(e, 400, param, "invalid_value",
                             "'%s' holds %d tokens, over the limit of %d", param, n,
                             EMBED_MAX_TOKENS);
    if (!(in->ids = malloc((size_t)n * sizeof(int32_t))))
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    int i = 0;
    for (const cJSON *t = arr->child; t; t = t->next, i++) {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1.0;
        if (v < 0 || v > INT32_MAX || v != floor(v))
            return oai_error_set(e, 400, param, "invalid_value",
                                 "'%s' element %d is not a token id (a non-negative integer)",
                                 param, i);
        in->ids[i] = (int32_t)v;
    }
    in->n_ids = (size_t)n;
    return TS_OK;
}

/* One input: a non-empty string, or an array of token ids. */
static ts_status parse_one(const cJSON *v, embed_input *in, const char *param, oai_error *e)
{
    if (cJSON_IsString(v)) {
        if (v->valuestring[0] == '\0')
            return oai_error_set(e, 400, param, "invalid_value", "'%s' is an empty string",
                                 param);
        if (!(in->text = strdup(v->valuestring)))
            return oai_error_set(e, 500, NULL, NULL, "out of memory");
        return TS_OK;
    }
    if (cJSON_IsArray(v))
        return parse_ids(v, in, param, e);
    return oai_error_set(e, 400, param, "invalid_type",
                         "'%s' must be a string or an array of token ids", param);
}

/* input: a string, an array of token ids, an array of strings or an array of arrays of
 * token ids (the last two may mix). */
static ts_status parse_inputs(const cJSON *input, embed_request *r, oai_error *e)
{
    if (!input)
        return oai_error_set(e, 400, "input", "missing_required_parameter",
                             "'input' is required");
    bool one = cJSON_IsString(input) ||
               (cJSON_IsArray(input) && input->child && cJSON_IsNumber(input->child));
    int n = one ? 1 : cJSON_IsArray(input) ? cJSON_GetArraySize(input) : -1;
    if (n < 0)
        return oai_error_set(e, 400, "input", "invalid_type",
                             "'input' must be a string, an array of strings, an array of token "
                             "ids or an array of arrays of token ids");
    if (n == 0)
        return oai_error_set(e, 400, "input", "invalid_value", "'input' is an empty array");
    if (n > EMBED_MAX_INPUTS)
        return oai_error_set(e, 400, "input", "invalid_value",
                             "'input' holds %d items, over the limit of %d", n, EMBED_MAX_INPUTS);
    if (!(r->inputs = calloc((size_t)n, sizeof *r->inputs)))
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    r->n_inputs = (size_t)n;
    if (one)
        return parse_one(input, &r->inputs[0], "input", e);
    int i = 0;
    for (const cJSON *v = input->child; v; v = v->next, i++) {
        char param[32];
        snprintf(param, sizeof param, "input[%d]", i);
        ts_status st = parse_one(v, &r->inputs[i], param, e);
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

/* The optional fields: model, encoding_format, dimensions, truncate (user is accepted and
 * ignored, as it only names the caller). */
static ts_status parse_options(const cJSON *root, embed_request *r, oai_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v))
            return oai_error_set(e, 400, "model", "invalid_type", "'model' must be a string");
        if (!(r->model = strdup(v->valuestring)))
            return oai_error_set(e, 500, NULL, NULL, "out of memory");
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v) ||
            (strcmp(v->valuestring, "float") && strcmp(v->valuestring, "base64")))
            return oai_error_set(e, 400, "encoding_format", "invalid_value",
                                 "'encoding_format' must be \"float\" or \"base64\"");
        r->base64 = !strcmp(v->valuestring, "base64");
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1 << 20 ||
            v->valuedouble != floor(v->valuedouble))
            return oai_error_set(e, 400, "dimensions", "invalid_value",
                                 "'dimensions' must be a positive integer");
        r->dimensions = (int)v->valuedouble;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "truncate");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v))
            return oai_error_set(e, 400, "truncate", "invalid_type", "'truncate' must be a boolean");
        r->truncate = cJSON_IsTrue(v);
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return oai_error_set(e, 400, "user", "invalid_type", "'user' must be a string");
    return TS_OK;
}

ts_status embed_parse(const char *body, size_t len, embed_request *r, oai_error *e)
{
    memset(r, 0, sizeof *r);
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return oai_error_set(e, 400, NULL, "invalid_json", "the body is not a JSON object");
    }
    ts_status st = parse_options(root, r, e);
    if (st == TS_OK)
        st = parse_inputs(cJSON_GetObjectItemCaseSensitive(root, "input"), r, e);
    cJSON_Delete(root);
    if (st != TS_OK)
        embed_request_clear(r);
    return st;
}

/* ---- tokens and the vectors' forms */

ts_status embed_tokenize(const ts_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                         size_t *n)
{
    ts_tokenize_opts o = {.add_special = true, .add_eos = true, .parse_special = true};
    return ts_tokenize_alloc(tok, text, len, &o, ids, n);
}

void embed_float_bytes(unsigned char *out, const float *v, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
}

size_t embed_base64(char *out, const void *data, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[o++] = A[(v >> 18) & 63];
        out[o++] = A[(v >> 12) & 63];
        out[o++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}
