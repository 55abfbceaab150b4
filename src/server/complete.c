/* complete.c: one chat or text completion: validated body -> prompt tokens -> engine
 * request -> events -> a whole JSON answer or a Server-Sent-Event stream. Each HTTP
 * connection has its own thread, so waiting blocks in poll() on the request's wake-up
 * eventfd, the client socket (hang-up cancels the request) and the shutdown eventfd. */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "server/budget.h"
#include "server/server_internal.h"

_Static_assert((int)OAI_MAX_STOP == (int)TS_MAX_STOP &&
                   (int)OAI_MAX_STOP_LEN == (int)TS_MAX_STOP_LEN && (int)OAI_MAX_N == (int)TS_MAX_N,
               "openai.h limits must match engine.h");

enum {
    STREAM_SNDBUF = 64 * 1024, /* kernel send buffer of a stream (Linux doubles it) */
};

typedef struct choice_acc {
    char *text;               /* (len) non-streamed text */
    size_t len, cap;
    oai_token_logprob *lps;   /* (n_lps) when logprobs were asked for */
    size_t n_lps, cap_lps;
    const char *finish;       /* static; NULL until DONE */
    size_t text_off;          /* streamed bytes so far (a whole answer has len) */
    double t_last;            /* time of the previous token (inter-token latency) */
} choice_acc;

struct srv_job {
    ts_server *srv;
    srv_model *model;
    const char *request_id;   /* the connection's; borrowed (it outlives the job) */
    const ts_tokenizer *tok;
    ts_request *req;
    srv_cell *cell;
    int client_fd;
    double t_start;
    oai_request oreq;
    char id[48];
    oai_meta meta;
    choice_acc acc[OAI_MAX_N];
    int prompt_tokens, cached_tokens, completion_tokens;
    atomic_bool first_token_seen; /* read by ts_server_stop to order its cancellations */
    bool failed;
    ts_status fail_status;
    char fail_msg[256];
    atomic_bool cancelled_for_shutdown; /* set by this thread or complete_cancel_all */
    srv_job *next, **prev;    /* in srv->jobs while it has a request */
    int tokens_seen;          /* TOKEN events read: usage when no DONE comes */
    size_t held;              /* bytes reserved in srv->answer_bytes (a whole answer) */
    budget_verdict over;      /* a whole answer past max_answer or the total */
    char *out;                /* stream bytes not yet handed to MHD: [out_off, out_len) */
    size_t out_len, out_off, out_cap;
    bool out_failed;
    bool stream_ended;
};

static const char *finish_name(ts_finish_reason r)
{
    switch (r) {
    case TS_FINISH_STOP: return "stop";
    case TS_FINISH_LENGTH: return "length";
    case TS_FINISH_CANCELLED: return "cancelled";
    default: return "stop";
    }
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* ---- waiting for events */

/* 1: an event is in *ev; 0: no more events; -1: the client left (or shutdown gave up).
 * The request is cancelled when the client leaves or the server shuts down. */
static int job_wait(srv_job *j, ts_event *ev)
{
    for (;;) {
        ts_status st = ts_request_next_event(j->req, ev, 0);
        if (st == TS_OK)
            return 1;
        if (st == TS_ERR_NOT_FOUND)
            return 0;
        struct pollfd p[3] = {
            {.fd = j->cell->efd, .events = POLLIN},
            {.fd = j->client_fd, .events = 0}, /* POLLHUP/POLLERR only: no half-close */
            {.fd = j->srv->stop_efd, .events = POLLIN},
        };
        int nfds = j->client_fd >= 0 ? 2 : 1;
        bool for_shutdown = atomic_load(&j->cancelled_for_shutdown);
        if (!for_shutdown)
            p[nfds++] = p[2];
        int rc = poll(p, (nfds_t)nfds, for_shutdown ? SRV_SHUTDOWN_WAIT_MS : -1);
        if (rc == 0)
            return -1; /* the engine did not wind the request down in time */
        if (rc < 0)
            continue; /* EINTR */
        if (p[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(j->cell->efd, &v, sizeof v);
            (void)r;
        }
        if (j->client_fd >= 0 && (p[1].revents & (POLLHUP | POLLERR))) {
            ts_request_cancel(j->req);
            return -1;
        }
        int last = nfds - 1;
        if (!for_shutdown && p[last].fd == j->srv->stop_efd &&
            (p[last].revents & POLLIN)) {
            atomic_store(&j->cancelled_for_shutdown, true);
            ts_request_cancel(j->req);
        }
    }
}

/* ---- recording events */

/* The token's log-probabilities; its text starts at text_off, the bytes emitted before. */
static void fill_logprob(const srv_job *j, const ts_event *ev, size_t text_off,
                         oai_token_logprob *lp)
{
    memset(lp, 0, sizeof *lp);
    lp->bytes = ts_token_bytes(j->tok, ev->token, &lp->len);
    lp->text_offset = text_off;
    lp->logprob = ev->logprob;
    lp->n_top = ev->n_top < OAI_MAX_TOP_LOGPROBS ? ev->n_top : OAI_MAX_TOP_LOGPROBS;
    for (int k = 0; k < lp->n_top; k++) {
        lp->top[k].bytes = ts_token_bytes(j->tok, ev->top[k].token, &lp->top[k].len);
        lp->top[k].logprob = ev->top[k].logprob;
    }
    if (!lp->bytes) {
        lp->bytes = "";
        lp->len = 0;
    }
    for (int k = 0; k < lp->n_top; k++)
        if (!lp->top[k].bytes) {
            lp->top[k].bytes = "";
            lp->top[k].len = 0;
        }
}

static void note_token_time(srv_job *j, choice_acc *a)
{
    double now = clock_now_s();
    if (!atomic_load(&j->first_token_seen)) {
        atomic_store(&j->first_token_seen, true);
        metrics_observe(j->srv->metrics, METRICS_HIST_TTFT, now - j->t_start);
    } else if (a->t_last > 0) {
        metrics_observe(j->srv->metrics, METRICS_HIST_ITL, now - a->t_last);
    }
    a->t_last = now;
}

static void record_done(srv_job *j, const ts_event *ev)
{
    j->acc[ev->index].finish = finish_name(ev->finish);
    j->prompt_tokens = ev->prompt_tokens;
    j->cached_tokens = ev->cached_tokens;
    j->completion_tokens += ev->completion_tokens;
}

static void record_error(srv_job *j, const ts_event *ev)
{
    j->failed = true;
    j->fail_status = ev->status;
    snprintf(j->fail_msg, sizeof j->fail_msg, "%s", ev->message);
    char line[400];
    snprintf(line, sizeof line, "%s: request failed (%s): %s", j->id, ts_status_str(ev->status),
             ev->message);
    srv_log(&j->srv->opts, &(srv_log_entry){.request_id = j->request_id,
                                            .model = j->model->name, .message = line});
}

static bool append_text(choice_acc *a, const char *text, size_t len)
{
    if (!grow((void **)&a->text, &a->cap, a->len + len + 1, 1))
        return false;
    memcpy(a->text + a->len, text, len);
    a->len += len;
    a->text[a->len] = '\0';
    return true;
}

/* Reserves n more bytes of a whole answer; past a bound the request is cancelled. */
static void reserve(srv_job *j, size_t n)
{
    const ts_server_options *o = &j->srv->opts;
    if (j->over == BUDGET_OK &&
        (j->over = budget_reserve(&j->srv->answer_bytes, &j->held, n, o->max_answer,
                                  o->max_answers_total)) != BUDGET_OK)
        ts_request_cancel(j->req);
}

/* Non-streamed: append to the choice's text and logprobs. A DONE event's text is what the
 * engine held back to the end (a possible stop string, a partial character): it belongs
 * to the completion as much as a token's. */
static bool collect_event(srv_job *j, const ts_event *ev)
{
    if (ev->index < 0 || ev->index >= j->oreq.n)
        return true;
    choice_acc *a = &j->acc[ev->index];
    /* What the event costs in the JSON answer: text escaped, a logprob entry per token. */
    size_t cost = 2 * ev->text_len;
    if (ev->kind == TS_EVENT_TOKEN && j->oreq.sampling.logprobs)
        cost += 48 + 48 * (size_t)ev->n_top;
    reserve(j, cost);
    if (ev->kind == TS_EVENT_TOKEN) {
        j->tokens_seen++;
        note_token_time(j, a);
        if (j->oreq.sampling.logprobs) {
            if (!grow((void **)&a->lps, &a->cap_lps, a->n_lps + 1, sizeof *a->lps))
                return false;
            fill_logprob(j, ev, a->len, &a->lps[a->n_lps++]);
        }
        if (!append_text(a, ev->text, ev->text_len))
            return false;
    } else if (ev->kind == TS_EVENT_DONE) {
        if (!append_text(a, ev->text, ev->text_len))
            return false;
        record_done(j, ev);
    } else {
        record_error(j, ev);
    }
    return true;
}

/* ---- streaming */

static void out_put(srv_job *j, const char *s, size_t n)
{
    if (j->out_failed || !grow((void **)&j->out, &j->out_cap, j->out_len + n, 1)) {
        j->out_failed = true;
        return;
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
}

/* Appends "data: JSON\n\n" and frees json (NULL marks a failure). */
static void out_event(srv_job *j, char *json)
{
    if (!json) {
        j->out_failed = true;
        return;
    }
    out_put(j, "data: ", 6);
    out_put(j, json, strlen(json));
    out_put(j, "\n\n", 2);
    free(json);
}

static void stream_event(srv_job *j, const ts_event *ev)
{
    if (ev->kind == TS_EVENT_ERROR) {
        record_error(j, ev);
        oai_error e;
        srv_status_error(&e, j->fail_status, j->fail_msg);
        out_event(j, oai_error_json(&e));
        return;
    }
    if (ev->index < 0 || ev->index >= j->oreq.n)
        return;
    choice_acc *a = &j->acc[ev->index];
    if (ev->kind == TS_EVENT_DONE) {
        /* Text held back to the end comes in a chunk of its own before the finish chunk;
         * no token goes with it, so its logprobs are null. */
        if (ev->text_len > 0) {
            out_event(j, oai_chunk_json(&j->meta, ev->index, false, ev->text, ev->text_len,
                                        NULL, NULL));
            a->text_off += ev->text_len;
        }
        record_done(j, ev);
        out_event(j, oai_chunk_json(&j->meta, ev->index, false, NULL, 0, a->finish, NULL));
        return;
    }
    j->tokens_seen++;
    note_token_time(j, a);
    if (ev->text_len == 0 && !j->oreq.sampling.logprobs)
        return; /* text held back (partial character or possible stop string) */
    oai_token_logprob lp;
    if (j->oreq.sampling.logprobs)
        fill_logprob(j, ev, a->text_off, &lp);
    out_event(j, oai_chunk_json(&j->meta, ev->index, false, ev->text, ev->text_len, NULL,
                                j->oreq.sampling.logprobs ? &lp : NULL));
    a->text_off += ev->text_len;
}

static void stream_finish(srv_job *j)
{
    if (j->oreq.include_usage) {
        oai_usage u = {j->prompt_tokens, j->completion_tokens, j->cached_tokens};
        out_event(j, oai_usage_chunk_json(&j->meta, &u));
    }
    out_put(j, "data: [DONE]\n\n", 14);
    j->stream_ended = true;
}

/* MHD's content reader: hands out what is buffered, else blocks for the next event. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    srv_job *j = cls;
    while (j->out_off == j->out_len) {
        j->out_off = j->out_len = 0;
        if (j->stream_ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        ts_event ev = {0};
        int r = job_wait(j, &ev);
        if (r < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (r == 0)
            stream_finish(j);
        else
            stream_event(j, &ev);
        ts_event_clear(&ev);
        if (j->out_failed)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = j->out_len - j->out_off;
    if (n > max)
        n = max;
    memcpy(buf, j->out + j->out_off, n);
    j->out_off += n;
    return (ssize_t)n;
}

/* ---- the request */

/* srv->jobs holds the jobs with a request, for complete_cancel_all; under srv->mu. */
static void list_job(srv_job *j)
{
    pthread_mutex_lock(&j->srv->mu);
    j->next = j->srv->jobs;
    j->prev = &j->srv->jobs;
    if (j->next)
        j->next->prev = &j->next;
    j->srv->jobs = j;
    pthread_mutex_unlock(&j->srv->mu);
}

static void unlist_job(srv_job *j)
{
    pthread_mutex_lock(&j->srv->mu); /* a neighbour's unlinking writes j->prev: read it here */
    if (j->prev) {
        *j->prev = j->next;
        if (j->next)
            j->next->prev = j->prev;
        j->prev = NULL;
    }
    pthread_mutex_unlock(&j->srv->mu);
}

/* Checks the context, fills engine parameters and submits; e says why not. */
static ts_status submit(srv_job *j, srv_conn *c, const int32_t *ids, size_t n, oai_error *e)
{
    const oai_request *r = &j->oreq;
    const ts_model_config *cfg = ts_model_get_config(ts_engine_get_model(j->model->engine));
    int ctx = cfg->context_len;
    const char *field = NULL;
    ts_error verr = {0};
    if (ts_sampling_params_check_vocab(&r->sampling, cfg->vocab_size, &field, &verr) != TS_OK)
        return oai_error_set(e, 400, field, "invalid_value", "%s", verr.msg);
    if (n == 0 || (long long)n >= ctx)
        return oai_error_set(e, 400, r->kind == OAI_CHAT ? "messages" : "prompt",
                             "context_length_exceeded",
                             "the prompt has %zu tokens; this model's context is %d tokens", n,
                             ctx);
    int room = ctx - (int)n;
    int max_tokens = r->max_tokens ? r->max_tokens : (r->kind == OAI_CHAT ? room : 16);
    if (max_tokens > room) {
        if (r->max_tokens)
            return oai_error_set(e, 400, "max_tokens", "context_length_exceeded",
                                 "the prompt has %zu tokens and max_tokens asks for %d more: "
                                 "%lld is over this model's context of %d tokens",
                                 n, max_tokens, (long long)n + max_tokens, ctx);
        max_tokens = room;
    }
    /* A default must not ask for more than the KV pool can ever hold for this prompt and
     * n: the engine would refuse the request for a number the client never gave. When
     * not one token fits, the engine's refusal says so with the numbers. */
    int fit = ts_engine_max_new_tokens(j->model->engine, n, r->n);
    if (!r->max_tokens && fit >= 1 && max_tokens > fit)
        max_tokens = fit;
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = ids;
    p.n_prompt = n;
    p.max_tokens = max_tokens;
    p.sampling = r->sampling;
    for (int i = 0; i < r->n_stop; i++)
        p.stop[i] = r->stop[i];
    p.n_stop = r->n_stop;
    p.priority = c->batch ? TS_PRIORITY_LOW : c->priority;
    p.n = r->n;
    p.ignore_eos = r->ignore_eos;
    p.constraint = r->format == OAI_FORMAT_JSON_OBJECT ? TS_CONSTRAINT_JSON_OBJECT
                                                        : TS_CONSTRAINT_NONE;
    p.cache_namespace = auth_request_ns(c->cache_ns, r->cache_salt);
    /* The bound is for clients that read a stream slowly. A non-streamed answer is read
     * by this server as the engine writes it; bounding that would cancel requests
     * whenever the connection's thread waited for a core. */
    p.max_unread_bytes = r->stream ? j->srv->opts.max_buffered : 0;
    p.notify = srv_cell_notify;
    p.notify_user = j->cell;
    ts_error err = {0};
    ts_status st = ts_engine_submit(j->model->engine, &p, &j->req, &err);
    if (st != TS_OK)
        return srv_status_error(e, st, err.msg);
    list_job(j);
    return TS_OK;
}

static enum MHD_Result start_stream(struct MHD_Connection *mc, srv_conn *c, srv_job *j)
{
    /* Bounded buffering: a fixed kernel send buffer (no autotuning to megabytes) so that a
     * slow reader backs up into the engine's queue, where max_buffered cancels it. */
    int sndbuf = STREAM_SNDBUF;
    if (j->client_fd >= 0)
        setsockopt(j->client_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (j->oreq.kind == OAI_CHAT)
        for (int i = 0; i < j->oreq.n; i++)
            out_event(j, oai_chunk_json(&j->meta, i, true, "", 0, NULL, NULL));
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, j, NULL);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    srv_add_cors_headers(r, c);
    MHD_add_response_header(r, "X-Request-Id", c->request_id);
    if (c->ignored[0])
        MHD_add_response_header(r, SRV_HEADER_IGNORED, c->ignored);
    enum MHD_Result ok = MHD_queue_response(mc, 200, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES)
        c->status = 200;
    return ok;
}

static enum MHD_Result answer_whole(struct MHD_Connection *mc, srv_conn *c, srv_job *j)
{
    ts_event ev = {0};
    int r;
    bool ok = true;
    while ((r = job_wait(j, &ev)) > 0) {
        ok = ok && collect_event(j, &ev);
        ts_event_clear(&ev);
    }
    if (r < 0)
        return MHD_NO; /* the client left: close; on_completed releases the request */
    oai_error e;
    if (!ok) {
        oai_error_set(&e, 500, NULL, NULL, "out of memory");
        return srv_send_error(mc, c, &e);
    }
    if (j->over != BUDGET_OK) {
        budget_error(&e, j->over, j->srv->opts.max_answer, j->srv->opts.max_answers_total);
        return srv_send_error(mc, c, &e);
    }
    if (j->failed) {
        srv_status_error(&e, j->fail_status, j->fail_msg);
        return srv_send_error(mc, c, &e);
    }
    /* Cancelled for shutdown before it made a token: answered as a request that came
     * during shutdown. One that made tokens keeps them, with finish_reason "cancelled". */
    if (atomic_load(&j->cancelled_for_shutdown) && j->completion_tokens == 0) {
        oai_error_set(&e, 503, NULL, "shutting_down",
                      "the server is shutting down; the request was cancelled before it "
                      "generated a token");
        return srv_send_error(mc, c, &e);
    }
    static const oai_token_logprob no_tokens; /* logprobs asked for, no token made */
    oai_choice choices[OAI_MAX_N];
    for (int i = 0; i < j->oreq.n; i++) {
        choice_acc *a = &j->acc[i];
        choices[i] = (oai_choice){a->text ? a->text : "", a->len, a->finish ? a->finish : "stop",
                                  j->oreq.sampling.logprobs ? (a->lps ? a->lps : &no_tokens) : NULL,
                                  a->n_lps};
    }
    oai_usage u = {j->prompt_tokens, j->completion_tokens, j->cached_tokens};
    char *json = oai_response_json(&j->meta, choices, (size_t)j->oreq.n, &u);
    size_t len = json ? strlen(json) : 0;
    if (len > j->held) { /* the estimate was low: the total counts the real size */
        atomic_fetch_add(&j->srv->answer_bytes, len - j->held);
        j->held = len;
    }
    return srv_send(mc, c, 200, "application/json", json, len);
}

static enum MHD_Result complete(struct MHD_Connection *mc, srv_conn *c, oai_kind kind)
{
    ts_server *srv = c->srv;
    oai_error e;
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        oai_error_set(&e, 500, NULL, NULL, "out of memory");
        return srv_send_error(mc, c, &e);
    }
    c->job = j; /* freed by on_completed through complete_job_free */
    j->srv = srv;
    j->t_start = c->t_start;
    j->client_fd = -1;
    j->request_id = c->request_id;
    if (oai_parse_request(kind, c->body.s, c->body.len, &j->oreq, &e) != TS_OK)
        return srv_send_error(mc, c, &e);
    memcpy(c->ignored, j->oreq.ignored, sizeof c->ignored);
    j->model = srv_find_model(srv, j->oreq.model, &e);
    if (!j->model)
        return srv_send_error(mc, c, &e);
    c->model = j->model->name;
    j->tok = ts_model_get_tokenizer(ts_engine_get_model(j->model->engine));
    j->cell = srv_cell_get(srv);
    if (!j->cell) {
        oai_error_set(&e, 500, NULL, NULL, "cannot create a wake-up eventfd");
        return srv_send_error(mc, c, &e);
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->client_fd = ci ? ci->connect_fd : -1;
    unsigned long long seq = atomic_fetch_add(&srv->next_id, 1);
    snprintf(j->id, sizeof j->id, "%s-%llx%06llx", kind == OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)srv->started, seq & 0xffffffULL);
    j->meta = (oai_meta){kind, j->id, (long long)time(NULL), j->model->name};

    int32_t *ids = NULL;
    size_t n = 0;
    ts_status st = prompt_tokens(&j->oreq, j->model, j->tok, &ids, &n, &e);
    if (st == TS_OK)
        st = submit(j, c, ids, n, &e);
    free(ids);
    if (st != TS_OK)
        return srv_send_error(mc, c, &e);
    return j->oreq.stream ? start_stream(mc, c, j) : answer_whole(mc, c, j);
}

enum MHD_Result complete_chat(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_CHAT);
}

enum MHD_Result complete_text(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_COMPLETION);
}

void complete_cancel_all(ts_server *srv)
{
    /* Requests that have not shown a token first: were a running one cancelled before
     * them, its engine could admit one of them into the freed slot at its next step
     * boundary, and it would make a token it has no use for (and owe a 200, not a 503).
     * The engine admits no request whose cancel flag is set. */
    pthread_mutex_lock(&srv->mu);
    for (int with_tokens = 0; with_tokens < 2; with_tokens++)
        for (srv_job *j = srv->jobs; j; j = j->next)
            if (atomic_load(&j->first_token_seen) == (bool)with_tokens) {
                atomic_store(&j->cancelled_for_shutdown, true); /* before its end can come */
                ts_request_cancel(j->req);
            }
    pthread_mutex_unlock(&srv->mu);
}

void complete_job_free(srv_job *j, int *prompt_tokens, int *completion_tokens)
{
    if (!j)
        return;
    /* What the client never read still counts: the request is cancelled and its last
     * events read (it ends at the next step), for the error log and the usage. */
    ts_event ev = {0};
    if (j->req)
        ts_request_cancel(j->req);
    while (j->req && !j->failed &&
           ts_request_next_event(j->req, &ev, SRV_DRAIN_MS) == TS_OK) {
        if (ev.kind == TS_EVENT_ERROR)
            record_error(j, &ev);
        else if (ev.kind == TS_EVENT_DONE)
            record_done(j, &ev);
        else
            j->tokens_seen++;
        ts_event_clear(&ev);
    }
    budget_release(&j->srv->answer_bytes, &j->held);
    *prompt_tokens = j->prompt_tokens;
    *completion_tokens = j->completion_tokens > j->tokens_seen ? j->completion_tokens
                                                               : j->tokens_seen;
    unlist_job(j); /* before the handle goes: complete_cancel_all may be reading it */
    ts_request_release(j->req);
    srv_cell_put(j->srv, j->cell);
    for (int i = 0; i < OAI_MAX_N; i++) {
        free(j->acc[i].text);
        free(j->acc[i].lps);
    }
    free(j->out);
    oai_request_clear(&j->oreq);
    free(j);
}
