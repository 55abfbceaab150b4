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
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return false;
    }
    if (!reserve(b, (size_t)n))
        return false;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

void strbuf_free(strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
