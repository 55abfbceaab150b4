/* fuzz_detok_stop.c: libFuzzer target: random byte streams through the incremental
 * detokenizer and the stop matcher, chained as the engine chains them (emit.c).
 *
 * Input: byte 0: bits 0-2 the number of stop strings (0..4, higher wraps), bit 3 strips a
 * leading space; then per stop string a length byte and that many bytes (cut at a NUL, as
 * C strings are); then chunks, each a length byte (0..31) and that many bytes.
 *
 * Checked: stop_init refuses exactly the strings that are not valid UTF-8, with a
 * message; every detokenizer output is valid UTF-8 (by detok_utf8_valid and by an
 * independent decoder here); valid input comes back unchanged; each chunk the matcher
 * releases is valid UTF-8 and the released text never contains a stop string; without a
 * stop nothing is lost; with one, the text is cut exactly at the earliest start of any
 * stop string in the text seen so far. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/detok.h"
#include "engine/stop.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

/* Well-formed UTF-8 by decoding: shortest form, no surrogates, nothing past U+10FFFF. */
static bool ref_utf8_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3
                   : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || n - i < len)
            return false;
        uint32_t cp = len == 1 ? b : b & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static bool contains(const char *hay, size_t n, const char *needle, size_t k)
{
    return k > 0 && memmem(hay, n, needle, k) != NULL;
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void append(buf *b, const char *s, size_t n)
{
    if (!b->p || b->n + n > b->cap) {
        b->cap = 2 * (b->n + n) + 64;
        b->p = realloc(b->p, b->cap);
        FUZZ_CHECK(b->p != NULL, "out of memory");
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Feeds one detokenizer output chunk (or the end, utf8 == NULL) to the matcher as the
 * engine does, appending what it releases to shown. */
static void push_stop(stop_matcher *m, const char *utf8, size_t n, bool end, buf *shown,
                      const buf *seen, size_t *stop_seen)
{
    size_t cap = STOP_MAX_OUT(n), n_out = 0;
    char *text = malloc(cap);
    FUZZ_CHECK(text != NULL, "out of memory");
    ts_error err = {0};
    bool was_stopped = m->stopped;
    ts_status st = stop_push(m, text, cap, &n_out, utf8, n, &err);
    FUZZ_CHECK(st == TS_OK, "stop_push failed: %s", err.msg);
    if (end && !m->stopped) {
        size_t more = 0;
        st = stop_flush(m, text + n_out, cap - n_out, &more, &err);
        FUZZ_CHECK(st == TS_OK, "stop_flush into the rest of the push buffer failed: %s",
                   err.msg);
        n_out += more;
    }
    FUZZ_CHECK(n_out <= cap, "stop matcher wrote %zu bytes into %zu", n_out, cap);
    FUZZ_CHECK(ref_utf8_valid((const uint8_t *)text, n_out),
               "the stop matcher released a chunk that is not valid UTF-8");
    FUZZ_CHECK(!was_stopped || n_out == 0, "the stop matcher released text after a stop");
    if (m->stopped && !was_stopped)
        *stop_seen = seen->n;
    append(shown, text, n_out);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader r = {data, size};
    uint8_t head = fuzz_u8(&r);
    int n_stop = head & 7;
    if (n_stop > STOP_MAX_STRINGS)
        n_stop -= STOP_MAX_STRINGS;
    bool strip = head & 8;

    char stops[STOP_MAX_STRINGS][300];
    const char *stop_ptrs[STOP_MAX_STRINGS];
    bool all_valid = true;
    for (int i = 0; i < n_stop; i++) {
        size_t len;
        const uint8_t *p = fuzz_bytes(&r, fuzz_u8(&r), &len);
        memcpy(stops[i], p, len);
        stops[i][len] = '\0';
        stop_ptrs[i] = stops[i];
        all_valid &= ref_utf8_valid((const uint8_t *)stops[i], strlen(stops[i]));
    }
    stop_matcher m;
    ts_error err = {0};
    ts_status st = stop_init(&m, stop_ptrs, n_stop, &err);
    FUZZ_CHECK((st == TS_OK) == all_valid, "stop_init answered %s for stop strings that are %s",
               ts_status_str(st), all_valid ? "valid" : "not valid UTF-8");
    if (st != TS_OK) {
        FUZZ_CHECK(err.msg[0] != '\0' && err.status == st, "stop_init failed without a message");
        return 0;
    }

    detok d;
    detok_init(&d, strip);
    buf in = {0}, seen = {0}, shown = {0};
    append(&in, "", 0); /* never NULL, so offsets from p are defined */
    append(&seen, "", 0);
    append(&shown, "", 0);
    size_t stop_seen = 0;
    while (r.n > 0) {
        size_t len;
        const uint8_t *p = fuzz_bytes(&r, fuzz_u8(&r) & 31, &len);
        append(&in, (const char *)p, len);
        size_t cap = DETOK_MAX_OUT(len), n_out = 0;
        char *utf8 = malloc(cap);
        FUZZ_CHECK(utf8 != NULL, "out of memory");
        st = detok_push(&d, utf8, cap, &n_out, p, len, &err);
        FUZZ_CHECK(st == TS_OK && n_out <= cap, "detok_push failed or overflowed");
        FUZZ_CHECK(detok_utf8_valid(utf8, n_out) && ref_utf8_valid((uint8_t *)utf8, n_out),
                   "the detokenizer emitted a chunk that is not valid UTF-8");
        append(&seen, utf8, n_out);
        push_stop(&m, utf8, n_out, false, &shown, &seen, &stop_seen);
        free(utf8);
    }
    char tail[3];
    size_t n_tail = 0;
    st = detok_flush(&d, tail, sizeof tail, &n_tail, &err);
    FUZZ_CHECK(st == TS_OK && ref_utf8_valid((uint8_t *)tail, n_tail), "detok_flush failed");
    append(&seen, tail, n_tail);
    push_stop(&m, tail, n_tail, true, &shown, &seen, &stop_seen);

    /* The detokenizer alone. */
    FUZZ_CHECK(detok_utf8_valid(seen.p, seen.n) && ref_utf8_valid((uint8_t *)seen.p, seen.n),
               "the detokenized text is not valid UTF-8");
    size_t skip = strip && in.n > 0 && in.p[0] == ' ';
    FUZZ_CHECK(detok_utf8_valid(in.p + skip, in.n - skip) ==
                   ref_utf8_valid((uint8_t *)in.p + skip, in.n - skip),
               "detok_utf8_valid disagrees with the reference decoder");
    if (ref_utf8_valid((uint8_t *)in.p + skip, in.n - skip))
        FUZZ_CHECK(seen.n == in.n - skip && memcmp(seen.p, in.p + skip, seen.n) == 0,
                   "valid UTF-8 did not pass through the detokenizer unchanged");

    /* The stop matcher. */
    for (int i = 0; i < m.n; i++)
        FUZZ_CHECK(!contains(shown.p, shown.n, m.str[i], m.len[i]),
                   "the released text contains stop string %d", i);
    if (!m.stopped) {
        FUZZ_CHECK(shown.n == seen.n && (seen.n == 0 || memcmp(shown.p, seen.p, seen.n) == 0),
                   "without a stop, %zu of %zu bytes were released", shown.n, seen.n);
    } else {
        size_t cut = stop_seen;
        for (int i = 0; i < m.n; i++) {
            const char *hit = memmem(seen.p, stop_seen, m.str[i], m.len[i]);
            if (hit && (size_t)(hit - seen.p) < cut)
                cut = (size_t)(hit - seen.p);
        }
        FUZZ_CHECK(cut < stop_seen, "the matcher stopped but no stop string was in the text");
        FUZZ_CHECK(shown.n == cut && memcmp(shown.p, seen.p, cut) == 0,
                   "stopped at byte %zu; the earliest stop string starts at %zu", shown.n, cut);
        FUZZ_CHECK(m.which >= 0 && m.which < m.n &&
                       seen.n - cut >= m.len[m.which] &&
                       memcmp(seen.p + cut, m.str[m.which], m.len[m.which]) == 0,
                   "stop string %d is not where the text was cut", m.which);
    }
    free(in.p);
    free(seen.p);
    free(shown.p);
    return 0;
}
