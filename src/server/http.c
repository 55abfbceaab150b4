/* http.c: the top of the server: the libmicrohttpd daemon (one thread per connection), the
 * route table (the only dispatch), body accumulation and limits, authentication, the
 * requests in flight, the per-request log, and the server's lifecycle. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "server/budget.h"
#include "server/origin.h"
#include "server/reqcheck.h"
#include "server/server_internal.h"
#include "server/utf8.h"
#include "server/ui.h"

/* ---- routes */

/* When a route is answered: ROUTE_FIRST before the connection limit and shutdown checks
 * (a load balancer's probe must see "shutting_down"), ROUTE_HEADERS once the headers pass
 * them (no body), ROUTE_BODY once the whole body is in. */
typedef enum route_when { ROUTE_FIRST, ROUTE_HEADERS, ROUTE_BODY } route_when;

/* Who may call a route when the server has API keys: a key holder, anyone, or anyone
 * unless protect_metrics. */
typedef enum route_auth { AUTH_KEY, AUTH_OPEN, AUTH_METRICS } route_auth;

/* The only dispatch: a request's path picks its row, the row its handler. */
typedef struct http_route {
    const char *path, *method;
    metrics_route metric;
    route_when when;
    route_auth auth;
    bool batch;      /* /v1/batch/...: always LOW priority */
    bool in_flight;  /* waits for an engine: counted in srv->in_flight until on_completed */
    srv_handler *handler;
} http_route;

static const http_route routes[] = {
    {"/v1/chat/completions", "POST", METRICS_ROUTE_CHAT, ROUTE_BODY, AUTH_KEY, false, true,
     complete_chat},
    {"/v1/completions", "POST", METRICS_ROUTE_COMPLETIONS, ROUTE_BODY, AUTH_KEY, false, true,
     complete_text},
    {"/v1/responses", "POST", METRICS_ROUTE_CHAT, ROUTE_BODY, AUTH_KEY, false, true,
     complete_responses},
    {"/v1/messages", "POST", METRICS_ROUTE_CHAT, ROUTE_BODY, AUTH_KEY, false, true,
     complete_messages},
    {"/v1/messages/count_tokens", "POST", METRICS_ROUTE_TOKENIZE, ROUTE_BODY, AUTH_KEY, false,
     false, count_tokens_route},
    {"/completion", "POST", METRICS_ROUTE_COMPLETIONS, ROUTE_BODY, AUTH_KEY, false, true,
     complete_llama},
    {"/completions", "POST", METRICS_ROUTE_COMPLETIONS, ROUTE_BODY, AUTH_KEY, false, true,
     complete_llama},
    {"/v1/batch/chat/completions", "POST", METRICS_ROUTE_BATCH_CHAT, ROUTE_BODY, AUTH_KEY, true,
     true, complete_chat},
    {"/v1/batch/completions", "POST", METRICS_ROUTE_BATCH_COMPLETIONS, ROUTE_BODY, AUTH_KEY,
     true, true, complete_text},
    {"/v1/embeddings", "POST", METRICS_ROUTE_EMBEDDINGS, ROUTE_BODY, AUTH_KEY, false, true,
     embed_route},
    {"/v1/rerank", "POST", METRICS_ROUTE_RERANK, ROUTE_BODY, AUTH_KEY, false, true, rerank_route},
    {"/v1/reranking", "POST", METRICS_ROUTE_RERANK, ROUTE_BODY, AUTH_KEY, false, true,
     rerank_route},
    {"/rerank", "POST", METRICS_ROUTE_RERANK, ROUTE_BODY, AUTH_KEY, false, true, rerank_route},
    {"/v1/models", "GET", METRICS_ROUTE_MODELS, ROUTE_HEADERS, AUTH_KEY, false, false,
     routes_models},
    {SRV_MODEL_ROUTE, "GET", METRICS_ROUTE_MODELS, ROUTE_HEADERS, AUTH_KEY, false, false,
     routes_model},
    {"/health", "GET", METRICS_ROUTE_HEALTH, ROUTE_FIRST, AUTH_OPEN, false, false,
     routes_health},
    {"/metrics", "GET", METRICS_ROUTE_METRICS, ROUTE_HEADERS, AUTH_METRICS, false, false,
     routes_metrics},
    {"/tokenize", "POST", METRICS_ROUTE_TOKENIZE, ROUTE_BODY, AUTH_KEY, false, false,
     routes_tokenize},
    {"/detokenize", "POST", METRICS_ROUTE_DETOKENIZE, ROUTE_BODY, AUTH_KEY, false, false,
     routes_detokenize},
    {"/props", "GET", METRICS_ROUTE_OTHER, ROUTE_HEADERS, AUTH_KEY, false, false, routes_props},
    {"/slots", "GET", METRICS_ROUTE_OTHER, ROUTE_HEADERS, AUTH_KEY, false, false, routes_slots},
    {"/apply-template", "POST", METRICS_ROUTE_OTHER, ROUTE_BODY, AUTH_KEY, false, false,
     routes_apply_template},
};

/* The row of path (up to a '?'), or NULL. */
static const http_route *find_route(const char *path)
{
    size_t n = strcspn(path, "?");
    for (size_t r = 0; r < sizeof routes / sizeof routes[0]; r++) {
        size_t len = strlen(routes[r].path);
        bool prefix = routes[r].path[len - 1] == '/'; /* the rest of the path is an argument */
        if ((len == n || (prefix && len < n)) && !strncmp(path, routes[r].path, len))
            return &routes[r];
    }
    return NULL;
}

/* Runs the route's handler; one that waits for an engine is counted in flight first. */
static enum MHD_Result dispatch(struct MHD_Connection *mc, srv_conn *c)
{
    const http_route *r = c->entry;
    c->read_done = true;
    if (r->in_flight) {
        pthread_mutex_lock(&c->srv->mu);
        c->srv->in_flight++;
        pthread_mutex_unlock(&c->srv->mu);
        c->in_flight = true;
    }
    return r->handler(mc, c);
}

/* ---- the access handler */

static bool authorized(ts_server *srv, struct MHD_Connection *mc, srv_conn *c,
                       const http_route *r)
{
    if (!srv->keys)
        return true;
    bool open = r->auth == AUTH_OPEN || (r->auth == AUTH_METRICS && !srv->opts.protect_metrics);
    if (open)
        return true;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    /* Anthropic's clients send the key as "x-api-key: KEY". */
    const char *x = h ? NULL : MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "x-api-key");
    char bearer[AUTH_MAX_KEY_LEN + 16];
    if (x && strlen(x) <= AUTH_MAX_KEY_LEN) {
        snprintf(bearer, sizeof bearer, "Bearer %s", x);
        h = bearer;
    }
    const auth_key *k = auth_check(srv->keys, h);
    if (!k)
        return false;
    c->priority = k->tier;
    c->cache_ns = k->cache_ns;
    return true;
}

bool srv_reserve(srv_conn *c, size_t n, oai_error *e)
{
    ts_server *srv = c->srv;
    if (budget_reserve(&srv->answer_bytes, &c->held, n, 0, srv->opts.max_answers_total) ==
        BUDGET_OK)
        return true;
    budget_busy_error(e, srv->opts.max_answers_total);
    return false;
}

/* Appends an upload chunk, counted in the server-wide budget; past the limit the rest is
 * read and dropped, answered 413; past the budget the body is freed, the rest dropped,
 * answered 503. */
static void accumulate(srv_conn *c, const char *data, size_t n, size_t limit)
{
    oai_error e;
    if (c->body_too_big || c->body_busy)
        return;
    if (c->body.len + n > limit) {
        c->body_too_big = true;
        return;
    }
    if (!srv_reserve(c, n, &e)) {
        c->body_busy = true;
        strbuf_free(&c->body);
        return;
    }
    if (!strbuf_add(&c->body, data, n))
        c->body_too_big = true; /* out of memory: answered as too large rather than crashing */
}

typedef struct header_count {
    int lines, content_length, host;
    int bad_line;       /* the first header line with a NUL, CR or LF (1-based), or 0 */
    bool bad_host;      /* a Host value that is no host[:port] */
    const char *last_value; /* the previous header's value and length, judged by */
    size_t last_len;        /* reqcheck_value_whole once the next name is known */
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    header_count *hc = cls;
    if (!hc->bad_line && hc->last_value &&
        !reqcheck_value_whole(hc->last_value, hc->last_len, key))
        hc->bad_line = hc->lines;
    hc->lines++;
    if (!hc->bad_line && !reqcheck_field_ok(key, key_size, value, value_size))
        hc->bad_line = hc->lines;
    hc->last_value = value;
    hc->last_len = value_size;
    hc->content_length += !strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!strcasecmp(key, MHD_HTTP_HEADER_HOST)) {
        hc->host++;
        hc->bad_host |= !reqcheck_host_ok(value, value_size);
    }
    return MHD_YES;
}

/* The request line and Host, as nginx checks them: a NUL or control byte in the request
 * line, a NUL, CR or LF inside a header, no Host in HTTP/1.1, two Hosts or a malformed
 * one are answered 400 and the connection closed. */
static bool line_ok(srv_conn *c, const char *method, const char *version,
                    const header_count *hc, oai_error *e)
{
    const char *why = NULL;
    if (!c->target_ok ||
        !reqcheck_line_ok(method, c->raw_uri, c->raw_uri_len, version, SRV_CONN_MEMORY))
        why = "the request line holds a NUL or a control byte";
    else if (hc->bad_line)
        why = "a header holds a NUL, a CR or a LF";
    else if (hc->host > 1)
        why = "the request has more than one Host header";
    else if (hc->host == 0 && !strcmp(version, MHD_HTTP_VERSION_1_1))
        why = "an HTTP/1.1 request needs a Host header";
    else if (hc->bad_host)
        why = "the Host header is not host[:port]";
    if (!why)
        return true;
    c->close = true;
    oai_error_set(e, 400, NULL, "invalid_request", "%s", why);
    return false;
}

/* The framing checks, before anything else: two Content-Length headers let a request
 * hide in a body (answered 400 and closed); more header lines than SRV_MAX_HEADERS are
 * answered 431 while the connection's memory still holds an answer; then line_ok. */
static bool framing_ok(struct MHD_Connection *mc, srv_conn *c, const char *method,
                       const char *version, oai_error *e)
{
    header_count hc = {0};
    MHD_get_connection_values_n(mc, MHD_HEADER_KIND, count_header, &hc);
    if (!hc.bad_line && hc.last_value && !reqcheck_value_whole(hc.last_value, hc.last_len, NULL))
        hc.bad_line = hc.lines;
    if (hc.content_length > 1) {
        c->close = true;
        oai_error_set(e, 400, NULL, "invalid_request",
                      "the request has %d Content-Length headers; one at most", hc.content_length);
        return false;
    }
    if (hc.lines > SRV_MAX_HEADERS) {
        c->close = true;
        oai_error_set(e, 431, NULL, "request_header_fields_too_large",
                      "the request has %d header lines, over the limit of %d", hc.lines,
                      SRV_MAX_HEADERS);
        return false;
    }
    return line_ok(c, method, version, &hc, e);
}

/* Browser-driven requests: a Host that is no loopback name on a loopback bind (DNS
 * rebinding), a cross-site Origin, a JSON route's body of a form's type. An allowed
 * cross-origin preflight (OPTIONS) is answered here. 0: go on; else answered. */
static int browser_check(struct MHD_Connection *mc, srv_conn *c, const char *method,
                         enum MHD_Result *rc)
{
    ts_server *srv = c->srv;
    oai_error e;
    const char *host = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    if (!origin_host_ok(srv->host, srv->opts.allowed_hosts, host)) {
        oai_error_set(&e, 403, NULL, "host_not_allowed",
                      "the Host header names no loopback address; see --allowed-hosts");
        *rc = srv_send_error(mc, c, &e);
        return 1;
    }
    origin_verdict v = origin_check(srv->opts.cors, host, origin);
    if (v == ORIGIN_REFUSED) {
        oai_error_set(&e, 403, NULL, "origin_not_allowed",
                      "cross-origin requests are refused unless --cors names the origin");
        *rc = srv_send_error(mc, c, &e);
        return 1;
    }
    if (v == ORIGIN_CORS)
        c->cors_origin = origin; /* MHD's copy: valid until the request completes */
    if (!strcmp(method, "OPTIONS") && v != ORIGIN_NONE && c->entry) {
        *rc = srv_send(mc, c, 204, "text/plain", strdup(""), 0);
        return 1;
    }
    const char *ctype =
        MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (c->entry && c->entry->when == ROUTE_BODY && !strcmp(method, c->entry->method) &&
        !origin_content_type_ok(ctype, origin != NULL)) {
        oai_error_set(&e, 415, NULL, "unsupported_media_type",
                      "send the body as Content-Type: application/json");
        *rc = srv_send_error(mc, c, &e);
        return 1;
    }
    return 0;
}

/* First call for a request: route, method, auth and declared size are checked at once. */
static enum MHD_Result begin_request(ts_server *srv, struct MHD_Connection *mc, srv_conn *c,
                                     const char *method, const char *version)
{
    const http_route *r = c->entry;
    oai_error e;
    if (!framing_ok(mc, c, method, version, &e))
        return srv_send_error(mc, c, &e);
    enum MHD_Result rc;
    if (browser_check(mc, c, method, &rc))
        return rc;
    if (!r && !srv->opts.no_ui && ui_find(c->path))
        return ui_handle(mc, c, method); /* the chat page: open to all, it asks for the key */
    if (!r) {
        oai_error_set(&e, 404, NULL, "not_found", "no route %s %s", c->method, c->path);
        return srv_send_error(mc, c, &e);
    }
    if (strcmp(method, r->method)) {
        oai_error_set(&e, 405, NULL, "method_not_allowed", "%s wants %s, not %s", r->path,
                      r->method, c->method);
        return srv_send_error(mc, c, &e);
    }
    if (!authorized(srv, mc, c, r)) {
        oai_error_set(&e, 401, NULL, "invalid_api_key",
                      "a valid API key is required: send 'Authorization: Bearer KEY' "
                      "(or 'x-api-key: KEY')");
        return srv_send_error(mc, c, &e);
    }
    if (r->when == ROUTE_FIRST)
        return dispatch(mc, c);
    if (guard_over_cap(srv->guard, c->guard)) {
        oai_error_set(&e, 503, NULL, "too_many_connections",
                      "this address holds more than %d connections; retry",
                      srv->opts.max_per_address);
        return srv_send_error(mc, c, &e);
    }
    int open = atomic_load(&srv->open_conns);
    if (open > srv->opts.max_connections) {
        oai_error_set(&e, 503, NULL, "too_many_connections",
                      "%d connections are open, over the limit of %d; retry", open,
                      srv->opts.max_connections);
        return srv_send_error(mc, c, &e);
    }
    if (atomic_load(&srv->stopping)) {
        oai_error_set(&e, 503, NULL, "shutting_down", "the server is shutting down");
        return srv_send_error(mc, c, &e);
    }
    if (r->when == ROUTE_HEADERS)
        return dispatch(mc, c);
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > srv->opts.max_body) {
        oai_error_set(&e, 413, NULL, "request_too_large",
                      "the request body of %.20s bytes is over the limit of %zu bytes", cl,
                      srv->opts.max_body);
        return srv_send_error(mc, c, &e);
    }
    return MHD_YES; /* wait for the body */
}

static enum MHD_Result end_request(struct MHD_Connection *mc, srv_conn *c)
{
    oai_error e;
    if (c->body_too_big) {
        oai_error_set(&e, 413, NULL, "request_too_large",
                      "the request body is over the limit of %zu bytes", c->srv->opts.max_body);
        return srv_send_error(mc, c, &e);
    }
    if (c->body_busy) {
        budget_busy_error(&e, c->srv->opts.max_answers_total);
        return srv_send_error(mc, c, &e);
    }
    if (!c->body.s)
        accumulate(c, "", 0, 1); /* an empty body is parsed (and refused) as JSON */
    return dispatch(mc, c);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **req_cls)
{
    ts_server *srv = cls;
    srv_conn *c = *req_cls;
    if (!c || !c->begun) {
        if (!c) { /* on_uri could not allocate: the request line goes unchecked */
            c = calloc(1, sizeof *c);
            if (!c)
                return MHD_NO;
            *req_cls = c; /* from here on only on_completed frees it */
            c->target_ok = true;
        }
        c->begun = true;
        c->srv = srv;
        c->t_start = clock_now_s();
        c->priority = TS_PRIORITY_NORMAL;
        srv_request_id(c->request_id,
                       MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "X-Request-Id"),
                       srv->id_seed + atomic_fetch_add(&srv->next_request, 1));
        /* Escaped: they go into log lines and JSON messages (a path may hold any byte). */
        utf8_escape_controls(c->method, sizeof c->method, method);
        char path[sizeof c->path];
        snprintf(path, sizeof path, "%.*s", (int)strcspn(url, "?"), url);
        utf8_escape_controls(c->path, sizeof c->path, path);
        const http_route *r = find_route(c->path);
        c->entry = r;
        c->api = !r                                  ? API_CHAT
                 : r->handler == complete_messages  ? API_MESSAGES
                 : r->handler == count_tokens_route ? API_MESSAGES
                 : r->handler == complete_responses ? API_RESPONSES
                                                    : API_CHAT;
        c->allow = r ? r->method : NULL;
        c->route = r ? r->metric : METRICS_ROUTE_OTHER;
        c->batch = r && r->batch;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        c->guard = ci ? ci->socket_context : NULL;
        enum MHD_Result rc = begin_request(srv, mc, c, method, version);
        if (c->status || c->read_done)
            guard_request_in(srv->guard, c->guard);
        return rc;
    }
    if (c->status)
        return MHD_YES; /* answered early; MHD drops whatever body follows */
    if (*upload_data_size) {
        accumulate(c, upload_data, *upload_data_size, srv->opts.max_body);
        *upload_data_size = 0;
        return MHD_YES;
    }
    guard_request_in(srv->guard, c->guard);
    return end_request(mc, c);
}

/* MHD's URI log callback, the first sight of a request: its state is allocated here, so
 * that the raw target is seen before MHD unescapes it in place. Returns the initial
 * *req_cls (NULL out of memory); only on_completed frees it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
    (void)cls;
    (void)mc;
    srv_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->raw_uri = uri;
    c->raw_uri_len = uri ? strlen(uri) : 0;
    c->target_ok = !uri || reqcheck_target_ok(uri);
    return c;
}

static size_t on_unescape(void *cls, struct MHD_Connection *mc, char *s)
{
    (void)cls;
    (void)mc;
    return utf8_unescape_url(s);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    ts_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&srv->open_conns, 1);
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (fd) /* out of memory: the connection goes unguarded */
            *socket_context = guard_open(srv->guard, fd->connect_fd,
                                         addr ? addr->client_addr : NULL);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        guard_close(srv->guard, *socket_context);
        *socket_context = NULL;
        atomic_fetch_sub(&srv->open_conns, 1);
    }
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)mc;
    ts_server *srv = cls;
    srv_conn *c = *req_cls;
    if (!c)
        return;
    *req_cls = NULL;
    if (!c->begun) { /* refused by MHD before the access handler saw it */
        free(c);
        return;
    }
    guard_request_done(srv->guard, c->guard);
    budget_release(&srv->answer_bytes, &c->held); /* its body, its work, its answer */
    int prompt_tokens = c->prompt_tokens, completion_tokens = 0;
    bool in_flight = c->in_flight;
    if (c->job)
        complete_job_free(c->job, &prompt_tokens, &completion_tokens);
    double dur = clock_now_s() - c->t_start;
    metrics_count_request(srv->metrics, c->route, c->status);
    metrics_observe(srv->metrics, METRICS_HIST_DURATION, dur);
    metrics_add_tokens(srv->metrics, prompt_tokens, completion_tokens);
    srv_log(&srv->opts, &(srv_log_entry){
        .request_id = c->request_id, .model = c->model, .method = c->method, .path = c->path,
        .status = c->status, .prompt_tokens = prompt_tokens,
        .completion_tokens = completion_tokens, .duration_ms = dur * 1e3,
        .error_code = c->error_code[0] ? c->error_code : NULL,
        .error_param = c->error_param[0] ? c->error_param : NULL,
        .message = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? NULL : "connection closed early"});
    strbuf_free(&c->body);
    free(c);
    if (in_flight) {
        pthread_mutex_lock(&srv->mu);
        srv->in_flight--;
        pthread_cond_broadcast(&srv->idle);
        pthread_mutex_unlock(&srv->mu);
    }
}

/* ---- lifecycle */

void ts_server_options_default(ts_server_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_body = 1 << 20;
    o->max_connections = 256;
    o->max_buffered = 1 << 20;
    o->grace_ms = 10000;
    o->read_timeout_ms = 30000;
    o->max_answer = 8u << 20;
    o->max_answers_total = 64u << 20;
    o->max_per_address = 128;
}

ts_status ts_server_create(const ts_server_options *opts, ts_server **out, ts_error *err)
{
    *out = NULL;
    ts_status st = TS_OK;
    ts_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate the server");
    srv->stop_efd = -1;
    srv->listen_fd = -1;
    srv->id_seed = (uint64_t)clock_now_s() * 1000003u ^ ((uint64_t)getpid() << 32);
    pthread_mutex_init(&srv->mu, NULL);
    clock_cond_init(&srv->idle);
    srv->opts = *opts;
    if (opts->port < 0 || opts->port > 65535 || opts->max_body == 0 || opts->max_connections < 1) {
        st = ts_error_set(err, TS_ERR_INVALID_ARG,
                          "server options out of range: port %d, max_body %zu, max_connections %d",
                          opts->port, opts->max_body, opts->max_connections);
        goto fail;
    }
    srv->host = strdup(opts->host ? opts->host : "127.0.0.1");
    srv->template_name = opts->chat_template ? strdup(opts->chat_template) : NULL;
    if (!srv->host || (opts->chat_template && !srv->template_name)) {
        st = ts_error_set(err, TS_ERR_NOMEM, "cannot copy server options");
        goto fail;
    }
    srv->opts.host = srv->host;
    srv->opts.allowed_hosts = srv->allowed_hosts = opts->allowed_hosts ? strdup(opts->allowed_hosts) : NULL;
    srv->opts.cors = srv->cors = opts->cors ? strdup(opts->cors) : NULL;
    if ((opts->allowed_hosts && !srv->allowed_hosts) || (opts->cors && !srv->cors)) {
        st = ts_error_set(err, TS_ERR_NOMEM, "cannot copy server options");
        goto fail;
    }
    srv->opts.chat_template = srv->template_name;
    srv->opts.api_keys_path = NULL;
    chat_template_kind kind;
    if (srv->template_name && (st = chat_template_from_name(srv->template_name, &kind, err)) != TS_OK)
        goto fail;
    if (opts->chat_template_file && !opts->chat_template &&
        (st = srv_template_load(srv, opts->chat_template_file, err)) != TS_OK)
        goto fail;
    srv->opts.chat_template_file = NULL;
    if (opts->api_keys_path && (st = auth_keys_load(opts->api_keys_path, &srv->keys, err)) != TS_OK)
        goto fail;
    if ((st = metrics_create(&srv->metrics, err)) != TS_OK)
        goto fail;
    /* Readers may fill the table but one slot: a new connection always finds room, and
     * shuts the oldest reader down to keep it so (/health answers under slowloris). */
    if ((st = guard_create(&srv->guard, opts->max_connections + SRV_CONN_SPARE - 1,
                           opts->max_per_address, opts->read_timeout_ms, err)) != TS_OK)
        goto fail;
    srv->stop_efd = eventfd(0, EFD_CLOEXEC);
    if (srv->stop_efd < 0) {
        st = ts_error_set(err, TS_ERR_IO, "cannot create an eventfd");
        goto fail;
    }
    *out = srv;
    return TS_OK;
fail:
    ts_server_destroy(srv);
    return st;
}

ts_status ts_server_add_model(ts_server *srv, const char *name, ts_engine *engine,
                              ts_error *err)
{
    if (srv->daemon)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "models must be added before the start");
    if (srv->n_models == SRV_MAX_MODELS)
        return ts_error_set(err, TS_ERR_TOO_LONG, "at most %d models", SRV_MAX_MODELS);
    for (int i = 0; i < srv->n_models; i++)
        if (!strcmp(srv->models[i].name, name))
            return ts_error_set(err, TS_ERR_INVALID_ARG, "two models are named '%s'", name);
    srv_model *m = &srv->models[srv->n_models];
    m->name = strdup(name);
    if (!m->name)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot copy model name");
    m->engine = engine;
    ts_status st = srv_template_setup(srv, m, err);
    if (st != TS_OK) {
        free(m->name);
        memset(m, 0, sizeof *m);
        return st;
    }
    srv->n_models++;
    return TS_OK;
}

ts_status ts_server_start(ts_server *srv, ts_error *err)
{
    if (srv->daemon)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the server is already started");
    if (!srv->n_models)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the server has no model to serve");
    ts_status st;
    if (srv->listen_fd < 0 && (st = ts_server_listen(srv, err)) != TS_OK)
        return st;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ITC | MHD_USE_POLL;
    if (srv->listen_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->started = (long long)time(NULL); /* before any connection thread can read it */
    srv->daemon = MHD_start_daemon(
        flags, (uint16_t)srv->port, NULL, NULL, on_access, srv, MHD_OPTION_LISTEN_SOCKET,
        srv->listen_fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)srv->opts.max_connections + SRV_CONN_SPARE,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
        MHD_OPTION_END);
    if (!srv->daemon)
        return ts_error_set(err, TS_ERR_IO, "cannot serve on %s port %d", srv->host, srv->port);
    srv->listen_fd = -1; /* the daemon's now: ts_server_stop closes it */
    return TS_OK;
}

int ts_server_port(const ts_server *srv)
{
    return srv->port;
}

/* Waits up to ms (0: not at all) for the requests in flight to end. */
static void wait_in_flight(ts_server *srv, int ms)
{
    struct timespec until = clock_deadline(ms);
    pthread_mutex_lock(&srv->mu);
    while (srv->in_flight > 0 && pthread_cond_timedwait(&srv->idle, &srv->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&srv->mu);
}

void ts_server_stop(ts_server *srv)
{
    if (!srv || !srv->daemon || srv->stopped)
        return;
    srv->stopped = true;
    atomic_store(&srv->stopping, true);
    MHD_socket ls = MHD_quiesce_daemon(srv->daemon);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    /* Let requests in flight finish, up to the grace period (a negative one waits not at
     * all). */
    wait_in_flight(srv, srv->opts.grace_ms > 0 ? srv->opts.grace_ms : 0);
    /* Cancel the rest: complete_cancel_all cancels every submitted request at once, and
     * stop_efd wakes their threads and has one still submitting cancel its own. Their
     * answers (a 503, what a request made so far, a stream's last chunks) must go out
     * before MHD_stop_daemon, which shuts every connection's socket. */
    complete_cancel_all(srv);
    uint64_t one = 1;
    ssize_t w = write(srv->stop_efd, &one, sizeof one);
    (void)w;
    wait_in_flight(srv, SRV_SHUTDOWN_WAIT_MS);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}

void ts_server_destroy(ts_server *srv)
{
    if (!srv)
        return;
    ts_server_stop(srv);
    for (srv_cell *c = srv->all_cells, *next; c; c = next) {
        next = c->next_all;
        close(c->efd);
        free(c);
    }
    for (int i = 0; i < srv->n_models; i++) {
        free(srv->models[i].name);
        srv_template_free(&srv->models[i]);
    }
    free(srv->template_src);
    if (srv->stop_efd >= 0)
        close(srv->stop_efd);
    guard_destroy(srv->guard);
    if (srv->listen_fd >= 0) /* bound but never started */
        close(srv->listen_fd);
    metrics_free(srv->metrics);
    auth_keys_free(srv->keys);
    free(srv->host);
    free(srv->allowed_hosts);
    free(srv->cors);
    free(srv->template_name);
    pthread_cond_destroy(&srv->idle);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}
