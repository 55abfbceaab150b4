/* fanout.h: one answer from many engine requests (an embedding per input, a score per
 * document): each item's prompt submitted as its own request, at most FANOUT_WINDOW of
 * them in the engine at once, their events read back in order. */
#ifndef TESSERA_SERVER_FANOUT_H
#define TESSERA_SERVER_FANOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/openai.h"
#include "server/server_internal.h"
#include "tessera/engine.h"

/* How long one wait for an item's event lasts before it looks at the server's stopping
 * flag; the most items of one answer in the engine at once. */
enum { FANOUT_POLL_MS = 100, FANOUT_WINDOW = 256 };

/* What an answer asks of each item. */
typedef struct srv_fanout_ops {
    /* Fills p (defaults and all) for item i's prompt (ids, n_ids); the fan-out then sets
     * the connection's priority and cache namespace. */
    void (*params)(void *ctx, size_t i, const int32_t *ids, size_t n_ids,
                   ts_request_params *p);
    /* Takes one of item i's events (never an error event: the fan-out answers those);
     * sets *got once the item has its result. A status other than TS_OK fails the
     * answer; e (NULL where the answer has failed already) then says why. */
    ts_status (*take)(void *ctx, size_t i, const ts_event *ev, bool *got, oai_error *e);
    void *ctx;
} srv_fanout_ops;

/* The items' prompts and requests. */
typedef struct srv_fanout {
    size_t n;          /* items */
    int32_t **ids;     /* (n) each item's prompt (owned), filled by the caller */
    size_t *n_ids;     /* (n) */
    ts_request **reqs; /* (n) submitted, NULL where none */
} srv_fanout;

/* Room for n items, every prompt NULL; a 500 in e when memory runs out (f stays
 * freeable). */
ts_status srv_fanout_init(srv_fanout *f, size_t n, oai_error *e);
/* Frees the prompts and releases the requests (not f). Accepts a zeroed or half-built f. */
void srv_fanout_free(srv_fanout *f);

/* Submits the items in order to engine (borrowed), with at most FANOUT_WINDOW of them in
 * the engine at once, and reads each one's events through ops->take as the window moves
 * on: an answer of many items neither fills the engine's queue against other clients nor
 * is refused by it. A full queue (the others') waits for one of the answer's own items to
 * finish; with none of its own queued it is the answer (429). Once the server stops,
 * every item is cancelled, and an item with no result is a 503. */
ts_status srv_fanout_run(srv_fanout *f, srv_conn *c, ts_engine *engine,
                         const srv_fanout_ops *ops, oai_error *e);

#endif /* TESSERA_SERVER_FANOUT_H */
