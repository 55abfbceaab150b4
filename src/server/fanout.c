/* fanout.c: one answer from many engine requests, submitted through a moving window and
 * read back in order (fanout.h). */
#include <stdatomic.h>
#include <stdlib.h>

#include "server/fanout.h"

ts_status srv_fanout_init(srv_fanout *f, size_t n, oai_error *e)
{
    f->n = n;
    f->ids = calloc(n, sizeof *f->ids);
    f->n_ids = calloc(n, sizeof *f->n_ids);
    f->reqs = calloc(n, sizeof *f->reqs);
    if (!f->ids || !f->n_ids || !f->reqs)
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    return TS_OK;
}

void srv_fanout_free(srv_fanout *f)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->ids)
            free(f->ids[i]);
        if (f->reqs)
            ts_request_release(f->reqs[i]);
    }
    free(f->ids);
    free(f->n_ids);
    free(f->reqs);
}

/* Submits item i: the engine's status. */
static ts_status submit_one(srv_fanout *f, srv_conn *c, ts_engine *engine,
                            const srv_fanout_ops *ops, size_t i, ts_error *err)
{
    ts_request_params p;
    ops->params(ops->ctx, i, f->ids[i], f->n_ids[i], &p);
    p.priority = c->batch ? TS_PRIORITY_LOW : c->priority;
    p.cache_namespace = c->cache_ns;
    return ts_engine_submit(engine, &p, &f->reqs[i], err);
}

/* Reads item i's events to its end and releases its request. Cancels every item of the
 * answer once the server stops. */
static ts_status gather_one(srv_fanout *f, srv_conn *c, const srv_fanout_ops *ops, size_t i,
                            oai_error *e)
{
    ts_event ev = {0};
    ts_status st, out = TS_OK;
    bool got = false;
    while ((st = ts_request_next_event(f->reqs[i], &ev, FANOUT_POLL_MS)) != TS_ERR_NOT_FOUND) {
        if (st == TS_ERR_TIMEOUT) {
            if (atomic_load(&c->srv->stopping))
                for (size_t k = 0; k < f->n; k++)
                    ts_request_cancel(f->reqs[k]);
            continue;
        }
        if (ev.kind == TS_EVENT_ERROR) {
            if (out == TS_OK)
                out = srv_status_error(e, ev.status, ev.message);
        } else {
            ts_status took = ops->take(ops->ctx, i, &ev, &got, out == TS_OK ? e : NULL);
            if (out == TS_OK)
                out = took;
        }
        ts_event_clear(&ev);
    }
    ts_request_release(f->reqs[i]);
    f->reqs[i] = NULL;
    if (out == TS_OK && !got)
        out = oai_error_set(e, 503, NULL, "server_shutting_down",
                            "the server is shutting down");
    return out;
}

ts_status srv_fanout_run(srv_fanout *f, srv_conn *c, ts_engine *engine,
                         const srv_fanout_ops *ops, oai_error *e)
{
    size_t read = 0;
    ts_status st = TS_OK;
    for (size_t i = 0; st == TS_OK && i < f->n; i++) {
        if (i - read == FANOUT_WINDOW)
            st = gather_one(f, c, ops, read++, e);
        while (st == TS_OK) {
            ts_error err = {0};
            ts_status sub = submit_one(f, c, engine, ops, i, &err);
            if (sub == TS_OK)
                break;
            if (sub != TS_ERR_QUEUE_FULL || read == i)
                st = srv_status_error(e, sub, err.msg);
            else
                st = gather_one(f, c, ops, read++, e);
        }
    }
    while (st == TS_OK && read < f->n)
        st = gather_one(f, c, ops, read++, e);
    return st;
}
