/* openai_parse.c: OpenAI request bodies (chat, completions, tokenize, detokenize) into
 * validated parameters; every rejection names the field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"
#include "server/utf8.h"
#include "tessera/grammar.h"
#include "tessera/schema.h"

/* ---- field readers: absent and null fields leave *out alone and succeed. */

static const cJSON *field(const cJSON *obj, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsNull(f) ? NULL : f;
}

static ts_status bad_type(oai_error *err, const char *name, const char *want)
{
    return oai_error_set(err, 400, name, "invalid_type", "'%s' must be %s", name, want);
}

/* A number of any value: its range is the engine's to check (ts_sampling_params_check). */
static ts_status read_number(const cJSON *obj, const char *name, float *out, oai_error *err)
{
    const cJSON *f = field(obj, name);
    if (!f)
        return TS_OK;
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
        return bad_type(err, name, "a number");
    *out = (float)f->valuedouble;
    return TS_OK;
}

static bool is_integer(const cJSON *f)
{
    return cJSON_IsNumber(f) && isfinite(f->valuedouble) &&
           f->valuedouble == trunc(f->valuedouble) && fabs(f->valuedouble) <= 9007199254740992.0;
}

static ts_status read_int(const cJSON *obj, const char *name, long long lo, long long hi,
                          int *out, oai_error *err)
{
    const cJSON *f = field(obj, name);
    if (!f)
        return TS_OK;
    if (!is_integer(f))
        return bad_type(err, name, "an integer");
    double v = f->valuedouble;
    if (v < (double)lo || v > (double)hi)
        return oai_error_set(err, 400, name, "out_of_range",
                             "'%s' must be between %lld and %lld (got %.0f)", name, lo, hi, v);
    *out = (int)v;
    return TS_OK;
}

static ts_status read_bool(const cJSON *obj, const char *name, bool *out, oai_error *err)
{
    const cJSON *f = field(obj, name);
    if (!f)
        return TS_OK;
    if (!cJSON_IsBool(f))
        return bad_type(err, name, "a boolean");
    *out = cJSON_IsTrue(f);
    return TS_OK;
}

/* A copy of a JSON string after the UTF-8 check. */
static ts_status copy_string(const cJSON *f, const char *name, char **out, oai_error *err)
{
    const char *s = f->valuestring;
    size_t n = strlen(s);
    if (!utf8_valid(s, n))
        return oai_error_set(err, 400, name, "invalid_utf8", "'%s' is not valid UTF-8", name);
    *out = strdup(s);
    if (!*out)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    return TS_OK;
}

static ts_status read_string(const cJSON *obj, const char *name, char **out, oai_error *err)
{
    const cJSON *f = field(obj, name);
    if (!f)
        return TS_OK;
    if (!cJSON_IsString(f))
        return bad_type(err, name, "a string");
    return copy_string(f, name, out, err);
}

/* True when a JSON string of body[0..len) holds a \u0000 escape (cJSON would cut the
 * string there); field gets the name of the last object key before it. */
static bool has_nul_escape(const char *body, size_t len, char *field, size_t cap)
{
    size_t key_at = 0, key_len = 0, str_at = 0;
    bool in_str = false;
    field[0] = '\0';
    for (size_t i = 0; i < len; i++) {
        char ch = body[i];
        if (!in_str) {
            if (ch == '"') {
                in_str = true;
                str_at = i + 1;
            } else if (ch == ':' && str_at) { /* the string before a colon is a key */
                key_at = str_at;
                key_len = 0;
                while (key_at + key_len < len && body[key_at + key_len] != '"')
                    key_len++;
                str_at = 0;
            } else if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
                str_at = 0;
            }
        } else if (ch == '\\') {
            if (i + 5 < len && !memcmp(body + i + 1, "u0000", 5)) {
                snprintf(field, cap, "%.*s", (int)(key_len < cap ? key_len : cap - 1),
                         body + key_at);
                return true;
            }
            i++; /* the escaped character */
        } else if (ch == '"') {
            in_str = false;
        }
    }
    return false;
}

static ts_status parse_body(const char *body, size_t len, cJSON **root, oai_error *err)
{
    /* The Opts variant reports where parsing stopped without cJSON's global error pointer,
     * which other HTTP threads share. */
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!*root)
        return oai_error_set(err, 400, NULL, "invalid_json",
                             "the request body is not valid JSON (near byte %zu)",
                             end && end >= body ? (size_t)(end - body) : (size_t)0);
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return oai_error_set(err, 400, NULL, "invalid_json",
                                 "the request body has bytes after its JSON value (at byte %zu)",
                                 (size_t)(p - body));
    char name[64];
    if (has_nul_escape(body, len, name, sizeof name))
        return oai_error_set(err, 400, name[0] ? name : NULL, "invalid_value",
                             "'%s' holds a NUL character (\\u0000), which is not accepted",
                             name[0] ? name : "a string");
    if (!cJSON_IsObject(*root))
        return oai_error_set(err, 400, NULL, "invalid_json",
                             "the request body must be a JSON object");
    return TS_OK;
}

/* ---- chat messages */

static ts_status read_content(const cJSON *c, const char *name, char **out, oai_error *err)
{
    if (cJSON_IsString(c))
        return copy_string(c, name, out, err);
    if (!cJSON_IsArray(c))
        return bad_type(err, name, "a string or an array of text parts");
    /* [{"type": "text", "text": "..."}, ...]: the texts joined. */
    size_t total = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
            return oai_error_set(err, 400, name, "invalid_type",
                                 "'%s' parts must be {\"type\": \"text\", \"text\": string}",
                                 name);
        /* Each part is checked alone: two halves of a character in two parts are not one. */
        if (!utf8_valid(text->valuestring, strlen(text->valuestring)))
            return oai_error_set(err, 400, name, "invalid_utf8",
                                 "a text part of '%s' is not valid UTF-8", name);
        total += strlen(text->valuestring);
    }
    char *s = malloc(total + 1);
    if (!s)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    size_t o = 0;
    cJSON_ArrayForEach(part, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(s + o, t, n);
        o += n;
    }
    s[o] = '\0';
    if (!utf8_valid(s, o)) {
        free(s);
        return oai_error_set(err, 400, name, "invalid_utf8", "'%s' is not valid UTF-8", name);
    }
    *out = s;
    return TS_OK;
}

static ts_status read_messages(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *msgs = field(root, "messages");
    if (!msgs)
        return oai_error_set(err, 400, "messages", "missing_required_parameter",
                             "'messages' is required");
    if (!cJSON_IsArray(msgs))
        return bad_type(err, "messages", "an array of messages");
    int n = cJSON_GetArraySize(msgs);
    if (n < 1 || n > OAI_MAX_MESSAGES)
        return oai_error_set(err, 400, "messages", "out_of_range",
                             "'messages' must hold 1 to %d messages (got %d)", OAI_MAX_MESSAGES,
                             n);
    r->messages = calloc((size_t)n, sizeof *r->messages);
    if (!r->messages)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char name[64];
        if (!cJSON_IsObject(m)) {
            snprintf(name, sizeof name, "messages[%d]", i);
            return bad_type(err, name, "an object");
        }
        oai_message *out = &r->messages[i];
        r->n_messages = (size_t)i + 1;
        snprintf(name, sizeof name, "messages[%d].role", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role))
            return bad_type(err, name, "a string");
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer"))
            rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool"))
            return oai_error_set(err, 400, name, "invalid_value",
                                 "'%s' must be system, user, developer, assistant or tool", name);
        out->role = strdup(rs);
        if (!out->role)
            return oai_error_set(err, 500, NULL, NULL, "out of memory");
        snprintf(name, sizeof name, "messages[%d].content", i);
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        /* An assistant turn that calls tools may leave its content out or null. */
        bool calls = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "tool_calls"));
        if (!content && !(calls && !strcmp(rs, "assistant")))
            return oai_error_set(err, 400, name, "missing_required_parameter",
                                 "'%s' is required", name);
        if ((!content || cJSON_IsNull(content)) && !strcmp(rs, "assistant"))
            out->content = strdup("");
        else if (read_content(content, name, &out->content, err) != TS_OK)
            return TS_ERR_INVALID_ARG;
        if (!out->content)
            return oai_error_set(err, 500, NULL, NULL, "out of memory");
        if (oai_check_message_tools(m, i, rs, err) != TS_OK)
            return TS_ERR_INVALID_ARG;
        i++;
    }
    return TS_OK;
}

/* ---- completions prompt: "text", ["text"], [ids], [[ids]] */

static ts_status read_token_array(const cJSON *a, const char *name, int32_t **out, size_t *n,
                                  oai_error *err)
{
    int count = cJSON_GetArraySize(a);
    if (count < 1 || count > OAI_MAX_PROMPT_TOKENS)
        return oai_error_set(err, 400, name, "out_of_range",
                             "'%s' must hold 1 to %d token ids", name, OAI_MAX_PROMPT_TOKENS);
    int32_t *ids = malloc((size_t)count * sizeof *ids);
    if (!ids)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, a) {
        if (!is_integer(t) || t->valuedouble < 0 || t->valuedouble > INT32_MAX) {
            free(ids);
            return oai_error_set(err, 400, name, "invalid_type",
                                 "'%s' must be an array of non-negative integer token ids "
                                 "(element %d is not)", name, i);
        }
        ids[i++] = (int32_t)t->valuedouble;
    }
    *out = ids;
    *n = (size_t)count;
    return TS_OK;
}

static ts_status read_prompt(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *p = field(root, "prompt");
    if (!p)
        return oai_error_set(err, 400, "prompt", "missing_required_parameter",
                             "'prompt' is required");
    if (cJSON_IsString(p))
        return copy_string(p, "prompt", &r->prompt, err);
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) < 1)
        return bad_type(err, "prompt", "a string, an array of one string or an array of token ids");
    const cJSON *first = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsNumber(first))
        return read_token_array(p, "prompt", &r->prompt_tokens, &r->n_prompt_tokens, err);
    if (cJSON_GetArraySize(p) != 1)
        return oai_error_set(err, 400, "prompt", "unsupported_value",
                             "'prompt' may hold one prompt only; send one request per prompt");
    if (cJSON_IsString(first))
        return copy_string(first, "prompt", &r->prompt, err);
    if (cJSON_IsArray(first))
        return read_token_array(first, "prompt", &r->prompt_tokens, &r->n_prompt_tokens, err);
    return bad_type(err, "prompt", "a string, an array of one string or an array of token ids");
}

static ts_status read_stop(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *s = field(root, "stop");
    if (!s)
        return TS_OK;
    if (!cJSON_IsString(s) && !cJSON_IsArray(s))
        return bad_type(err, "stop", "a string or an array of strings");
    if (cJSON_IsArray(s) && cJSON_GetArraySize(s) > OAI_MAX_STOP)
        return oai_error_set(err, 400, "stop", "out_of_range",
                             "'stop' may hold at most %d strings (got %d)", OAI_MAX_STOP,
                             cJSON_GetArraySize(s));
    const cJSON *item = s;
    const cJSON *next = cJSON_IsArray(s) ? s->child : NULL;
    if (cJSON_IsArray(s))
        item = next;
    while (item) {
        if (!cJSON_IsString(item))
            return bad_type(err, "stop", "a string or an array of strings");
        size_t n = strlen(item->valuestring);
        if (n == 0 || n > OAI_MAX_STOP_LEN)
            return oai_error_set(err, 400, "stop", "out_of_range",
                                 "each 'stop' string must be 1 to %d bytes (got %zu)",
                                 OAI_MAX_STOP_LEN, n);
        if (copy_string(item, "stop", &r->stop[r->n_stop], err) != TS_OK)
            return TS_ERR_INVALID_ARG;
        r->n_stop++;
        item = cJSON_IsArray(s) ? item->next : NULL;
    }
    return TS_OK;
}

static ts_status read_logprobs(const cJSON *root, oai_request *r, oai_error *err)
{
    if (r->kind == OAI_COMPLETION) {
        /* Completions: logprobs is the number of alternatives (0 = sampled token only).
         * Its range is checked with the other sampling parameters, as top_logprobs. */
        int k = INT32_MIN;
        if (read_int(root, "logprobs", INT32_MIN, INT32_MAX, &k, err) != TS_OK)
            return TS_ERR_INVALID_ARG;
        r->sampling.logprobs = k != INT32_MIN;
        r->sampling.top_logprobs = k != INT32_MIN ? k : 0;
        return TS_OK;
    }
    if (read_bool(root, "logprobs", &r->sampling.logprobs, err) != TS_OK ||
        read_int(root, "top_logprobs", INT32_MIN, INT32_MAX, &r->sampling.top_logprobs, err) !=
            TS_OK)
        return TS_ERR_INVALID_ARG;
    return TS_OK;
}

static ts_status read_seed(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *f = field(root, "seed");
    if (!f)
        return TS_OK;
    if (!is_integer(f))
        return bad_type(err, "seed", "an integer");
    r->sampling.has_seed = true;
    r->sampling.seed = (uint64_t)(int64_t)f->valuedouble;
    return TS_OK;
}

/* {"token id": bias, ...}: keys decimal ids, values numbers; their ranges are the
 * engine's to check with the other sampling fields. */
static ts_status read_logit_bias(const cJSON *root, ts_sampling_params *p, oai_error *err)
{
    const cJSON *f = field(root, "logit_bias");
    if (!f)
        return TS_OK;
    if (!cJSON_IsObject(f))
        return bad_type(err, "logit_bias", "an object mapping token ids to numbers");
    const cJSON *e;
    cJSON_ArrayForEach(e, f) {
        if (p->n_logit_bias == TS_SAMPLING_MAX_LOGIT_BIAS)
            return oai_error_set(err, 400, "logit_bias", "out_of_range",
                                 "'logit_bias' may hold at most %d entries",
                                 TS_SAMPLING_MAX_LOGIT_BIAS);
        const char *k = e->string;
        char *end = NULL;
        long id = k && *k >= '0' && *k <= '9' ? strtol(k, &end, 10) : -1;
        if (id < 0 || *end || id > INT32_MAX)
            return oai_error_set(err, 400, "logit_bias", "invalid_value",
                                 "'logit_bias' keys must be token ids (got \"%.40s\")",
                                 k ? k : "");
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
            return bad_type(err, "logit_bias", "an object mapping token ids to numbers");
        p->logit_bias[p->n_logit_bias++] = (ts_logit_bias){(int32_t)id, (float)e->valuedouble};
    }
    return TS_OK;
}

/* The sampling fields by type; their ranges are checked once, by the engine's contract
 * (ts_sampling_params_check), whose field name becomes the error's param. */
static ts_status read_sampling(const cJSON *root, oai_request *r, oai_error *err)
{
    ts_sampling_params *p = &r->sampling;
    if (read_number(root, "temperature", &p->temperature, err) != TS_OK ||
        read_number(root, "top_p", &p->top_p, err) != TS_OK ||
        read_int(root, "top_k", INT32_MIN, INT32_MAX, &p->top_k, err) != TS_OK ||
        read_number(root, "min_p", &p->min_p, err) != TS_OK ||
        read_number(root, "presence_penalty", &p->presence_penalty, err) != TS_OK ||
        read_number(root, "frequency_penalty", &p->frequency_penalty, err) != TS_OK ||
        read_number(root, "repetition_penalty", &p->repetition_penalty, err) != TS_OK ||
        read_seed(root, r, err) != TS_OK || read_logprobs(root, r, err) != TS_OK ||
        read_logit_bias(root, p, err) != TS_OK || oai_read_llama_sampling(root, r, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    const char *name = NULL;
    ts_error e = {0};
    if (ts_sampling_params_check(p, &name, &e) == TS_OK)
        return TS_OK;
    if (name && !strcmp(name, "top_logprobs") && r->kind == OAI_COMPLETION)
        name = "logprobs"; /* a completion's top_logprobs is its logprobs field */
    return oai_error_set(err, 400, name, "out_of_range", "%s", e.msg);
}

static ts_status read_max_tokens(const cJSON *root, oai_request *r, oai_error *err)
{
    int a = -1, b = -1;
    if (read_int(root, "max_tokens", 0, INT32_MAX, &a, err) != TS_OK ||
        read_int(root, "max_completion_tokens", 0, INT32_MAX, &b, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    int m = b >= 0 ? b : a;
    /* 0 scores the prompt of a completion that echoes it (oai_check_fields checks echo) */
    r->score_only = m == 0;
    if (r->score_only && r->kind != OAI_COMPLETION)
        return oai_error_set(err, 400, b >= 0 ? "max_completion_tokens" : "max_tokens",
                             "out_of_range", "'%s' must be at least 1",
                             b >= 0 ? "max_completion_tokens" : "max_tokens");
    r->max_tokens = m > 0 ? m : 0;
    return TS_OK;
}

static ts_status read_stream(const cJSON *root, oai_request *r, oai_error *err)
{
    if (read_bool(root, "stream", &r->stream, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    const cJSON *so = field(root, "stream_options");
    if (!so)
        return TS_OK;
    if (!cJSON_IsObject(so))
        return bad_type(err, "stream_options", "an object");
    const cJSON *iu = field(so, "include_usage");
    if (iu && !cJSON_IsBool(iu))
        return bad_type(err, "stream_options.include_usage", "a boolean");
    r->include_usage = cJSON_IsTrue(iu);
    return TS_OK;
}

ts_status oai_parse_request(oai_kind kind, const char *body, size_t len, oai_request *r,
                            oai_error *err)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->sampling = ts_sampling_params_default();
    r->n = 1;
    r->speculative = true;
    cJSON *root = NULL;
    if (parse_body(body, len, &root, err) != TS_OK)
        goto fail;
    if (read_string(root, "model", &r->model, err) != TS_OK ||
        (kind == OAI_CHAT ? read_messages(root, r, err) : read_prompt(root, r, err)) != TS_OK ||
        (kind == OAI_CHAT && oai_chat_vars(root, &r->chat_vars, err) != TS_OK) ||
        read_max_tokens(root, r, err) != TS_OK ||
        read_sampling(root, r, err) != TS_OK || read_stop(root, r, err) != TS_OK ||
        read_int(root, "n", 1, OAI_MAX_N, &r->n, err) != TS_OK ||
        read_stream(root, r, err) != TS_OK ||
        oai_read_prompt_logprobs(root, r, err) != TS_OK ||
        read_bool(root, "ignore_eos", &r->ignore_eos, err) != TS_OK ||
        read_bool(root, "speculative", &r->speculative, err) != TS_OK ||
        read_string(root, "user", &r->user, err) != TS_OK ||
        read_string(root, "cache_salt", &r->cache_salt, err) != TS_OK)
        goto fail;
    if (oai_check_fields(kind, root, r, err) != TS_OK)
        goto fail;
    cJSON_Delete(root);
    return TS_OK;
fail:
    cJSON_Delete(root);
    oai_request_clear(r);
    return TS_ERR_INVALID_ARG;
}

void oai_request_clear(oai_request *r)
{
    cJSON_Delete(r->chat_vars);
    oai_tools_clear(&r->tools);
    free(r->model);
    for (size_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    free(r->prompt);
    free(r->prompt_tokens);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->user);
    free(r->cache_salt);
    ts_schema_release(r->schema);
    ts_grammar_release(r->grammar);
    memset(r, 0, sizeof *r);
}

/* ---- /tokenize and /detokenize */

/* llama.cpp's "content" array: strings and token ids, each a part, in order. */
static ts_status read_tokenize_parts(const cJSON *f, oai_tokenize_request *r, oai_error *err)
{
    int count = cJSON_GetArraySize(f);
    if (count > OAI_MAX_PROMPT_TOKENS)
        return oai_error_set(err, 400, "content", "out_of_range",
                             "'content' may hold at most %d parts", OAI_MAX_PROMPT_TOKENS);
    if (count > 0 && !(r->parts = calloc((size_t)count, sizeof *r->parts)))
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    const cJSON *p;
    cJSON_ArrayForEach(p, f) {
        oai_tokenize_part *part = &r->parts[r->n_parts++];
        if (cJSON_IsString(p)) {
            if (copy_string(p, "content", &part->text, err) != TS_OK)
                return TS_ERR_INVALID_ARG;
        } else if (is_integer(p) && p->valuedouble >= 0 && p->valuedouble <= INT32_MAX) {
            part->id = (int32_t)p->valuedouble;
        } else {
            return oai_error_set(err, 400, "content", "invalid_type",
                                 "'content' must be a string or an array of strings and "
                                 "non-negative token ids (element %zu is neither)",
                                 r->n_parts - 1);
        }
    }
    return TS_OK;
}

ts_status oai_parse_tokenize(const char *body, size_t len, oai_tokenize_request *r,
                             oai_error *err)
{
    memset(r, 0, sizeof *r);
    r->add_special = true;
    r->parse_special = true;
    cJSON *root = NULL;
    char *text = NULL;
    if (parse_body(body, len, &root, err) != TS_OK ||
        read_string(root, "model", &r->model, err) != TS_OK ||
        read_string(root, "prompt", &text, err) != TS_OK)
        goto fail;
    if (!text) {
        if (read_string(root, "text", &text, err) != TS_OK)
            goto fail;
        r->text_field_named_text = text != NULL;
    }
    const cJSON *content = text ? NULL : field(root, "content");
    if (content) { /* llama.cpp's body: BOS only when asked for */
        r->add_special = false;
        if (cJSON_IsArray(content)) {
            if (read_tokenize_parts(content, r, err) != TS_OK)
                goto fail;
        } else if (!cJSON_IsString(content)) {
            bad_type(err, "content", "a string or an array of strings and token ids");
            goto fail;
        } else if (copy_string(content, "content", &text, err) != TS_OK) {
            goto fail;
        }
    } else if (!text) {
        oai_error_set(err, 400, "prompt", "missing_required_parameter",
                      "'prompt' (or 'text', or 'content') is required");
        goto fail;
    }
    if (text) { /* one part */
        if (!(r->parts = calloc(1, sizeof *r->parts))) {
            oai_error_set(err, 500, NULL, NULL, "out of memory");
            goto fail;
        }
        r->parts[0].text = text;
        r->n_parts = 1;
        text = NULL;
    }
    if (read_bool(root, "add_special", &r->add_special, err) != TS_OK ||
        read_bool(root, "parse_special", &r->parse_special, err) != TS_OK ||
        read_bool(root, "with_pieces", &r->with_pieces, err) != TS_OK)
        goto fail;
    cJSON_Delete(root);
    return TS_OK;
fail:
    free(text);
    cJSON_Delete(root);
    oai_tokenize_request_clear(r);
    return TS_ERR_INVALID_ARG;
}

void oai_tokenize_request_clear(oai_tokenize_request *r)
{
    free(r->model);
    for (size_t i = 0; i < r->n_parts; i++)
        free(r->parts[i].text);
    free(r->parts);
    memset(r, 0, sizeof *r);
}

ts_status oai_parse_detokenize(const char *body, size_t len, oai_detokenize_request *r,
                               oai_error *err)
{
    memset(r, 0, sizeof *r);
    cJSON *root = NULL;
    if (parse_body(body, len, &root, err) != TS_OK ||
        read_string(root, "model", &r->model, err) != TS_OK)
        goto fail;
    const cJSON *t = field(root, "tokens");
    if (!t) {
        oai_error_set(err, 400, "tokens", "missing_required_parameter", "'tokens' is required");
        goto fail;
    }
    if (!cJSON_IsArray(t)) {
        bad_type(err, "tokens", "an array of token ids");
        goto fail;
    }
    if (cJSON_GetArraySize(t) > 0 &&
        read_token_array(t, "tokens", &r->tokens, &r->n_tokens, err) != TS_OK)
        goto fail;
    cJSON_Delete(root);
    return TS_OK;
fail:
    cJSON_Delete(root);
    oai_detokenize_request_clear(r);
    return TS_ERR_INVALID_ARG;
}

void oai_detokenize_request_clear(oai_detokenize_request *r)
{
    free(r->model);
    free(r->tokens);
    memset(r, 0, sizeof *r);
}
