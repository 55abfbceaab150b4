/* detok.c: the incremental UTF-8 assembler behind streamed output. */
#include <string.h>

#include "engine/detok.h"

static const char REPLACEMENT[3] = { (char)0xEF, (char)0xBF, (char)0xBD }; /* U+FFFD */

/* Length of the character a lead byte starts (2..4), 1 for ASCII, 0 if b cannot start
 * one (continuation bytes, C0, C1, F5..FF). */
static int lead_length(uint8_t b)
{
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF)
        return 3;
    if (b >= 0xF0 && b <= 0xF4)
        return 4;
    return 0;
}

/* Whether b may follow the bytes tail[0..n) of a character. The second byte's range
 * depends on the lead (Unicode Table 3-7): this is what rules out overlongs, surrogates
 * and code points above U+10FFFF. */
static bool continues(const uint8_t *tail, int n, uint8_t b)
{
    if (n == 1) {
        switch (tail[0]) {
        case 0xE0: return b >= 0xA0 && b <= 0xBF;
        case 0xED: return b >= 0x80 && b <= 0x9F;
        case 0xF0: return b >= 0x90 && b <= 0xBF;
        case 0xF4: return b >= 0x80 && b <= 0x8F;
        default: break;
        }
    }
    return b >= 0x80 && b <= 0xBF;
}

void detok_init(detok *d, bool strip_leading_space)
{
    memset(d, 0, sizeof *d);
    d->strip_leading_space = strip_leading_space;
}

ts_status detok_push(detok *d, char *out, size_t cap, size_t *n_out, const void *bytes,
                     size_t len, ts_error *err)
{
    *n_out = 0;
    if (cap < DETOK_MAX_OUT(len))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "detok: output buffer of %zu bytes, %zu bytes of input need %zu",
                            cap, len, DETOK_MAX_OUT(len));
    if (len > 0 && !bytes)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "detok: NULL bytes");
    const uint8_t *in = bytes;
    size_t i = 0, o = 0;
    if (len > 0 && !d->seen_piece) {
        d->seen_piece = true;
        if (d->strip_leading_space && in[0] == ' ')
            i = 1;
    }
    while (i < len) {
        uint8_t b = in[i];
        if (d->n_tail > 0) {
            if (continues(d->tail, d->n_tail, b)) {
                d->tail[d->n_tail++] = b;
                i++;
                if (d->n_tail == d->need) {
                    memcpy(out + o, d->tail, (size_t)d->n_tail);
                    o += (size_t)d->n_tail;
                    d->n_tail = 0;
                }
            } else { /* the held prefix is a maximal ill-formed subpart; b starts afresh */
                memcpy(out + o, REPLACEMENT, 3);
                o += 3;
                d->n_tail = 0;
            }
            continue;
        }
        int n = lead_length(b);
        i++;
        if (n == 1) {
            out[o++] = (char)b;
        } else if (n == 0) {
            memcpy(out + o, REPLACEMENT, 3);
            o += 3;
        } else {
            d->tail[0] = b;
            d->n_tail = 1;
            d->need = n;
        }
    }
    *n_out = o;
    return TS_OK;
}

ts_status detok_flush(detok *d, char *out, size_t cap, size_t *n_out, ts_error *err)
{
    *n_out = 0;
    if (cap < 3)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "detok: flush needs 3 bytes of output, got %zu", cap);
    if (d->n_tail > 0) {
        memcpy(out, REPLACEMENT, 3);
        *n_out = 3;
    }
    detok_init(d, d->strip_leading_space);
    return TS_OK;
}

bool detok_utf8_valid(const void *s, size_t len)
{
    const uint8_t *p = s;
    size_t i = 0;
    while (i < len) {
        int n = lead_length(p[i]);
        if (n == 0 || len - i < (size_t)n)
            return false;
        for (int k = 1; k < n; k++)
            if (!continues(p + i, k, p[i + (size_t)k]))
                return false;
        i += (size_t)n;
    }
    return true;
}
