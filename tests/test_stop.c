/* test_stop.c: the stop-string matcher: matches across every chunk split, overlapping
 * prefixes, several strings, held text released when it stops matching, multibyte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "engine/stop.h"

/* The earliest start of a stop string within text[0..len), or len. */
static size_t first_stop(const char *text, size_t len, const char *const *stops, int n_stops)
{
    size_t best = len;
    for (int s = 0; s < n_stops; s++) {
        size_t k = strlen(stops[s]);
        for (size_t i = 0; k > 0 && i + k <= len && i < best; i++)
            if (memcmp(text + i, stops[s], k) == 0)
                best = i;
    }
    return best;
}

/* What a stream fed in chunks ending at cuts (n_cuts, then the end) should give:
 * generation stops after the first chunk that completes a stop string, and the text is
 * cut at the earliest stop string present by then. */
static size_t reference_cut(const char *stream, const size_t *cuts, int n_cuts,
                            const char *const *stops, int n_stops, bool *stopped)
{
    size_t len = strlen(stream);
    for (int c = 0; c <= n_cuts; c++) {
        size_t end = c < n_cuts ? cuts[c] : len;
        size_t cut = first_stop(stream, end, stops, n_stops);
        if (cut < end) {
            *stopped = true;
            return cut;
        }
    }
    *stopped = false;
    return len;
}

typedef struct run {
    char out[4096];
    size_t n;
    bool stopped;
} run;

/* Feeds stream in the chunks given by cut points (sorted, inside the stream) and checks
 * after every push that the emitted text is a prefix of the expected output and never
 * holds a stop string. */
static void feed(run *r, stop_matcher *m, const char *stream, const size_t *cuts, int n_cuts,
                 const char *want, size_t want_len)
{
    size_t len = strlen(stream), start = 0;
    r->n = 0;
    for (int c = 0; c <= n_cuts; c++) {
        size_t end = c < n_cuts ? cuts[c] : len;
        char out[STOP_MAX_OUT(256)];
        size_t n = 777;
        assert_true(end - start <= 256);
        assert_int_equal(stop_push(m, out, sizeof out, &n, stream + start, end - start, NULL),
                         TS_OK);
        memcpy(r->out + r->n, out, n);
        r->n += n;
        assert_true(r->n <= want_len);
        assert_memory_equal(r->out, want, r->n);
        start = end;
    }
    char out[STOP_MAX_LEN];
    size_t n = 777;
    assert_int_equal(stop_flush(m, out, sizeof out, &n, NULL), TS_OK);
    memcpy(r->out + r->n, out, n);
    r->n += n;
    r->stopped = m->stopped;
}

static void check_splits(const char *stream, const char *const *stops, int n_stops,
                         bool three_way)
{
    bool stopped;
    size_t want, len = strlen(stream);
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = three_way ? a : len; b <= len; b++) {
            size_t cuts[2] = { a, b };
            want = reference_cut(stream, cuts, 2, stops, n_stops, &stopped);
            stop_matcher m;
            assert_int_equal(stop_init(&m, stops, n_stops, NULL), TS_OK);
            run r;
            feed(&r, &m, stream, cuts, 2, stream, want);
            assert_int_equal(r.n, want);
            assert_int_equal(r.stopped, stopped);
        }
    }
    /* and byte by byte */
    stop_matcher m;
    assert_int_equal(stop_init(&m, stops, n_stops, NULL), TS_OK);
    size_t cuts[512];
    assert_true(len <= 512);
    for (size_t i = 0; i + 1 < len; i++)
        cuts[i] = i + 1;
    want = reference_cut(stream, cuts, len > 0 ? (int)len - 1 : 0, stops, n_stops, &stopped);
    run r;
    feed(&r, &m, stream, cuts, len > 0 ? (int)len - 1 : 0, stream, want);
    assert_int_equal(r.n, want);
    assert_int_equal(r.stopped, stopped);
}

static void test_match_across_every_split(void **state)
{
    (void)state;
    const char *stops[1] = { "STOP" };
    check_splits("Hello, world! STOP and more text", stops, 1, true);
    check_splits("STOP at the start", stops, 1, true);
    check_splits("at the end STOP", stops, 1, true);
    check_splits("no stop here, ST OP, STO", stops, 1, true); /* ends on a prefix: flushed */
    const char *one[1] = { "\n" };
    check_splits("line one\nline two", one, 1, true);
}

static void test_overlapping_prefixes(void **state)
{
    (void)state;
    const char *aab[1] = { "aab" };
    check_splits("aaab", aab, 1, true);
    check_splits("aaaaaaab tail", aab, 1, true);
    check_splits("aaaa", aab, 1, true);
    const char *abab[1] = { "abac" };
    check_splits("ababac!", abab, 1, true);
    check_splits("abababab", abab, 1, true);

    stop_matcher m;
    assert_int_equal(stop_init(&m, aab, 1, NULL), TS_OK);
    char out[STOP_MAX_OUT(8)];
    size_t n;
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "aa", 2, NULL), TS_OK);
    assert_int_equal(n, 0); /* "aa" could begin "aab" */
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "a", 1, NULL), TS_OK);
    assert_int_equal(n, 1); /* "aaa": only the last two can still match */
    assert_memory_equal(out, "a", 1);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "b", 1, NULL), TS_OK);
    assert_int_equal(n, 0);
    assert_true(m.stopped);
    assert_int_equal(m.which, 0);
}

static void test_several_stop_strings(void **state)
{
    (void)state;
    const char *stops[4] = { "xyz", "yz!", "END", "Q" };
    check_splits("abcyz!xyz", stops, 4, true);
    check_splits("ab xy zEN DxyEND..", stops, 4, true);
    check_splits("nothing matches here: xy yz END", stops, 3, true);
    check_splits("Q", stops, 4, true);

    stop_matcher m;
    assert_int_equal(stop_init(&m, stops, 4, NULL), TS_OK);
    char out[STOP_MAX_OUT(16)];
    size_t n;
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "abcxy", 5, NULL), TS_OK);
    assert_int_equal(n, 3);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "z!", 2, NULL), TS_OK);
    assert_int_equal(n, 0);
    assert_true(m.stopped);
    assert_int_equal(m.which, 0); /* "xyz" starts before "yz!" */

    /* after a stop nothing more comes out */
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "more", 4, NULL), TS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(stop_flush(&m, out, sizeof out, &n, NULL), TS_OK);
    assert_int_equal(n, 0);
}

static void test_failed_prefix_is_released(void **state)
{
    (void)state;
    const char *stops[2] = { "STOP", "" }; /* empty strings are ignored */
    stop_matcher m;
    assert_int_equal(stop_init(&m, stops, 2, NULL), TS_OK);
    assert_int_equal(m.n, 1);
    char out[STOP_MAX_OUT(16)];
    size_t n;
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "abc ST", 6, NULL), TS_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(out, "abc ", 4);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "ART", 3, NULL), TS_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(out, "START", 5);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, " STO", 4, NULL), TS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(stop_flush(&m, out, sizeof out, &n, NULL), TS_OK); /* end: release */
    assert_int_equal(n, 3);
    assert_memory_equal(out, "STO", 3);
    assert_false(m.stopped);
    assert_int_equal(m.which, -1);

    /* no stop strings: pass-through */
    assert_int_equal(stop_init(&m, NULL, 0, NULL), TS_OK);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "ST", 2, NULL), TS_OK);
    assert_int_equal(n, 2);
}

static bool is_char_start(unsigned char c) { return (c & 0xC0) != 0x80; }

static void test_multibyte_stop_strings(void **state)
{
    (void)state;
    const char *stops[2] = { "\xE2\x82\xAC\xE2\x82\xAC", "\xC3\xA9!" }; /* "€€", "é!" */
    const char *stream = "a\xE2\x82\xAC" "b\xC3\xA9\xE2\x82\xAC\xC3\xA9" "c\xE2\x82\xAC\xE2\x82\xAC" "d";
    check_splits(stream, stops, 2, true);
    check_splits("caf\xC3\xA9! ok", stops, 2, true);

    /* pushed whole characters at a time, the emitted text always ends on a boundary */
    stop_matcher m;
    assert_int_equal(stop_init(&m, stops, 2, NULL), TS_OK);
    size_t len = strlen(stream), i = 0, total = 0;
    char all[64];
    while (i < len) {
        size_t k = 1;
        while (i + k < len && !is_char_start((unsigned char)stream[i + k]))
            k++;
        char out[STOP_MAX_OUT(4)];
        size_t n;
        assert_int_equal(stop_push(&m, out, sizeof out, &n, stream + i, k, NULL), TS_OK);
        memcpy(all + total, out, n);
        total += n;
        assert_true(total == 0 || is_char_start((unsigned char)stream[total]));
        i += k;
    }
    assert_true(m.stopped);
    assert_int_equal(total, 13); /* "a€bé€éc" */

    /* stop strings that are not valid UTF-8 are refused */
    const char *bad[2] = { "ok", "\xA2" };
    ts_error err = {0};
    assert_int_equal(stop_init(&m, bad, 2, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "stop[1]"));
    assert_non_null(strstr(err.msg, "UTF-8"));
}

static void test_random_streams_match_reference(void **state)
{
    (void)state;
    uint64_t x = 0x2545F4914F6CDD1DULL;
#define RNG() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    for (int round = 0; round < 4000; round++) {
        char stops_buf[4][8];
        const char *stops[4];
        int n_stops = 1 + (int)(RNG() % 4);
        for (int s = 0; s < n_stops; s++) {
            int k = 1 + (int)(RNG() % 5);
            for (int i = 0; i < k; i++)
                stops_buf[s][i] = "ab"[RNG() % 2];
            stops_buf[s][k] = 0;
            stops[s] = stops_buf[s];
        }
        char stream[64];
        int len = (int)(RNG() % 40);
        for (int i = 0; i < len; i++)
            stream[i] = "aab"[RNG() % 3];
        stream[len] = 0;
        size_t cuts[64];
        int n_cuts = 0;
        for (int i = 1; i < len; i++)
            if (RNG() % 3 == 0)
                cuts[n_cuts++] = (size_t)i;
        bool stopped;
        size_t want = reference_cut(stream, cuts, n_cuts, stops, n_stops, &stopped);
        /* whatever the chunks, the cut is at an occurrence, and none comes before it */
        assert_int_equal(first_stop(stream, want, stops, n_stops), want);
        stop_matcher m;
        assert_int_equal(stop_init(&m, stops, n_stops, NULL), TS_OK);
        run r;
        feed(&r, &m, stream, cuts, n_cuts, stream, want);
        assert_int_equal(r.n, want);
        assert_int_equal(r.stopped, stopped);
    }
#undef RNG
}

static void test_errors(void **state)
{
    (void)state;
    stop_matcher m;
    ts_error err = {0};
    const char *five[5] = { "a", "b", "c", "d", "e" };
    assert_int_equal(stop_init(&m, five, 5, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "at most 4"));
    assert_int_equal(stop_init(&m, five, -1, NULL), TS_ERR_INVALID_ARG);
    assert_int_equal(stop_init(&m, NULL, 2, NULL), TS_ERR_INVALID_ARG);
    const char *with_null[2] = { "a", NULL };
    assert_int_equal(stop_init(&m, with_null, 2, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "stop[1]"));

    char longest[STOP_MAX_LEN + 2];
    memset(longest, 'x', sizeof longest);
    longest[STOP_MAX_LEN] = 0;
    const char *ok[1] = { longest };
    assert_int_equal(stop_init(&m, ok, 1, NULL), TS_OK); /* exactly the cap */
    longest[STOP_MAX_LEN] = 'x';
    longest[STOP_MAX_LEN + 1] = 0;
    const char *too_long[2] = { "fine", longest };
    assert_int_equal(stop_init(&m, too_long, 2, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "stop[1]"));

    /* a 256-byte stop string matches across chunks, with 255 bytes held */
    longest[STOP_MAX_LEN] = 0;
    assert_int_equal(stop_init(&m, ok, 1, NULL), TS_OK);
    char out[STOP_MAX_OUT(STOP_MAX_LEN)];
    size_t n;
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "y", 1, NULL), TS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, longest, STOP_MAX_LEN - 1, NULL), TS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(m.n_held, STOP_MAX_LEN - 1);
    assert_int_equal(stop_push(&m, out, sizeof out, &n, "x", 1, NULL), TS_OK);
    assert_int_equal(n, 0);
    assert_true(m.stopped);

    assert_int_equal(stop_init(&m, five, 1, NULL), TS_OK);
    assert_int_equal(stop_push(&m, out, 10, &n, "abc", 3, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "output buffer"));
    assert_int_equal(stop_push(&m, out, sizeof out, &n, NULL, 3, NULL), TS_ERR_INVALID_ARG);
    assert_int_equal(stop_flush(&m, out, 10, &n, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "flush"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_across_every_split),
        cmocka_unit_test(test_overlapping_prefixes),
        cmocka_unit_test(test_several_stop_strings),
        cmocka_unit_test(test_failed_prefix_is_released),
        cmocka_unit_test(test_multibyte_stop_strings),
        cmocka_unit_test(test_random_streams_match_reference),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests_name("stop", tests, NULL, NULL);
}
