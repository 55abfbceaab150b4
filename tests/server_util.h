/* server_util.h: helpers for tests that talk HTTP to a real in-process server: an engine on
 * the shared stories260K (engine_util.h's eu_model) behind a server on a free loopback port. */
#ifndef TESSERA_TESTS_SERVER_UTIL_H
#define TESSERA_TESTS_SERVER_UTIL_H

#include <stddef.h>

#include "tessera/engine.h"
#include "tessera/server.h"

/* One engine and the server in front of it. */
typedef struct sv_served {
    ts_engine *engine;
    ts_server *server;
    char url[64]; /* "http://127.0.0.1:PORT" */
} sv_served;

/* Starts an engine on eu_model with eo (borrowed; NULL: the defaults) and a server for it
 * with so (copied; its port is ignored: a free one is taken), serving the engine as model
 * "stories". Fails the test on any error. Stop with sv_stop(). */
void sv_start(sv_served *s, const ts_engine_options *eo, const ts_server_options *so);
/* Stops the server, then destroys the engine and the server. */
void sv_stop(sv_served *s);

/* A libcurl write (or header) callback: appends to the strbuf that user points to; returns
 * 0, which fails the transfer, when the strbuf cannot grow. */
size_t sv_on_write(char *ptr, size_t size, size_t nmemb, void *user);

#endif
