/* sse.c: an incremental parser of server-sent events that accepts any split of the stream. */
#include <stdlib.h>
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
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof *p);
}

/* Room for need bytes plus a NUL in *buf, growing geometrically. */
static bool reserve(char **buf, size_t *cap, size_t need)
{
    if (need + 1 <= *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c < need + 1)
        c *= 2;
    char *b = realloc(*buf, c);
    if (!b)
        return false;
    *buf = b;
    *cap = c;
    return true;
}

/* One complete line (without its EOL): a data field appends, a blank line dispatches. */
static ts_status end_line(loadgen_sse *p, loadgen_sse_fn fn, void *ctx, ts_error *err)
{
    const char *l = p->line ? p->line : "";
    size_t n = p->line_len;
    p->line_len = 0;
    if (n == 0) {
        if (!p->has_data)
            return TS_OK;
        p->has_data = false;
        size_t len = p->data_len;
        p->data_len = 0;
        if (!reserve(&p->data, &p->data_cap, len))
            return ts_error_set(err, TS_ERR_NOMEM, "sse: out of memory");
        p->data[len] = '\0';
        return fn(ctx, p->data, len) ? TS_OK : TS_ERR_CANCELLED;
    }
    if (n < 4 || memcmp(l, "data", 4) || (n > 4 && l[4] != ':'))
        return TS_OK; /* a comment (':'), another field, or "dataX" */
    size_t v = n > 4 ? 5 : 4;
    if (v < n && l[v] == ' ')
        v++;
    size_t add = n - v + (p->has_data ? 1 : 0);
    if (p->data_len + add > p->max_event)
        return ts_error_set(err, TS_ERR_TOO_LONG, "sse: event over %zu bytes", p->max_event);
    if (!reserve(&p->data, &p->data_cap, p->data_len + add))
        return ts_error_set(err, TS_ERR_NOMEM, "sse: out of memory");
    if (p->has_data)
        p->data[p->data_len++] = '\n';
    memcpy(p->data + p->data_len, l + v, n - v);
    p->data_len += n - v;
    p->has_data = true;
    return TS_OK;
}

ts_status loadgen_sse_feed(loadgen_sse *p, const char *buf, size_t len, loadgen_sse_fn fn,
                           void *ctx, ts_error *err)
{
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (c == '\n' && p->after_cr) {
            p->after_cr = false;
            continue;
        }
        p->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            ts_status st = end_line(p, fn, ctx, err);
            if (st != TS_OK)
                return st;
            continue;
        }
        /* Copy the run of ordinary bytes at once. */
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        size_t run = j - i;
        if (p->line_len + run > p->max_event)
            return ts_error_set(err, TS_ERR_TOO_LONG, "sse: line over %zu bytes", p->max_event);
        if (!reserve(&p->line, &p->line_cap, p->line_len + run))
            return ts_error_set(err, TS_ERR_NOMEM, "sse: out of memory");
        memcpy(p->line + p->line_len, buf + i, run);
        p->line_len += run;
        i = j - 1;
    }
    return TS_OK;
}
