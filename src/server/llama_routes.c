/* llama_routes.c: what llama.cpp's own clients ask of its server besides /completion:
 * GET /props (the model's context, default sampling, chat template, build) and the
 * pieces of POST /tokenize's "with_pieces". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/build_info.h"
#include "common/strbuf.h"
#include "server/server_internal.h"
#include "server/utf8.h"

/* The JSON of token id's piece (ts_token_piece: special tokens spelled out): its text, or
 * its bytes as numbers when they are not valid UTF-8. NULL out of memory. */
static char *piece_literal(const ts_tokenizer *tok, int32_t id)
{
    size_t len = 0;
    const char *b = ts_token_piece(tok, id, &len);
    cJSON *piece = NULL;
    if (utf8_valid(b, len)) {
        piece = oai_bytes_string(b, len); /* the bytes are not NUL-terminated */
    } else {
        piece = cJSON_CreateArray();
        for (size_t i = 0; piece && i < len; i++)
            if (!cJSON_AddItemToArray(piece, cJSON_CreateNumber((unsigned char)b[i]))) {
                cJSON_Delete(piece);
                piece = NULL;
            }
    }
    char *s = piece ? cJSON_PrintUnformatted(piece) : NULL;
    cJSON_Delete(piece);
    return s;
}

/* Written token by token, as routes.c's ids: a cJSON tree would hold ~250 bytes a
 * token. */
char *llama_pieces_json(const ts_tokenizer *tok, const char *model, const int32_t *ids,
                        size_t n, size_t *len)
{
    cJSON *name = cJSON_CreateString(model);
    char *quoted = name ? cJSON_PrintUnformatted(name) : NULL;
    cJSON_Delete(name);
    strbuf b = {0};
    if (quoted)
        strbuf_addf(&b, "{\"model\":%s,\"count\":%zu,\"tokens\":[", quoted, n);
    free(quoted);
    for (size_t i = 0; b.s && !b.failed && i < n; i++) {
        char *piece = piece_literal(tok, ids[i]);
        if (!piece)
            b.failed = true;
        else
            strbuf_addf(&b, "%s{\"id\":%d,\"piece\":%s}", i ? "," : "", (int)ids[i], piece);
        free(piece);
    }
    if (b.s)
        strbuf_addf(&b, "]}");
    if (!b.s || b.failed) {
        strbuf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.s;
}

/* The token's text as the vocabulary spells it ("<s>"; "" for none). */
static bool add_token_text(cJSON *o, const char *key, const ts_tokenizer *tok, int32_t id)
{
    const char *t = id >= 0 ? ts_token_text(tok, id) : "";
    cJSON *s = oai_bytes_string(t, strlen(t));
    if (!s || !cJSON_AddItemToObject(o, key, s)) {
        cJSON_Delete(s);
        return false;
    }
    return true;
}

/* default_generation_settings: the context and the sampling a /completion body gets
 * when it sets nothing (n_predict -1: until the context is full). */
static cJSON *settings_json(const ts_model_config *cfg)
{
    ts_sampling_params d = ts_sampling_params_default();
    cJSON *s = cJSON_CreateObject(), *p = s ? cJSON_AddObjectToObject(s, "params") : NULL;
    bool ok = p && cJSON_AddNumberToObject(s, "n_ctx", cfg->context_len) &&
              cJSON_AddNumberToObject(p, "n_predict", -1) &&
              cJSON_AddNumberToObject(p, "max_tokens", -1) &&
              cJSON_AddNumberToObject(p, "temperature", d.temperature) &&
              cJSON_AddNumberToObject(p, "top_k", d.top_k) &&
              cJSON_AddNumberToObject(p, "top_p", d.top_p) &&
              cJSON_AddNumberToObject(p, "min_p", d.min_p) &&
              cJSON_AddArrayToObject(p, "stop") && cJSON_AddFalseToObject(p, "ignore_eos") &&
              cJSON_AddNumberToObject(p, "n_probs", 0) && cJSON_AddFalseToObject(p, "stream");
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* GET /props?model=NAME (the first model without one). */
enum MHD_Result routes_props(struct MHD_Connection *mc, srv_conn *c)
{
    oai_error e;
    const char *name = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "model");
    srv_model *m = srv_find_model(c->srv, name, &e);
    if (!m)
        return srv_send_error(mc, c, &e);
    const ts_model *model = ts_engine_get_model(m->engine);
    const ts_tokenizer *tok = ts_model_get_tokenizer(model);
    ts_build_info b;
    ts_build_info_get(&b);
    char build[128];
    snprintf(build, sizeof build, "tessera %s (%s)", b.version, b.commit);
    cJSON *j = cJSON_CreateObject(), *gs = settings_json(ts_model_get_config(model));
    cJSON *mod = NULL;
    bool ok = j && gs && cJSON_AddItemToObject(j, "default_generation_settings", gs);
    if (!ok)
        cJSON_Delete(gs);
    ok = ok && cJSON_AddNumberToObject(j, "total_slots", ts_engine_max_seqs(m->engine)) &&
         cJSON_AddStringToObject(j, "model_alias", m->name) &&
         cJSON_AddStringToObject(j, "model_path", m->name) &&
         cJSON_AddStringToObject(j, "chat_template",
                                 m->jinja.t && c->srv->template_src ? c->srv->template_src
                                 : m->jinja.t ? "jinja"
                                              : chat_template_name(m->template)) &&
         add_token_text(j, "bos_token", tok, ts_tokenizer_bos(tok)) &&
         add_token_text(j, "eos_token", tok, ts_tokenizer_eos(tok)) &&
         (mod = cJSON_AddObjectToObject(j, "modalities")) &&
         cJSON_AddFalseToObject(mod, "vision") && cJSON_AddFalseToObject(mod, "audio") &&
         cJSON_AddStringToObject(j, "build_info", build) &&
         cJSON_AddFalseToObject(j, "is_sleeping");
    if (!ok) {
        cJSON_Delete(j);
        j = NULL;
    }
    return srv_send_json(mc, c, 200, j);
}
