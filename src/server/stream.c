/* stream.c: a completion's answer as a Server-Sent-Event stream: the engine's events,
 * read as MHD asks for more bytes, become "data: JSON" chunks, then "data: [DONE]". */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/job.h"

enum {
    STREAM_SNDBUF = 64 * 1024, /* kernel send buffer of a stream (Linux doubles it) */
};

/* Appends to the bytes MHD has yet to read; out of memory fails the stream. */
static void out_put(srv_job *j, const char *s, size_t n)
{
    if (j->out_failed || !job_grow((void **)&j->out, &j->out_cap, j->out_len + n, 1)) {
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

/* Appends the events an api_stream_* call wrote into b (ok: it did not run out of
 * memory), and empties b. */
static void out_api(srv_job *j, strbuf *b, bool ok)
{
    if (!ok || b->failed)
        j->out_failed = true;
    else if (b->len)
        out_put(j, b->s, b->len);
    strbuf_free(b);
}

/* A Responses or Messages stream's events for a TOKEN or DONE event: its text, the calls
 * from the first-th on, and at DONE the closing events. */
static void stream_api_event(srv_job *j, const ts_event *ev, const char *text, size_t len,
                             long first)
{
    choice_acc *a = &j->acc[ev->index];
    strbuf b = {0};
    bool ok = api_stream_text(&j->api_out, text, len, &b);
    for (size_t k = (size_t)first; ok && k < a->n_calls; k++) {
        oai_tool_call call;
        job_tools_view_one(a, k, &call);
        ok = api_stream_call(&j->api_out, &call, &b);
    }
    a->text_off += len;
    if (ok && ev->kind == TS_EVENT_DONE) {
        job_record_done(j, ev);
        oai_tool_call *calls = a->n_calls ? malloc(a->n_calls * sizeof *calls) : NULL;
        if (calls)
            job_tools_view(a, calls);
        api_answer an = {&j->meta, NULL, 0, a->finish, calls, calls ? a->n_calls : 0,
                         job_usage(j), job_stop_sequence(j, a), NULL, 0,
                         &j->oreq, j->prompt_text, j->prompt_text_len};
        ok = (calls || !a->n_calls) && api_stream_end(&j->api_out, &an, &b);
        free(calls);
    }
    out_api(j, &b, ok);
}

/* The calls of choice `index` from its first-th on, each as two chunks: its id, type and
 * name, then its arguments. */
static void stream_calls(srv_job *j, int index, long first)
{
    const choice_acc *a = &j->acc[index];
    for (size_t k = (size_t)first; k < a->n_calls; k++) {
        oai_tool_call call;
        job_tools_view_one(a, k, &call);
        out_event(j, oai_tool_chunk_json(&j->meta, index, (int)k, &call, true));
        out_event(j, oai_tool_chunk_json(&j->meta, index, (int)k, &call, false));
    }
}

/* The text an event adds to choice a's content: its own, or what the tool-call parser
 * releases (*first: the first call it completed, a->n_calls when none). NULL when out
 * of memory. */
static const char *event_text(srv_job *j, choice_acc *a, const ts_event *ev, size_t *len,
                              long *first)
{
    *first = (long)a->n_calls;
    *len = ev->text_len;
    if (!job_tools_on(j))
        return ev->text;
    strbuf_reset(&a->tco.content);
    if ((*first = job_tools_event(j, ev)) < 0)
        return NULL;
    *len = a->tco.content.len;
    return a->tco.content.s ? a->tco.content.s : "";
}

/* echo: the prompt's text in the first chunk (with logprobs, its first token's null
 * entry); the completion's offsets count it. */
static void stream_echo_head(srv_job *j)
{
    oai_token_logprob lp;
    echo_first(j, &lp);
    out_event(j, oai_chunk_json(&j->meta, 0, false, j->echo_text, j->echo_len, NULL,
                                j->oreq.sampling.logprobs ? &lp : NULL));
    j->acc[0].text_off = j->echo_len;
}

/* echo with logprobs: a PROMPT event as a chunk of no text carrying the token's entry. */
static void stream_prompt(srv_job *j, const ts_event *ev)
{
    if (!echo_collect(j, ev)) {
        j->out_failed = true;
        return;
    }
    if (!j->oreq.sampling.logprobs)
        return;
    oai_token_logprob lp = echo_prompt_logprob(j, j->n_plps - 1);
    out_event(j, oai_chunk_json(&j->meta, 0, false, "", 0, NULL, &lp));
}

/* One engine event as its chunks (an ERROR as an error event). */
static void stream_event(srv_job *j, const ts_event *ev)
{
    if (ev->kind == TS_EVENT_ERROR) {
        job_record_error(j, ev);
        oai_error e;
        srv_status_error(&e, j->fail_status, j->fail_msg);
        if (j->api != API_CHAT) {
            strbuf b = {0};
            out_api(j, &b, api_stream_error(&j->api_out, &e, &b));
        } else {
            out_event(j, oai_error_json(&e));
        }
        return;
    }
    if (ev->index < 0 || ev->index >= j->oreq.n)
        return;
    if (ev->kind == TS_EVENT_PROMPT) {
        stream_prompt(j, ev);
        return;
    }
    choice_acc *a = &j->acc[ev->index];
    size_t len;
    long first;
    const char *text = event_text(j, a, ev, &len, &first);
    if (!text) {
        j->out_failed = true;
        return;
    }
    if (ev->kind == TS_EVENT_TOKEN) {
        j->tokens_seen++;
        job_note_token_time(j, a);
    }
    if (j->api != API_CHAT) {
        stream_api_event(j, ev, text, len, first);
        return;
    }
    if (ev->kind == TS_EVENT_DONE) {
        /* Text held back to the end comes in a chunk of its own before the finish chunk;
         * no token goes with it, so its logprobs are null. */
        if (len > 0) {
            out_event(j, oai_chunk_json(&j->meta, ev->index, false, text, len, NULL, NULL));
            a->text_off += len;
        }
        stream_calls(j, ev->index, first);
        job_record_done(j, ev);
        out_event(j, oai_chunk_json(&j->meta, ev->index, false, NULL, 0, a->finish, NULL));
        return;
    }
    /* Nothing to send for text held back (a partial character, a possible stop string or
     * tool call) unless logprobs were asked for. */
    if (len > 0 || j->oreq.sampling.logprobs) {
        oai_token_logprob lp;
        if (j->oreq.sampling.logprobs)
            job_fill_logprob(j, ev, a->text_off, &lp);
        out_event(j, oai_chunk_json(&j->meta, ev->index, false, text, len, NULL,
                                    j->oreq.sampling.logprobs ? &lp : NULL));
        a->text_off += len;
    }
    stream_calls(j, ev->index, first);
}

/* No more events: the usage chunk when asked for, then [DONE]. */
static void stream_finish(srv_job *j)
{
    if (j->api != API_CHAT) { /* their last event (or an error) is already out */
        j->stream_ended = true;
        return;
    }
    if (j->oreq.include_usage) {
        oai_usage u = job_usage(j);
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

enum MHD_Result stream_start(struct MHD_Connection *mc, srv_conn *c, srv_job *j)
{
    /* Bounded buffering: a fixed kernel send buffer (no autotuning to megabytes) so that a
     * slow reader backs up into the engine's queue, where max_buffered cancels it. */
    int sndbuf = STREAM_SNDBUF;
    if (j->client_fd >= 0)
        setsockopt(j->client_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (j->api != API_CHAT) {
        api_stream_init(&j->api_out, j->api, &j->meta);
        j->api_out.prompt_tokens = j->prompt_tokens;
        strbuf b = {0};
        out_api(j, &b, api_stream_begin(&j->api_out, &b));
    } else if (j->oreq.kind == OAI_CHAT)
        for (int i = 0; i < j->oreq.n; i++)
            out_event(j, oai_chunk_json(&j->meta, i, true, "", 0, NULL, NULL));
    if (j->oreq.echo)
        stream_echo_head(j);
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
