/* stop.c: the stop-string matcher: earliest match across chunks, hold back prefixes. */
#include <string.h>

#include "engine/detok.h"
#include "engine/stop.h"

ts_status stop_init(stop_matcher *m, const char *const *strs, int n, ts_error *err)
{
    memset(m, 0, sizeof *m);
    m->which = -1;
    if (n < 0 || n > STOP_MAX_STRINGS)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "stop: %d strings, at most %d allowed", n,
                            STOP_MAX_STRINGS);
    if (n > 0 && !strs)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "stop: NULL string list");
    for (int i = 0; i < n; i++) {
        if (!strs[i])
            return ts_error_set(err, TS_ERR_INVALID_ARG, "stop[%d] is NULL", i);
        size_t len = strlen(strs[i]);
        if (len == 0)
            continue;
        if (len > STOP_MAX_LEN)
            return ts_error_set(err, TS_ERR_TOO_LONG, "stop[%d] is %zu bytes, at most %d allowed",
                                i, len, STOP_MAX_LEN);
        if (!detok_utf8_valid(strs[i], len))
            return ts_error_set(err, TS_ERR_INVALID_ARG, "stop[%d] is not valid UTF-8", i);
        memcpy(m->str[m->n], strs[i], len);
        m->len[m->n] = len;
        m->max_len = len > m->max_len ? len : m->max_len;
        m->n++;
    }
    return TS_OK;
}

/* Length of the longest suffix of buf (n) that is a proper prefix of a stop string. */
static size_t held_suffix(const stop_matcher *m, const char *buf, size_t n)
{
    size_t longest = m->max_len - 1 < n ? m->max_len - 1 : n;
    for (size_t k = longest; k > 0; k--)
        for (int s = 0; s < m->n; s++)
            if (k < m->len[s] && memcmp(buf + n - k, m->str[s], k) == 0)
                return k;
    return 0;
}

ts_status stop_push(stop_matcher *m, char *out, size_t cap, size_t *n_out, const char *text,
                    size_t len, ts_error *err)
{
    *n_out = 0;
    if (cap < STOP_MAX_OUT(len))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "stop: output buffer of %zu bytes, %zu bytes of input need %zu",
                            cap, len, STOP_MAX_OUT(len));
    if (len > 0 && !text)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "stop: NULL text");
    if (m->stopped)
        return TS_OK;
    if (m->n == 0) {
        memcpy(out, text, len);
        *n_out = len;
        return TS_OK;
    }
    /* out is the work buffer: held text, then the new chunk */
    size_t n = m->n_held + len;
    memcpy(out, m->held, m->n_held);
    if (len > 0)
        memcpy(out + m->n_held, text, len);

    size_t first = n;
    for (int s = 0; s < m->n; s++) {
        const char *hit = memmem(out, n, m->str[s], m->len[s]);
        if (hit && (size_t)(hit - out) < first) {
            first = (size_t)(hit - out);
            m->which = s;
        }
    }
    if (first < n) {
        m->stopped = true;
        m->n_held = 0;
        *n_out = first;
        return TS_OK;
    }
    size_t k = held_suffix(m, out, n);
    memcpy(m->held, out + n - k, k);
    m->n_held = k;
    *n_out = n - k;
    return TS_OK;
}

ts_status stop_flush(stop_matcher *m, char *out, size_t cap, size_t *n_out, ts_error *err)
{
    *n_out = 0;
    if (cap < STOP_MAX_LEN)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "stop: flush needs %d bytes of output, got %zu", STOP_MAX_LEN, cap);
    if (m->stopped)
        return TS_OK;
    memcpy(out, m->held, m->n_held);
    *n_out = m->n_held;
    m->n_held = 0;
    return TS_OK;
}
