/* complete.c: one chat or text completion: validated body -> prompt tokens -> engine
 * request -> events (job.c) -> a whole JSON answer, or a Server-Sent-Event stream
 * (stream.c). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/job.h"

_Static_assert((int)OAI_MAX_STOP == (int)TS_MAX_STOP &&
                   (int)OAI_MAX_STOP_LEN == (int)TS_MAX_STOP_LEN && (int)OAI_MAX_N == (int)TS_MAX_N,
               "openai.h limits must match engine.h");

static bool append_text(choice_acc *a, const char *text, size_t len)
{
    if (!job_grow((void **)&a->text, &a->cap, a->len + len + 1, 1))
        return false;
    memcpy(a->text + a->len, text, len);
    a->len += len;
    a->text[a->len] = '\0';
    return true;
}

/* The text of a TOKEN or DONE event to choice a's answer: as it comes, or the content its
 * tool-call parser releases (the calls go to a->calls). */
static bool append_answer(srv_job *j, choice_acc *a, const ts_event *ev)
{
    if (!job_tools_on(j))
        return append_text(a, ev->text, ev->text_len);
    if (job_tools_event(j, ev) < 0)
        return false;
    bool ok = append_text(a, a->tco.content.s ? a->tco.content.s : "", a->tco.content.len);
    strbuf_reset(&a->tco.content);
    return ok;
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
    if (ev->kind == TS_EVENT_PROMPT) { /* echo, prompt_logprobs: a prompt token's scores */
        reserve(j, 64 + 64 * (size_t)ev->n_top);
        if (j->oreq.prompt_logprobs && !plp_collect(j, ev))
            return false;
        return !j->oreq.echo || echo_collect(j, ev);
    }
    /* What the event costs in the JSON answer: text escaped, a logprob entry per token. */
    size_t cost = 2 * ev->text_len;
    if (ev->kind == TS_EVENT_TOKEN && j->oreq.sampling.logprobs)
        cost += 48 + 48 * (size_t)ev->n_top;
    reserve(j, cost);
    if (ev->kind == TS_EVENT_TOKEN) {
        j->tokens_seen++;
        job_note_token_time(j, a);
        if (j->oreq.sampling.logprobs) {
            if (!job_grow((void **)&a->lps, &a->cap_lps, a->n_lps + 1, sizeof *a->lps))
                return false;
            job_fill_logprob(j, ev, a->len, &a->lps[a->n_lps++]);
        }
        if (!append_answer(j, a, ev))
            return false;
    } else if (ev->kind == TS_EVENT_DONE) {
        if (!append_answer(j, a, ev))
            return false;
        job_record_done(j, ev);
    } else {
        job_record_error(j, ev);
    }
    return true;
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
    /* llama.cpp's /completion, like a chat, runs until the context is full by default */
    bool to_full = r->kind == OAI_CHAT || j->api == API_LLAMA;
    int max_tokens = r->max_tokens ? r->max_tokens : (to_full ? room : 16);
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
    p.max_tokens = r->score_only ? 0 : max_tokens;
    p.prompt_logprobs =
        (r->echo && (r->sampling.logprobs || r->score_only)) || r->prompt_logprobs;
    p.sampling = r->sampling;
    for (int i = 0; i < r->n_stop; i++)
        p.stop[i] = r->stop[i];
    p.n_stop = r->n_stop;
    p.priority = c->batch ? TS_PRIORITY_LOW : c->priority;
    p.n = r->n;
    p.ignore_eos = r->ignore_eos;
    p.no_speculation = !r->speculative;
    p.constraint = r->format == OAI_FORMAT_JSON_OBJECT   ? TS_CONSTRAINT_JSON_OBJECT
                   : r->format == OAI_FORMAT_JSON_SCHEMA ? TS_CONSTRAINT_JSON_SCHEMA
                   : r->format == OAI_FORMAT_GRAMMAR     ? TS_CONSTRAINT_GRAMMAR
                                                         : TS_CONSTRAINT_NONE;
    p.schema = r->schema;
    p.grammar = r->grammar;
    if (r->tools.schema) { /* a forced tool_choice: the call(s), nothing else */
        p.constraint = TS_CONSTRAINT_JSON_SCHEMA;
        p.schema = r->tools.schema;
    }
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
    oai_tool_call *calls[OAI_MAX_N] = {0};
    bool calls_ok = true;
    for (int i = 0; i < j->oreq.n; i++) {
        choice_acc *a = &j->acc[i];
        if (a->n_calls && (calls[i] = malloc(a->n_calls * sizeof *calls[i])))
            job_tools_view(a, calls[i]);
        calls_ok = calls_ok && (calls[i] || !a->n_calls);
        choices[i] = (oai_choice){a->text ? a->text : "", a->len, a->finish ? a->finish : "stop",
                                  j->oreq.sampling.logprobs ? (a->lps ? a->lps : &no_tokens) : NULL,
                                  a->n_lps, calls[i], calls[i] ? a->n_calls : 0};
        if (j->oreq.echo && !echo_choice(j, a, &choices[i]))
            calls_ok = false; /* out of memory, answered as such below */
    }
    oai_usage u = job_usage(j);
    api_answer an = {&j->meta,
                     choices[0].text,
                     choices[0].text_len,
                     choices[0].finish_reason,
                     choices[0].tool_calls,
                     choices[0].n_tool_calls,
                     u,
                     job_stop_sequence(j, &j->acc[0]),
                     choices[0].logprobs,
                     choices[0].n_logprobs,
                     &j->oreq,
                     j->prompt_text,
                     j->prompt_text_len};
    char *json = NULL;
    if (calls_ok)
        json = j->api != API_CHAT ? api_answer_json(j->api, &an)
                                  : oai_response_json(&j->meta, choices, (size_t)j->oreq.n, &u);
    for (int i = 0; i < j->oreq.n; i++)
        free(calls[i]);
    if (json && j->oreq.prompt_logprobs && j->api == API_CHAT)
        json = plp_attach(j, json);
    size_t len = json ? strlen(json) : 0;
    if (len > j->held) { /* the estimate was low: the total counts the real size */
        atomic_fetch_add(&j->srv->answer_bytes, len - j->held);
        j->held = len;
    }
    return srv_send(mc, c, 200, "application/json", json, len);
}

enum { PARSE_BYTES_PER_BYTE = 40 };

/* The id of an answer: chat's "chatcmpl-...", "cmpl-...", or the API's "resp_...",
 * "msg_...". */
static void answer_id(srv_job *j, oai_kind kind)
{
    ts_server *srv = j->srv;
    unsigned long long seq = atomic_fetch_add(&srv->next_id, 1);
    const char *prefix = j->api == API_RESPONSES  ? "resp_"
                         : j->api == API_MESSAGES ? "msg_"
                         : kind == OAI_CHAT       ? "chatcmpl-"
                                                  : "cmpl-";
    snprintf(j->id, sizeof j->id, "%s%llx%06llx", prefix, (unsigned long long)srv->started,
             seq & 0xffffffULL);
}

/* llama.cpp's answer repeats the prompt: the text as given, or its ids decoded. */
static bool keep_prompt_text(srv_job *j, const int32_t *ids, size_t n)
{
    const char *given = j->oreq.prompt;
    size_t len = given ? strlen(given) : ts_detokenize(j->tok, ids, n, NULL, 0);
    if (!(j->prompt_text = malloc(len + 1)))
        return false;
    if (given)
        memcpy(j->prompt_text, given, len);
    else
        ts_detokenize(j->tok, ids, n, j->prompt_text, len);
    j->prompt_text[len] = '\0';
    j->prompt_text_len = len;
    return true;
}

static enum MHD_Result complete(struct MHD_Connection *mc, srv_conn *c, oai_kind kind,
                                api_kind api)
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
    j->api = api;
    /* The body's JSON tree while it is read into the request: cJSON holds ~80 bytes a value
     * and a value can take 2 bytes of text ("[0,0,..."), so up to 40x the body, counted in
     * the server-wide budget during the parse and given back after it. */
    size_t parse_bytes = c->body.len * PARSE_BYTES_PER_BYTE;
    if (budget_reserve(&srv->answer_bytes, &c->held, parse_bytes, 0,
                       srv->opts.max_answers_total) != BUDGET_OK) {
        budget_busy_error(&e, srv->opts.max_answers_total);
        return srv_send_error(mc, c, &e);
    }
    ts_status parsed = api == API_CHAT
                           ? oai_parse_request(kind, c->body.s, c->body.len, &j->oreq, &e)
                           : api_parse_request(api, c->body.s, c->body.len, &j->oreq, &e);
    budget_give_back(&srv->answer_bytes, &c->held, parse_bytes);
    if (parsed != TS_OK)
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
    answer_id(j, kind);
    j->meta = (oai_meta){kind, j->id, (long long)time(NULL), j->model->name};

    if (job_tools_on(j))
        job_tools_start(j);
    int32_t *ids = NULL;
    size_t n = 0;
    ts_status st = prompt_tokens(&j->oreq, j->model, j->tok, &ids, &n, &e);
    if (st == TS_OK && j->oreq.echo && n > 0 && !echo_start(j, ids, n))
        st = oai_error_set(&e, 500, NULL, NULL, "out of memory");
    if (st == TS_OK && api == API_LLAMA && !keep_prompt_text(j, ids, n))
        st = oai_error_set(&e, 500, NULL, NULL, "out of memory");
    if (st == TS_OK)
        st = submit(j, c, ids, n, &e);
    if (st == TS_OK)
        j->prompt_tokens = (int)n; /* before DONE says it: a stream's first event tells it */
    free(ids);
    if (st != TS_OK) {
        api_error_rename(api, &e);
        return srv_send_error(mc, c, &e);
    }
    return j->oreq.stream ? stream_start(mc, c, j) : answer_whole(mc, c, j);
}

enum MHD_Result complete_chat(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_CHAT, API_CHAT);
}

enum MHD_Result complete_text(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_COMPLETION, API_CHAT);
}

enum MHD_Result complete_responses(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_CHAT, API_RESPONSES);
}

enum MHD_Result complete_messages(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_CHAT, API_MESSAGES);
}

enum MHD_Result complete_llama(struct MHD_Connection *mc, srv_conn *c)
{
    return complete(mc, c, OAI_COMPLETION, API_LLAMA);
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
            job_record_error(j, &ev);
        else if (ev.kind == TS_EVENT_DONE)
            job_record_done(j, &ev);
        else if (ev.kind == TS_EVENT_TOKEN)
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
        job_tools_free(&j->acc[i]);
    }
    free(j->out);
    api_stream_free(&j->api_out);
    echo_free(j);
    free(j->prompt_text);
    free(j->vlps);
    oai_request_clear(&j->oreq);
    free(j);
}
