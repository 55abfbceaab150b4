/* server_util.c: an engine and a server on a free loopback port for the HTTP tests, and a
 * libcurl client for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include <curl/curl.h>

#include "engine_util.h"
#include "model/synth.h"
#include "ref_util.h"
#include "server_util.h"
#include "util.h"

sv_served sv_group;

void sv_start(sv_served *s, const ts_engine_options *eo, const ts_server_options *so)
{
    ts_error err = {0};
    ts_engine *engine = eu_start(eu_model, eo);
    if (!sv_serve(s, engine, so, &err)) {
        ts_engine_destroy(engine);
        fail_msg("server: %s", err.msg);
    }
    s->engine = engine;
}

bool sv_serve(sv_served *s, ts_engine *engine, const ts_server_options *so, ts_error *err)
{
    ts_server_options o = *so;
    o.port = 0;
    *s = (sv_served){0};
    if (ts_server_create(&o, &s->server, err) != TS_OK ||
        ts_server_add_model(s->server, "stories", engine, err) != TS_OK) {
        ts_server_destroy(s->server);
        s->server = NULL;
        return false;
    }
    if (ts_server_start(s->server, err) != TS_OK)
        fail_msg("server: %s", err->msg);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", ts_server_port(s->server));
    return true;
}

void sv_stop(sv_served *s)
{
    ts_server_stop(s->server);
    ts_engine_destroy(s->engine);
    ts_server_destroy(s->server);
}

void sv_start_encoder(sv_served *s, ts_model **model, const tokenizer_vocab *v)
{
    ts_model_config c;
    ts_error err = {0};
    assert_true(model_synth_shape(&c, "bge-small"));
    model_synth_shrink(&c);
    c.pooling = TS_POOLING_CLS;
    if (v->n_tokens > c.vocab_size)
        c.vocab_size = v->n_tokens;
    const char *path = tu_tmp_path("sv-encoder.gguf");
    if (model_synth_write(path, &c, "F32", v, 1, &err) != TS_OK)
        fail_msg("synth: %s", err.msg);
    *model = NULL;
    ts_status st = ts_model_load(path, NULL, model, &err);
    remove(path);
    if (st != TS_OK)
        fail_msg("load: %s", err.msg);
    ts_engine *engine = eu_start(*model, NULL);
    ts_server_options so;
    ts_server_options_default(&so);
    if (!sv_serve(s, engine, &so, &err)) {
        ts_engine_destroy(engine);
        fail_msg("server: %s", err.msg);
    }
    s->engine = engine;
}

int sv_setup_group(void **state)
{
    if (eu_setup_stories(state))
        return -1;
    ts_server_options so;
    ts_server_options_default(&so);
    sv_start(&sv_group, NULL, &so);
    return 0;
}

int sv_teardown_group(void **state)
{
    sv_stop(&sv_group);
    return eu_teardown_stories(state);
}

size_t sv_on_write(char *ptr, size_t size, size_t nmemb, void *user)
{
    return strbuf_add(user, ptr, size * nmemb) ? size * nmemb : 0;
}

void sv_post(const char *url, const char *path, const char *body, sv_answer *a)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", url, path);
    *a = (sv_answer){0};
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, full);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a->headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fail_msg("%s: %s", path, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_cleanup(c);
    strbuf_add(&a->body, "", 0);
    strbuf_add(&a->headers, "", 0);
    a->json = cJSON_Parse(a->body.s);
}

void sv_answer_free(sv_answer *a)
{
    strbuf_free(&a->body);
    strbuf_free(&a->headers);
    cJSON_Delete(a->json);
}

void sv_expect(const char *url, const char *path, const char *body, long status, ...)
{
    sv_answer a;
    sv_post(url, path, body, &a);
    char why[512] = "";
    if (a.status != status)
        snprintf(why, sizeof why, "status %ld, not %ld", a.status, status);
    va_list ap;
    va_start(ap, status);
    for (const char *s; !why[0] && (s = va_arg(ap, const char *)) != NULL;)
        if (!strstr(a.body.s, s))
            snprintf(why, sizeof why, "no '%.200s' in the body", s);
    va_end(ap);
    if (why[0]) {
        char shown[400];
        snprintf(shown, sizeof shown, "%s", a.body.s);
        sv_answer_free(&a);
        fail_msg("%s %s: %s: %s", body ? "POST" : "GET", path, why, shown);
    }
    sv_answer_free(&a);
}

char *sv_header(const sv_answer *a, const char *name)
{
    size_t n = strlen(name);
    for (const char *l = a->headers.s; l && *l;) {
        const char *end = strstr(l, "\r\n");
        if (!end)
            break;
        if (!strncasecmp(l, name, n) && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ')
                v++;
            return strndup(v, (size_t)(end - v));
        }
        l = end + 2;
    }
    return NULL;
}

int32_t *sv_tokenize_body(const char *url, const char *body, size_t *n)
{
    sv_answer a;
    sv_post(url, "/tokenize", body, &a);
    if (a.status != 200)
        fail_msg("/tokenize %s: %ld %s", body, a.status, a.body.s);
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(a.json, "tokens");
    assert_true(cJSON_IsArray(tokens));
    *n = (size_t)cJSON_GetArraySize(tokens);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    assert_non_null(ids);
    size_t i = 0;
    for (const cJSON *t = tokens ? tokens->child : NULL; t; t = t->next, i++) {
        assert_true(cJSON_IsNumber(t));
        ids[i] = (int32_t)t->valueint;
    }
    sv_answer_free(&a);
    return ids;
}

int32_t *sv_tokenize(const char *url, const char *field, const char *text, size_t len,
                     int add_special, size_t *n)
{
    char *str = strndup(text, len);
    assert_non_null(str);
    assert_int_equal(strlen(str), len);
    cJSON *req = cJSON_CreateObject();
    assert_non_null(cJSON_AddStringToObject(req, field, str));
    if (add_special >= 0)
        assert_non_null(cJSON_AddBoolToObject(req, "add_special", add_special));
    char *body = cJSON_PrintUnformatted(req);
    assert_non_null(body);
    int32_t *ids = sv_tokenize_body(url, body, n);
    free(body);
    cJSON_Delete(req);
    free(str);
    return ids;
}

void sv_expect_tokenize_forms(const char *url, const char *text, size_t len,
                              const int32_t *with, size_t n_with, const int32_t *plain,
                              size_t n_plain)
{
    static const struct {
        const char *field, *how;
        int add_special; /* -1: left out */
        bool with;       /* the ids with BOS and EOS are expected */
    } forms[] = {{"content", "content, add_special", 1, true},
                 {"content", "content", -1, false},
                 {"prompt", "prompt", -1, true},
                 {"prompt", "prompt, no add_special", 0, false}};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        size_t n = 0;
        int32_t *ids = sv_tokenize(url, forms[f].field, text, len, forms[f].add_special, &n);
        const int32_t *want = forms[f].with ? with : plain;
        size_t n_want = forms[f].with ? n_with : n_plain;
        char what[400];
        snprintf(what, sizeof what, "/tokenize '%.*s' (%s)", (int)len, text, forms[f].how);
        ref_expect_ids(what, ids, n, want, n_want);
        free(ids);
    }
}
