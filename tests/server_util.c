/* server_util.c: an engine and a server on a free loopback port for the HTTP tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "common/strbuf.h"
#include "engine_util.h"
#include "server_util.h"

void sv_start(sv_served *s, const ts_engine_options *eo, const ts_server_options *so)
{
    ts_error err = {0};
    s->engine = eu_start(eu_model, eo);
    ts_server_options o = *so;
    o.port = 0;
    if (ts_server_create(&o, &s->server, &err) != TS_OK ||
        ts_server_add_model(s->server, "stories", s->engine, &err) != TS_OK ||
        ts_server_start(s->server, &err) != TS_OK)
        fail_msg("server: %s", err.msg);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", ts_server_port(s->server));
}

void sv_stop(sv_served *s)
{
    ts_server_stop(s->server);
    ts_engine_destroy(s->engine);
    ts_server_destroy(s->server);
}

size_t sv_on_write(char *ptr, size_t size, size_t nmemb, void *user)
{
    return strbuf_add(user, ptr, size * nmemb) ? size * nmemb : 0;
}
