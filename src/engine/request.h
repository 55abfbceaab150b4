/* request.h: the request handle shared by the caller's threads and the engine thread:
 * its copied parameters, its event queue and its two-owner lifetime. */
#ifndef TESSERA_ENGINE_REQUEST_H
#define TESSERA_ENGINE_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "tessera/engine.h"

typedef struct event_node {
    ts_event ev;
    struct event_node *next;
} event_node;

struct ts_request {
    uint64_t id;                      /* submission order, unique per engine */

    /* Immutable after submit. */
    int32_t *prompt;                  /* (n_prompt) */
    int n_prompt;
    int max_tokens;
    int n;
    bool ignore_eos;
    bool prompt_logprobs;             /* ts_request_params.prompt_logprobs */
    bool embed;                       /* prefill only, pooled (ts_request_params.embed) */
    bool no_speculation;
    ts_constraint_kind constraint;
    ts_schema *schema;                /* a reference of its own (JSON_SCHEMA), or NULL */
    ts_grammar *grammar;              /* a reference of its own (GRAMMAR), or NULL */
    uint64_t cache_ns;                /* ts_request_params.cache_namespace */
    ts_priority priority;
    ts_sampling_params sampling;
    char *stop[TS_MAX_STOP];
    int n_stop;
    void (*notify)(void *user);
    void *notify_user;
    size_t max_unread;                /* 0 = unbounded (ts_request_params.max_unread_bytes) */
    double submit_time;               /* seconds, monotonic clock */

    atomic_bool cancel_requested;     /* set by any thread, read by the engine */

    /* Guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    event_node *head, *tail;          /* events not read yet, oldest first */
    size_t queued_bytes;              /* text bytes waiting in the queue */
    size_t queued_events;             /* events waiting in the queue */
    bool closed;                      /* the engine pushes no more events */
    int owners;                       /* 2 at submit: the caller and the engine */
};

/* Makes a request from params (copied); owners = 2. */
ts_status request_create(const ts_request_params *params, uint64_t id, double now,
                         ts_request **out, ts_error *err);

/* Appends ev (moved: the queue takes its text) and wakes readers and notify. */
ts_status request_push(ts_request *req, ts_event *ev);

/* Pushes a TOKEN event for completion index with a copy of len bytes of text. */
/* Queues a PROMPT event: prompt token `token`'s log-probability, its rank and n_top
 * alternatives. */
ts_status request_push_prompt(ts_request *req, int32_t token, float logprob, int rank,
                              const ts_logprob *top, int n_top);
ts_status request_push_token(ts_request *req, int index, const char *text, size_t len,
                             int32_t token, const float *logprob, const ts_logprob *top,
                             int n_top);

/* Bytes the unread events hold: their text plus TS_EVENT_OVERHEAD each. */
size_t request_unread_bytes(ts_request *req);

/* Marks the event stream finished (no more events after the ones queued). */
void request_close(ts_request *req);

/* Drops one owner; frees the request when none is left. */
void request_unref(ts_request *req);

#endif /* TESSERA_ENGINE_REQUEST_H */
