/* server_util.h: helpers for tests that talk HTTP to a real in-process server: an engine on
 * the shared stories260K (engine_util.h's eu_model) behind a server on a free loopback port. */
#ifndef TESSERA_TESTS_SERVER_UTIL_H
#define TESSERA_TESTS_SERVER_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "tessera/engine.h"
#include "tessera/server.h"
#include "tokenizer/vocab.h"

/* One engine and the server in front of it. */
typedef struct sv_served {
    ts_engine *engine; /* owned, destroyed by sv_stop; NULL when sv_serve borrowed one */
    ts_server *server;
    char url[64]; /* "http://127.0.0.1:PORT" */
} sv_served;

/* Starts an engine on eu_model with eo (borrowed; NULL: the defaults) and a server for it
 * with so (copied; its port is ignored: a free one is taken), serving the engine as model
 * "stories". Fails the test on any error. Stop with sv_stop(). */
void sv_start(sv_served *s, const ts_engine_options *eo, const ts_server_options *so);
/* A server with so (copied; its port is ignored: a free one is taken) serving engine
 * (borrowed: it must outlive the server) as model "stories"; s->engine is left NULL, so
 * sv_stop frees the server only. false, with err set and nothing to stop, when the server
 * refuses so or the engine; fails the test when it cannot start. */
bool sv_serve(sv_served *s, ts_engine *engine, const ts_server_options *so, ts_error *err);
/* Stops the server, then destroys the engine (when s owns one) and the server. */
void sv_stop(sv_served *s);
/* A tiny random-weight bge-small encoder (CLS pooling) on vocabulary v (borrowed), served
 * as sv_start serves stories260K; *model gets the model, which the caller frees after
 * sv_stop. For the vocabulary's own routes (/tokenize) on bert and t5 vocabularies. */
void sv_start_encoder(sv_served *s, ts_model **model, const tokenizer_vocab *v);

/* cmocka group fixtures for files whose tests share one server with the default options:
 * stories260K (eu_setup_stories), an engine on it with the default options and the server,
 * in sv_group. */
extern sv_served sv_group;
int sv_setup_group(void **state);
int sv_teardown_group(void **state);

/* A libcurl write (or header) callback: appends to the strbuf that user points to; returns
 * 0, which fails the transfer, when the strbuf cannot grow. */
size_t sv_on_write(char *ptr, size_t size, size_t nmemb, void *user);

/* One HTTP answer; sv_answer_free frees what it holds. */
typedef struct sv_answer {
    long status;
    strbuf body;    /* NUL-terminated */
    strbuf headers; /* the raw header block, NUL-terminated; names in the server's case */
    cJSON *json;    /* the parsed body, or NULL */
} sv_answer;

/* POSTs body (borrowed; NULL: a GET) to url (the server's, as in sv_served) followed by path
 * and fills *a; fails the test when no answer came. */
void sv_post(const char *url, const char *path, const char *body, sv_answer *a);
void sv_answer_free(sv_answer *a);
/* POST /tokenize to url with text (len bytes, borrowed; no NUL) as field ("content" or
 * "prompt") and "add_special" as given (-1: left out): the answer's ids (malloc'd, their
 * count in *n). Fails the test on any answer but 200 with a "tokens" array of ids. */
int32_t *sv_tokenize(const char *url, const char *field, const char *text, size_t len,
                     int add_special, size_t *n);
/* POST /tokenize to url with body (JSON, borrowed): the answer's ids, as sv_tokenize. */
int32_t *sv_tokenize_body(const char *url, const char *body, size_t *n);
/* Fails, printing both, unless url's /tokenize gives for text (len bytes) the peer's ids in
 * the four forms llama.cpp clients send: `with` (BOS and EOS as the vocabulary asks) for
 * "content" with add_special true and for "prompt" as it comes, `plain` for "content" as
 * it comes (add_special false by default) and "prompt" with add_special false. */
void sv_expect_tokenize_forms(const char *url, const char *text, size_t len,
                              const int32_t *with, size_t n_with, const int32_t *plain,
                              size_t n_plain);
/* POSTs body (borrowed; NULL: a GET) to url followed by path and fails the test, showing
 * the answer, unless its status is status and its body holds each string of the list that
 * follows, which a NULL ends (an empty list: the status alone). */
void sv_expect(const char *url, const char *path, const char *body, long status, ...)
#if defined(__GNUC__)
    __attribute__((sentinel))
#endif
    ;
/* The value of header name (any case) in a, without CRLF (malloc'd), or NULL when absent. */
char *sv_header(const sv_answer *a, const char *name);

#endif
