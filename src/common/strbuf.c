/* strbuf.c: the growable byte buffer of strbuf.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"

/* Room for n more bytes and the NUL. */
static bool reserve(strbuf *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->s && n < b->cap - b->len)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= n) {
        if (cap > (size_t)-1 / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->s, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->s = p;
    b->cap = cap;
    return true;
}

bool strbuf_add(strbuf *b, const void *data, size_t n)
{
    if (!reserve(b, n))
        return false;
    if (n)
        memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

bool strbuf_addf(strbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return false;
    /* format into the room left; only when it does not fit, grow and format again */
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    size_t room = b->s ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->s + b->len : NULL, room, fmt, ap);
    va_end(ap);
    bool ok = n >= 0;
    if (ok && (size_t)n >= room) {
        ok = reserve(b, (size_t)n);
        if (ok)
            vsnprintf(b->s + b->len, b->cap - b->len, fmt, again);
    } else if (!ok) {
        b->failed = true;
    }
    va_end(again);
    if (ok)
        b->len += (size_t)n;
    return ok;
}

void strbuf_reset(strbuf *b)
{
    b->len = 0;
    if (b->s)
        b->s[0] = '\0';
}

void strbuf_free(strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
