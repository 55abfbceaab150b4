/* reply.c: the bottom of the server: queueing answers (bodies, OpenAI errors, engine
 * statuses), finding a model by name, and the wake-up cells the engine's notify callback
 * writes. Calls nothing else of the server. */
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "server/server_internal.h"

enum MHD_Result srv_send(struct MHD_Connection *mc, srv_conn *c, int status,
                         const char *content_type, char *body, size_t len)
{
    if (!body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        body = strdup(oom);
        if (!body)
            return MHD_NO;
        len = strlen(body);
        status = 500;
        content_type = "application/json";
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, "X-Request-Id", c->request_id);
    if (status == 429 || status == 503)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 503 || c->close) /* overloaded, stopping or unframed: free the thread */
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (status == 405)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, c->allow ? c->allow : "GET");
    if (c->ignored[0])
        MHD_add_response_header(r, SRV_HEADER_IGNORED, c->ignored);
    srv_add_cors_headers(r, c);
    enum MHD_Result ok = MHD_queue_response(mc, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES) {
        c->status = status;
        guard_answer_queued(c->srv->guard, c->guard);
    }
    return ok;
}

void srv_add_cors_headers(struct MHD_Response *r, const srv_conn *c)
{
    if (!c->cors_origin)
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", c->cors_origin);
    MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
}

/* Copies s into out keeping letters, digits and _ . - [ ] (a field path, a code), each
 * other byte as '?': a log line's key=value stays one token whatever a client sent. */
static void log_token(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++) {
        char ch = *s;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("_.-[]", ch);
        out[n++] = plain ? ch : '?';
    }
    out[n] = '\0';
}

enum MHD_Result srv_send_error(struct MHD_Connection *mc, srv_conn *c, const oai_error *e)
{
    /* A client's mistake is logged by its code and field, never its message (which may
     * quote the body). */
    if (e->http_status >= 400 && e->http_status < 500) {
        log_token(c->error_code, sizeof c->error_code, e->code[0] ? e->code : e->type);
        log_token(c->error_param, sizeof c->error_param, e->param);
    }
    char *json = api_error_json(c->api, e);
    return srv_send(mc, c, e->http_status, "application/json", json, json ? strlen(json) : 0);
}

enum MHD_Result srv_send_json(struct MHD_Connection *mc, srv_conn *c, int status, cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return srv_send(mc, c, status, "application/json", s, s ? strlen(s) : 0);
}

/* ---- engine statuses */

/* X(status, http, code): how the server answers a status the engine gives, at submit or
 * in an ERROR event. One row per TS_STATUS_MAP row. A cancellation reaches a client only
 * when the engine gave up on it (it read too slowly, see max_buffered). */
#define SRV_STATUS_HTTP(X)                                   \
    X(OK, 200, NULL)                                         \
    X(ERR_IO, 500, "engine_error")                           \
    X(ERR_NOMEM, 500, "engine_error")                        \
    X(ERR_FORMAT, 500, "engine_error")                       \
    X(ERR_UNSUPPORTED, 500, "engine_error")                  \
    X(ERR_INVALID_ARG, 400, "invalid_value")                 \
    X(ERR_NOT_FOUND, 500, "engine_error")                    \
    X(ERR_TOO_LONG, 400, "context_length_exceeded")          \
    X(ERR_OUT_OF_BLOCKS, 400, "context_length_exceeded")     \
    X(ERR_QUEUE_FULL, 429, "queue_full")                     \
    X(ERR_CANCELLED, 503, "cancelled")                       \
    X(ERR_TIMEOUT, 500, "engine_error")                      \
    X(ERR_SHUTDOWN, 503, "shutting_down")                    \
    X(ERR_INTERNAL, 500, "engine_error")

#define SRV_STATUS_ROW(name, http, code) [TS_##name] = {http, code},
static const struct {
    int http;
    const char *code;
} status_http[] = {SRV_STATUS_HTTP(SRV_STATUS_ROW)};
#undef SRV_STATUS_ROW

#define SRV_STATUS_ONE(name, http, code) +1
_Static_assert(0 SRV_STATUS_HTTP(SRV_STATUS_ONE) == TS_STATUS_COUNT,
               "SRV_STATUS_HTTP needs one row per ts_status");
#undef SRV_STATUS_ONE

ts_status srv_status_error(oai_error *e, ts_status st, const char *msg)
{
    if ((unsigned)st >= TS_STATUS_COUNT)
        st = TS_ERR_INTERNAL;
    return oai_error_set(e, status_http[st].http, NULL, status_http[st].code, "%s",
                         msg && *msg ? msg : ts_status_str(st));
}

/* ---- models */

srv_model *srv_find_model(ts_server *srv, const char *name, oai_error *e)
{
    if (!name)
        return srv->n_models ? &srv->models[0] : NULL;
    for (int i = 0; i < srv->n_models; i++)
        if (!strcmp(srv->models[i].name, name))
            return &srv->models[i];
    oai_error_set(e, 404, "model", "model_not_found", "the model '%.200s' does not exist", name);
    return NULL;
}

/* ---- wake-up cells */

srv_cell *srv_cell_get(ts_server *srv)
{
    pthread_mutex_lock(&srv->mu);
    srv_cell *c = srv->free_cells;
    if (c)
        srv->free_cells = c->next_free;
    pthread_mutex_unlock(&srv->mu);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (c->efd < 0) {
            free(c);
            return NULL;
        }
        pthread_mutex_lock(&srv->mu);
        c->next_all = srv->all_cells;
        srv->all_cells = c;
        pthread_mutex_unlock(&srv->mu);
    }
    uint64_t v;
    while (read(c->efd, &v, sizeof v) == sizeof v) /* drain late wake-ups */
        ;
    return c;
}

void srv_cell_put(ts_server *srv, srv_cell *cell)
{
    if (!cell)
        return;
    pthread_mutex_lock(&srv->mu);
    cell->next_free = srv->free_cells;
    srv->free_cells = cell;
    pthread_mutex_unlock(&srv->mu);
}

void srv_cell_notify(void *cell)
{
    uint64_t one = 1;
    ssize_t w = write(((srv_cell *)cell)->efd, &one, sizeof one);
    (void)w; /* EAGAIN means the counter is already non-zero: the waiter wakes anyway */
}
