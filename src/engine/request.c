/* request.c: request handles, their event queues and their shared lifetime. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "engine/request.h"

static void request_free(ts_request *req)
{
    for (event_node *n = req->head, *next; n; n = next) {
        next = n->next;
        ts_event_clear(&n->ev);
        free(n);
    }
    for (int i = 0; i < TS_MAX_STOP; i++)
        free(req->stop[i]);
    free(req->prompt);
    ts_schema_release(req->schema);
    ts_grammar_release(req->grammar);
    pthread_mutex_destroy(&req->mu);
    pthread_cond_destroy(&req->cv);
    free(req);
}

ts_status request_create(const ts_request_params *p, uint64_t id, double now,
                         ts_request **out, ts_error *err)
{
    *out = NULL;
    ts_request *req = calloc(1, sizeof *req);
    if (!req)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a request");
    pthread_mutex_init(&req->mu, NULL);
    clock_cond_init(&req->cv);

    req->id = id;
    req->n_prompt = (int)p->n_prompt;
    req->max_tokens = p->max_tokens;
    req->n = p->n;
    req->ignore_eos = p->ignore_eos;
    req->prompt_logprobs = p->prompt_logprobs;
    req->no_speculation = p->no_speculation;
    req->constraint = p->constraint;
    if (p->constraint == TS_CONSTRAINT_JSON_SCHEMA)
        req->schema = ts_schema_retain(p->schema);
    if (p->constraint == TS_CONSTRAINT_GRAMMAR)
        req->grammar = ts_grammar_retain(p->grammar);
    req->cache_ns = p->cache_namespace;
    req->priority = p->priority;
    req->sampling = p->sampling;
    req->notify = p->notify;
    req->notify_user = p->notify_user;
    req->max_unread = p->max_unread_bytes;
    req->submit_time = now;
    req->owners = 2;
    if ((req->embed = p->embed)) { /* nothing is generated: no completion parameters */
        req->max_tokens = 0;
        req->n = 1;
        req->constraint = TS_CONSTRAINT_NONE;
        ts_schema_release(req->schema);
        req->schema = NULL;
    }
    atomic_init(&req->cancel_requested, false);

    req->prompt = malloc(p->n_prompt * sizeof(int32_t));
    if (!req->prompt)
        goto nomem;
    memcpy(req->prompt, p->prompt, p->n_prompt * sizeof(int32_t));
    for (int i = 0; !req->embed && i < p->n_stop; i++) {
        if (!(req->stop[i] = strdup(p->stop[i])))
            goto nomem;
        req->n_stop = i + 1;
    }
    *out = req;
    return TS_OK;

nomem:
    request_free(req);
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory copying a request");
}

ts_status request_push(ts_request *req, ts_event *ev)
{
    event_node *node = malloc(sizeof *node);
    if (!node) {
        ts_event_clear(ev);
        return TS_ERR_NOMEM;
    }
    node->ev = *ev;
    node->next = NULL;
    memset(ev, 0, sizeof *ev);

    pthread_mutex_lock(&req->mu);
    if (req->tail)
        req->tail->next = node;
    else
        req->head = node;
    req->tail = node;
    req->queued_bytes += node->ev.text_len;
    req->queued_events++;
    pthread_mutex_unlock(&req->mu);
    /* After the unlock: a reader woken under the lock would block on it at once and need
     * a second wake-up from the unlock, both on the step thread. A reader that checked
     * the queue before the push waits on cv already; one that checks after sees it. */
    pthread_cond_broadcast(&req->cv);
    if (req->notify)
        req->notify(req->notify_user);
    return TS_OK;
}

ts_status request_push_token(ts_request *req, int index, const char *text, size_t len,
                             int32_t token, const float *logprob, const ts_logprob *top,
                             int n_top)
{
    ts_event ev = {.kind = TS_EVENT_TOKEN, .index = index, .token = token};
    ev.text = malloc(len + 1);
    if (!ev.text)
        return TS_ERR_NOMEM;
    memcpy(ev.text, text, len);
    ev.text[len] = '\0';
    ev.text_len = len;
    if (logprob)
        ev.logprob = *logprob;
    ev.n_top = n_top;
    if (n_top > 0)
        memcpy(ev.top, top, (size_t)n_top * sizeof *top);
    return request_push(req, &ev);
}

ts_status request_push_prompt(ts_request *req, int32_t token, float logprob, int rank,
                              const ts_logprob *top, int n_top)
{
    ts_event ev = {.kind = TS_EVENT_PROMPT, .token = token, .logprob = logprob, .rank = rank};
    if (!(ev.text = calloc(1, 1)))
        return TS_ERR_NOMEM;
    ev.n_top = n_top;
    if (n_top > 0)
        memcpy(ev.top, top, (size_t)n_top * sizeof *top);
    return request_push(req, &ev);
}

size_t request_unread_bytes(ts_request *req)
{
    pthread_mutex_lock(&req->mu);
    size_t n = req->queued_bytes + req->queued_events * (size_t)TS_EVENT_OVERHEAD;
    pthread_mutex_unlock(&req->mu);
    return n;
}

void request_close(ts_request *req)
{
    pthread_mutex_lock(&req->mu);
    req->closed = true;
    pthread_cond_broadcast(&req->cv);
    pthread_mutex_unlock(&req->mu);
    if (req->notify)
        req->notify(req->notify_user);
}

void request_unref(ts_request *req)
{
    pthread_mutex_lock(&req->mu);
    int left = --req->owners;
    pthread_mutex_unlock(&req->mu);
    if (left == 0)
        request_free(req);
}

void ts_event_clear(ts_event *ev)
{
    if (!ev)
        return;
    free(ev->text);
    free(ev->embedding);
    memset(ev, 0, sizeof *ev);
}

ts_status ts_request_next_event(ts_request *req, ts_event *ev, int timeout_ms)
{
    struct timespec deadline = {0}; /* read only when timeout_ms > 0 */
    if (timeout_ms > 0)
        deadline = clock_deadline(timeout_ms);
    ts_status st = TS_OK;
    pthread_mutex_lock(&req->mu);
    while (!req->head && !req->closed) {
        if (timeout_ms == 0) {
            st = TS_ERR_TIMEOUT;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&req->cv, &req->mu);
        } else if (pthread_cond_timedwait(&req->cv, &req->mu, &deadline) == ETIMEDOUT) {
            st = req->head || req->closed ? TS_OK : TS_ERR_TIMEOUT;
            break;
        }
    }
    event_node *node = st == TS_OK ? req->head : NULL;
    if (node) {
        req->head = node->next;
        if (!req->head)
            req->tail = NULL;
        req->queued_bytes -= node->ev.text_len;
        req->queued_events--;
    } else if (st == TS_OK) {
        st = TS_ERR_NOT_FOUND; /* closed and drained */
    }
    pthread_mutex_unlock(&req->mu);
    if (node) {
        *ev = node->ev;
        free(node);
    }
    return st;
}

void ts_request_cancel(ts_request *req)
{
    if (req)
        atomic_store(&req->cancel_requested, true);
    /* The engine reads the flag at every step boundary. It never sleeps while it holds
     * an unfinished request (it sleeps only with nothing queued and nothing running), so
     * no wake-up is needed and the handle never has to reach the engine. */
}

void ts_request_release(ts_request *req)
{
    if (!req)
        return;
    atomic_store(&req->cancel_requested, true);
    request_unref(req);
}
