/* sse.c: an incremental parser of server-sent events that accepts any split of the stream. */
#include <string.h>

#include "loadgen/loadgen.h"

void loadgen_sse_init(loadgen_sse *p, size_t max_event)
{
    memset(p, 0, sizeof *p);
    p->max_event = max_event;
}

void loadgen_sse_free(loadgen_sse *p)
{
    if (!p)
        return;
    strbuf_free(&p->line);
    strbuf_free(&p->data);
    memset(p, 0, sizeof *p);
}

/* One complete line (without its EOL): a data field appends, a blank line dispatches. */
static ts_status end_line(loadgen_sse *p, loadgen_sse_fn fn, void *ctx, ts_error *err)
{
    const char *l = p->line.s ? p->line.s : "";
    size_t n = p->line.len;
    if (n == 0) {
        if (!p->has_data)
            return TS_OK;
        p->has_data = false;
        /* any data field, even an empty one, has allocated data.s */
        return fn(ctx, p->data.s, p->data.len) ? TS_OK : TS_ERR_CANCELLED;
    }
    if (n < 4 || memcmp(l, "data", 4) || (n > 4 && l[4] != ':')) {
        if (l[0] != ':')
            p->other_fields++; /* "event:", "id:", "retry:", "dataX", ... */
        return TS_OK;
    }
    size_t v = n > 4 ? 5 : 4;
    if (v < n && l[v] == ' ')
        v++;
    /* the dispatched event's bytes stay readable until the next event's first field */
    if (!p->has_data)
        strbuf_reset(&p->data);
    size_t add = n - v + (p->has_data ? 1 : 0);
    if (p->data.len + add > p->max_event)
        return ts_error_set(err, TS_ERR_TOO_LONG, "sse: event over %zu bytes", p->max_event);
    if ((p->has_data && !strbuf_add(&p->data, "\n", 1)) || !strbuf_add(&p->data, l + v, n - v))
        return ts_error_set(err, TS_ERR_NOMEM, "sse: out of memory");
    p->has_data = true;
    return TS_OK;
}

ts_status loadgen_sse_feed(loadgen_sse *p, const char *buf, size_t len, loadgen_sse_fn fn,
                           void *ctx, ts_error *err)
{
    static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
    size_t start = 0;
    /* A leading BOM may arrive split; bytes that turn out not to be one are the line's. */
    while (p->bom >= 0 && start < len) {
        if (buf[start] != bom[p->bom]) {
            int held = p->bom;
            p->bom = -1;
            if (held && !strbuf_add(&p->line, bom, (size_t)held))
                return ts_error_set(err, TS_ERR_NOMEM, "sse: out of memory");
            break;
        }
        start++;
        if (++p->bom == 3)
            p->bom = -1;
    }
    for (size_t i = start; i < len; i++) {
        char c = buf[i];
        if (c == '\n' && p->after_cr) {
            p->after_cr = false;
            continue;
        }
        p->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            ts_status st = end_line(p, fn, ctx, err);
            strbuf_reset(&p->line);
            if (st != TS_OK)
                return st;
            continue;
        }
        /* Copy the run of ordinary bytes at once. */
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        size_t run = j - i;
        if (p->line.len + run > p->max_event)
            return ts_error_set(err, TS_ERR_TOO_LONG, "sse: line over %zu bytes", p->max_event);
        if (!strbuf_add(&p->line, buf + i, run))
            return ts_error_set(err, TS_ERR_NOMEM, "sse: out of memory");
        i = j - 1;
    }
    return TS_OK;
}

ts_status loadgen_sse_finish(loadgen_sse *p, bool *pending, loadgen_sse_fn fn, void *ctx,
                             ts_error *err)
{
    *pending = p->line.len > 0 || p->has_data;
    ts_status st = TS_OK;
    if (p->line.len > 0) {
        st = end_line(p, fn, ctx, err);
        strbuf_reset(&p->line);
    }
    if (st == TS_OK)
        st = end_line(p, fn, ctx, err); /* the blank line that never came */
    return st;
}
