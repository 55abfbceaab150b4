/* routes.c: the routes that need no engine step: /health, /metrics, /v1/models,
 * /tokenize and /detokenize. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/build_info.h"
#include "common/strbuf.h"
#include "server/embeddings.h"
#include "server/server_internal.h"
#include "server/utf8.h"

/* The build object of /health: version, commit, build type, compiler, kernels; NULL out
 * of memory. */
static cJSON *build_json(void)
{
    ts_build_info b;
    ts_build_info_get(&b);
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "version", b.version) &&
              cJSON_AddStringToObject(o, "commit", b.commit) &&
              cJSON_AddStringToObject(o, "build_type", b.build_type) &&
              cJSON_AddStringToObject(o, "compiler", b.compiler) &&
              cJSON_AddStringToObject(o, "kernels", b.vector) &&
              cJSON_AddStringToObject(o, "packed_kernels", b.packed) &&
              cJSON_AddStringToObject(o, "cpu_kernels", b.cpu);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

enum MHD_Result routes_health(struct MHD_Connection *mc, srv_conn *c)
{
    ts_server *srv = c->srv;
    bool stopping = atomic_load(&srv->stopping);
    cJSON *j = cJSON_CreateObject();
    if (j) {
        cJSON_AddStringToObject(j, "status", stopping ? "shutting_down" : "ok");
        cJSON_AddNumberToObject(j, "models", srv->n_models);
        cJSON *b = build_json();
        if (b)
            cJSON_AddItemToObject(j, "build", b);
    }
    return srv_send_json(mc, c, stopping ? 503 : 200, j);
}

enum MHD_Result routes_metrics(struct MHD_Connection *mc, srv_conn *c)
{
    ts_server *srv = c->srv;
    metrics_model mm[SRV_MAX_MODELS];
    for (int i = 0; i < srv->n_models; i++) {
        mm[i].name = srv->models[i].name;
        ts_engine_get_stats(srv->models[i].engine, &mm[i].stats);
    }
    char *text = metrics_render(srv->metrics, mm, (size_t)srv->n_models);
    return srv_send(mc, c, 200, "text/plain; version=0.0.4; charset=utf-8", text,
                    text ? strlen(text) : 0);
}

/* The model object of OpenAI's models list and retrieve, or NULL when out of memory. */
static cJSON *model_json(const ts_server *srv, int i)
{
    const ts_model *m = ts_engine_get_model(srv->models[i].engine);
    cJSON *e = cJSON_CreateObject();
    bool ok = e && cJSON_AddStringToObject(e, "id", srv->models[i].name) &&
              cJSON_AddStringToObject(e, "object", "model") &&
              cJSON_AddNumberToObject(e, "created", (double)srv->started) &&
              cJSON_AddStringToObject(e, "owned_by", "tessera") &&
              cJSON_AddNumberToObject(e, "context_length", ts_model_get_config(m)->context_len) &&
              cJSON_AddStringToObject(e, "chat_template",
                                      srv->models[i].jinja.t
                                          ? "jinja"
                                          : chat_template_name(srv->models[i].template));
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

enum MHD_Result routes_models(struct MHD_Connection *mc, srv_conn *c)
{
    ts_server *srv = c->srv;
    cJSON *j = cJSON_CreateObject();
    cJSON *data = j ? cJSON_AddArrayToObject(j, "data") : NULL;
    bool ok = data && cJSON_AddStringToObject(j, "object", "list");
    for (int i = 0; ok && i < srv->n_models; i++) {
        cJSON *e = model_json(srv, i);
        ok = e && cJSON_AddItemToArray(data, e);
        if (!ok)
            cJSON_Delete(e);
    }
    if (!ok) {
        cJSON_Delete(j);
        j = NULL;
    }
    return srv_send_json(mc, c, 200, j);
}

/* GET /v1/models/{id}: the client's models.retrieve; 404 for a model not served. */
enum MHD_Result routes_model(struct MHD_Connection *mc, srv_conn *c)
{
    const char *id = c->path + strlen(SRV_MODEL_ROUTE);
    for (int i = 0; i < c->srv->n_models; i++)
        if (!strcmp(c->srv->models[i].name, id))
            return srv_send_json(mc, c, 200, model_json(c->srv, i));
    oai_error e;
    oai_error_set(&e, 404, "model", "model_not_found", "the model '%.200s' does not exist", id);
    return srv_send_error(mc, c, &e);
}

/* What /tokenize may hold per byte of text, counted before it starts: the tokenizer's
 * work and ids (a 1 MB text peaks at ~38 MB of RSS) and the answer (a token per byte at
 * most, each up to 10 digits and a comma). */
enum { TOKENIZE_BYTES_PER_BYTE = 36 + 11, ROUTE_FIXED_BYTES = 4096 };
/* The same with llama.cpp's with_pieces: a token of one byte answered as
 * {"id":N,"piece":"\u00XX"} or {"id":N,"piece":[255]}. */
enum { TOKENIZE_PIECES_BYTES_PER_BYTE = 36 + 32 };

/* {"model": ..., "count": n, "tokens": [ids]} written directly: a cJSON number per token
 * held ~64 bytes each (a 1 MiB text made a 60 MiB tree). NULL when out of memory. */
static char *tokens_json(const char *model, const int32_t *ids, size_t n, size_t *len)
{
    cJSON *name = cJSON_CreateString(model);
    char *quoted = name ? cJSON_PrintUnformatted(name) : NULL;
    cJSON_Delete(name);
    strbuf b = {0};
    if (quoted)
        strbuf_addf(&b, "{\"model\":%s,\"count\":%zu,\"tokens\":[", quoted, n);
    free(quoted);
    for (size_t i = 0; b.s && i < n; i++)
        strbuf_addf(&b, i ? ",%d" : "%d", (int)ids[i]);
    if (b.s)
        strbuf_addf(&b, "]}");
    if (!b.s || b.failed) {
        strbuf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.s;
}

/* The ids of t's parts in order, as llama.cpp's tokenize_mixed reads them: a text read with
 * special tokens added only when it is the first part, an id kept as given (400 past the
 * vocabulary). *ids is malloc'd (NULL when empty); e is set on failure. */
static ts_status tokenize_parts(const ts_tokenizer *tok, const oai_tokenize_request *t,
                                int32_t **ids, size_t *n, oai_error *e)
{
    int32_t *all = NULL;
    size_t count = 0, cap = 0;
    ts_status st = TS_OK;
    for (size_t i = 0; st == TS_OK && i < t->n_parts; i++) {
        const oai_tokenize_part *p = &t->parts[i];
        ts_tokenize_opts opts = {.add_special = t->add_special && i == 0,
                                 .add_eos = true,
                                 .parse_special = t->parse_special};
        int32_t *got = NULL, one = p->id;
        size_t n_got = 1;
        if (p->text) {
            st = ts_tokenize_alloc(tok, p->text, strlen(p->text), &opts, &got, &n_got);
            if (st != TS_OK)
                oai_error_set(e, 500, NULL, NULL, "tokenization failed: %s", ts_status_str(st));
        } else if (p->id >= ts_tokenizer_vocab_size(tok)) {
            st = oai_error_set(e, 400, "content", "out_of_range",
                               "token id %d is outside the vocabulary (0 to %d)", (int)p->id,
                               ts_tokenizer_vocab_size(tok) - 1);
        }
        if (st == TS_OK && count + n_got > cap) {
            size_t grown_cap = (count + n_got) * 2;
            int32_t *grown = realloc(all, grown_cap * sizeof *grown);
            if (grown)
                all = grown, cap = grown_cap;
            else
                st = oai_error_set(e, 500, NULL, NULL, "out of memory");
        }
        if (st == TS_OK && n_got > 0)
            memcpy(all + count, p->text ? got : &one, n_got * sizeof *all), count += n_got;
        free(got);
    }
    if (st != TS_OK) {
        free(all);
        all = NULL, count = 0;
    }
    *ids = all;
    *n = count;
    return st;
}

enum MHD_Result routes_tokenize(struct MHD_Connection *mc, srv_conn *c)
{
    oai_tokenize_request t;
    oai_error e;
    if (oai_parse_tokenize(c->body.s, c->body.len, &t, &e) != TS_OK)
        return srv_send_error(mc, c, &e);
    srv_model *m = srv_find_model(c->srv, t.model, &e);
    size_t input = 0; /* bytes of text, and a byte for each id */
    for (size_t i = 0; i < t.n_parts; i++)
        input += t.parts[i].text ? strlen(t.parts[i].text) : 1;
    size_t per_byte = t.with_pieces ? TOKENIZE_PIECES_BYTES_PER_BYTE : TOKENIZE_BYTES_PER_BYTE;
    if (!m || !srv_reserve(c, input * per_byte + ROUTE_FIXED_BYTES, &e)) {
        oai_tokenize_request_clear(&t);
        return srv_send_error(mc, c, &e);
    }
    const ts_tokenizer *tok = ts_model_get_tokenizer(ts_engine_get_model(m->engine));
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    ts_status st = tokenize_parts(tok, &t, &ids, &n, &e);
    char *body = st != TS_OK      ? NULL
                 : t.with_pieces ? llama_pieces_json(tok, m->name, ids, n, &len)
                                 : tokens_json(m->name, ids, n, &len);
    free(ids);
    oai_tokenize_request_clear(&t);
    if (st != TS_OK)
        return srv_send_error(mc, c, &e);
    return srv_send(mc, c, 200, "application/json", body, len); /* NULL body: a 500 */
}

enum MHD_Result routes_detokenize(struct MHD_Connection *mc, srv_conn *c)
{
    oai_detokenize_request d;
    oai_error e;
    if (oai_parse_detokenize(c->body.s, c->body.len, &d, &e) != TS_OK)
        return srv_send_error(mc, c, &e);
    srv_model *m = srv_find_model(c->srv, d.model, &e);
    if (!m) {
        oai_detokenize_request_clear(&d);
        return srv_send_error(mc, c, &e);
    }
    const ts_tokenizer *tok = ts_model_get_tokenizer(ts_engine_get_model(m->engine));
    int vocab = ts_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < d.n_tokens; i++)
        if (d.tokens[i] >= vocab) {
            oai_error_set(&e, 400, "tokens", "invalid_value",
                          "'tokens' element %zu is %d, past the vocabulary of %d", i,
                          (int)d.tokens[i], vocab);
            oai_detokenize_request_clear(&d);
            return srv_send_error(mc, c, &e);
        }
    size_t need = ts_detokenize(tok, d.tokens, d.n_tokens, NULL, 0);
    /* the text, and its JSON answer holding it twice ("prompt", and "content" for
     * llama.cpp's clients): up to 6 bytes a byte each (\u00XX) */
    if (!srv_reserve(c, need * 13 + ROUTE_FIXED_BYTES, &e)) {
        oai_detokenize_request_clear(&d);
        return srv_send_error(mc, c, &e);
    }
    char *text = malloc(need + 1);
    cJSON *j = NULL;
    if (text) {
        ts_detokenize(tok, d.tokens, d.n_tokens, text, need);
        cJSON *prompt = oai_bytes_string(text, need); /* a NUL token's text is kept */
        j = prompt ? cJSON_CreateObject() : NULL;
        if (!j || !cJSON_AddStringToObject(j, "model", m->name) ||
            !cJSON_AddItemToObject(j, "prompt", prompt)) {
            if (!j || !cJSON_GetObjectItem(j, "prompt"))
                cJSON_Delete(prompt);
            cJSON_Delete(j);
            j = NULL;
        }
        /* llama.cpp's clients read the text as "content" */
        cJSON *content = j ? cJSON_Duplicate(prompt, false) : NULL;
        if (j && (!content || !cJSON_AddItemToObject(j, "content", content))) {
            cJSON_Delete(content);
            cJSON_Delete(j);
            j = NULL;
        }
        free(text);
    }
    oai_detokenize_request_clear(&d);
    return srv_send_json(mc, c, 200, j);
}
