/* utf8.c: a strict UTF-8 decoder step, and validation and repair built on it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/utf8.h"

/* Length of the well-formed sequence at s[0..n), or 0 when it is ill-formed. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = seq_len(p + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

char *utf8_sanitize(const char *s, size_t n)
{
    /* Each bad byte becomes 3 bytes at most. */
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = seq_len(p + i, n - i);
        if (k) {
            memcpy(out + o, p + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

void utf8_escape_controls(char *out, size_t cap, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = seq_len(p + i, n - i);
        bool esc = !k || p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\';
        if (esc)
            k = 1;
        if (o + (esc ? 4 : k) >= cap)
            break;
        if (esc) {
            static const char hex[] = "0123456789abcdef";
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 15];
        } else {
            memcpy(out + o, p + i, k);
            o += k;
        }
        i += k;
    }
    out[o] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t utf8_unescape_url(char *s)
{
    size_t o = 0;
    for (size_t i = 0; s[i];) {
        int hi, lo;
        if (s[i] == '%' && (hi = hex_value(s[i + 1])) >= 0 && (lo = hex_value(s[i + 2])) >= 0 &&
            (hi | lo) != 0) {
            s[o++] = (char)(hi << 4 | lo);
            i += 3;
        } else {
            s[o++] = s[i++];
        }
    }
    s[o] = '\0';
    return o;
}
