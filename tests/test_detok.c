/* test_detok.c: the incremental UTF-8 detokenizer: characters split across pushes,
 * replacement of ill-formed input, the leading-space option, random byte streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/detok.h"

#define FFFD "\xEF\xBF\xBD"

/* An independent validator: decode each code point and check it is the shortest form,
 * not a surrogate, and at most U+10FFFF. */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        int len;
        uint32_t cp, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            len = 2, cp = b & 0x1F, min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            len = 3, cp = b & 0x0F, min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            len = 4, cp = b & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < (size_t)len)
            return false;
        for (int k = 1; k < len; k++) {
            if ((s[i + (size_t)k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + (size_t)k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += (size_t)len;
    }
    return true;
}

/* A growing output. */
typedef struct text {
    char buf[8192];
    size_t n;
} text;

static void push(detok *d, text *t, const void *bytes, size_t len)
{
    char out[DETOK_MAX_OUT(256)];
    assert_true(len <= 256);
    size_t n = 12345;
    assert_int_equal(detok_push(d, out, sizeof out, &n, bytes, len, NULL), TS_OK);
    assert_true(n <= DETOK_MAX_OUT(len));
    assert_true(valid_utf8((const uint8_t *)out, n)); /* each push is whole characters */
    assert_true(t->n + n <= sizeof t->buf);
    memcpy(t->buf + t->n, out, n);
    t->n += n;
}

static void flush(detok *d, text *t)
{
    char out[3];
    size_t n = 99;
    assert_int_equal(detok_flush(d, out, sizeof out, &n, NULL), TS_OK);
    memcpy(t->buf + t->n, out, n);
    t->n += n;
}

/* Decodes s (len) in one push + flush. */
static void decode_whole(text *t, const char *s, size_t len)
{
    detok d;
    detok_init(&d, false);
    t->n = 0;
    push(&d, t, s, len);
    flush(&d, t);
}

static void test_ascii_and_whole_characters_pass_through(void **state)
{
    (void)state;
    const char *s = "Hi \xC2\xA2 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xEF\xBF\xBD end";
    text t;
    decode_whole(&t, s, strlen(s));
    assert_int_equal(t.n, strlen(s));
    assert_memory_equal(t.buf, s, t.n);
    decode_whole(&t, "", 0);
    assert_int_equal(t.n, 0);
}

static void test_every_split_of_multibyte_characters(void **state)
{
    (void)state;
    /* 2, 3 and 4 byte characters (9 bytes): every one of the 2^8 partitions */
    const char *s = "\xC2\xA2\xE2\x82\xAC\xF0\x9F\x98\x80";
    const size_t n = strlen(s);
    for (unsigned cuts = 0; cuts < (1u << (n - 1)); cuts++) {
        detok d;
        detok_init(&d, false);
        text t = { .n = 0 };
        size_t start = 0;
        for (size_t i = 1; i <= n; i++) {
            if (i == n || (cuts & (1u << (i - 1)))) {
                push(&d, &t, s + start, i - start);
                /* only whole characters so far: a prefix ending on a boundary */
                assert_memory_equal(t.buf, s, t.n);
                assert_true(t.n == 0 || t.n == 2 || t.n == 5 || t.n == 9);
                start = i;
            }
        }
        flush(&d, &t);
        assert_int_equal(t.n, n);
        assert_memory_equal(t.buf, s, n);
    }

    /* byte-fallback pieces <0xE2> <0x82> <0xAC>: nothing until the third */
    detok d;
    detok_init(&d, false);
    text t = { .n = 0 };
    push(&d, &t, "\xE2", 1);
    assert_int_equal(t.n, 0);
    push(&d, &t, "\x82", 1);
    assert_int_equal(t.n, 0);
    push(&d, &t, "\xAC", 1);
    assert_int_equal(t.n, 3);
    assert_memory_equal(t.buf, "\xE2\x82\xAC", 3);
    push(&d, &t, "", 0);
    flush(&d, &t);
    assert_int_equal(t.n, 3);
}

static void test_invalid_input_becomes_replacement(void **state)
{
    (void)state;
    static const struct { const char *in, *out; } cases[] = {
        { "\x80", FFFD },                              /* stray continuation */
        { "a\x80\xBF" "b", "a" FFFD FFFD "b" },
        { "\xE2\x82" "A", FFFD "A" },                  /* truncated, then ASCII */
        { "\xE2\x82", FFFD },                          /* truncated at the end: flush */
        { "\xF0\x9F\x98", FFFD },
        { "\xC0\xAF", FFFD FFFD },                     /* overlong '/' */
        { "\xC1\xBF", FFFD FFFD },
        { "\xE0\x80\xAF", FFFD FFFD FFFD },            /* overlong 3-byte */
        { "\xF0\x80\x80\xAF", FFFD FFFD FFFD FFFD },   /* overlong 4-byte */
        { "\xED\xA0\x80", FFFD FFFD FFFD },            /* surrogate U+D800 */
        { "\xED\xBF\xBF", FFFD FFFD FFFD },
        { "\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD },   /* U+110000 */
        { "\xF5\x80", FFFD FFFD },
        { "\xFF\xFE", FFFD FFFD },
        { "\xE2\xE2\x82\xAC", FFFD "\xE2\x82\xAC" },   /* lead after lead */
        { "\xF0\x9F\x98\xF0\x9F\x98\x80", FFFD "\xF0\x9F\x98\x80" },
        { "\xC2" "\xC2\xA2", FFFD "\xC2\xA2" },
        { "\xED\x9F\xBF", "\xED\x9F\xBF" },            /* U+D7FF is fine */
        { "\xEE\x80\x80", "\xEE\x80\x80" },            /* U+E000 is fine */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const size_t n = strlen(cases[c].in);
        text t;
        decode_whole(&t, cases[c].in, n);
        assert_int_equal(t.n, strlen(cases[c].out));
        assert_memory_equal(t.buf, cases[c].out, t.n);
        assert_true(valid_utf8((const uint8_t *)t.buf, t.n));
        assert_int_equal(detok_utf8_valid(cases[c].in, n),
                         strcmp(cases[c].in, cases[c].out) == 0);
        /* byte by byte gives the same */
        detok d;
        detok_init(&d, false);
        text b = { .n = 0 };
        for (size_t i = 0; i < n; i++)
            push(&d, &b, cases[c].in + i, 1);
        flush(&d, &b);
        assert_int_equal(b.n, t.n);
        assert_memory_equal(b.buf, t.buf, t.n);
    }
}

static void test_leading_space_option(void **state)
{
    (void)state;
    detok d;
    text t = { .n = 0 };
    detok_init(&d, true);
    push(&d, &t, "", 0); /* control tokens decode to nothing: not the first piece */
    push(&d, &t, " Hello", 6);
    push(&d, &t, " world", 6);
    assert_int_equal(t.n, 11);
    assert_memory_equal(t.buf, "Hello world", 11);

    /* only one space, and only at the very start */
    t.n = 0;
    detok_init(&d, true);
    push(&d, &t, "  x", 3);
    push(&d, &t, " ", 1);
    assert_int_equal(t.n, 3);
    assert_memory_equal(t.buf, " x ", 3);
    t.n = 0;
    detok_init(&d, true);
    push(&d, &t, "x", 1);
    push(&d, &t, " y", 2);
    assert_memory_equal(t.buf, "x y", 3);

    /* off: kept; flush resets for a new text with the same option */
    t.n = 0;
    detok_init(&d, false);
    push(&d, &t, " a", 2);
    assert_memory_equal(t.buf, " a", 2);
    detok_init(&d, true);
    t.n = 0;
    push(&d, &t, " a", 2);
    flush(&d, &t);
    push(&d, &t, " b", 2);
    assert_int_equal(t.n, 2);
    assert_memory_equal(t.buf, "ab", 2);
}

static void test_buffer_errors(void **state)
{
    (void)state;
    detok d;
    detok_init(&d, false);
    char out[16];
    size_t n = 7;
    ts_error err = {0};
    assert_int_equal(detok_push(&d, out, sizeof out, &n, "abcdefgh", 8, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err.msg, "output buffer"));
    assert_int_equal(detok_push(&d, out, sizeof out, &n, NULL, 2, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(detok_push(&d, out, sizeof out, &n, "\xE2", 1, NULL), TS_OK);
    assert_int_equal(detok_flush(&d, out, 2, &n, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "flush"));
    assert_int_equal(detok_flush(&d, out, 3, &n, NULL), TS_OK); /* tail still held */
    assert_int_equal(n, 3);
    assert_memory_equal(out, FFFD, 3);
}

static uint64_t test_rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Bytes drawn to hit the interesting ranges often. */
static uint8_t random_byte(uint64_t *x)
{
    static const uint8_t special[] = { 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                       0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5,
                                       0xFF, 'a', ' ' };
    uint64_t r = test_rng(x);
    if (r % 3 == 0)
        return special[(r >> 8) % sizeof special];
    if (r % 3 == 1)
        return (uint8_t)(0x80 + ((r >> 8) % 64)); /* continuation bytes */
    return (uint8_t)(r >> 16);
}

static void test_random_streams_give_valid_utf8(void **state)
{
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int round = 0; round < 3000; round++) {
        uint8_t in[200];
        size_t n = (size_t)(test_rng(&x) % sizeof in);
        for (size_t i = 0; i < n; i++)
            in[i] = random_byte(&x);
        text whole;
        decode_whole(&whole, (const char *)in, n);
        assert_true(valid_utf8((const uint8_t *)whole.buf, whole.n));
        bool valid = valid_utf8(in, n);
        assert_int_equal(detok_utf8_valid(in, n), valid);
        if (valid) { /* valid input comes out unchanged */
            assert_int_equal(whole.n, n);
            assert_memory_equal(whole.buf, in, n);
        }
        /* random chunking gives the same text */
        detok d;
        detok_init(&d, false);
        text parts = { .n = 0 };
        size_t i = 0;
        while (i < n) {
            size_t k = 1 + (size_t)(test_rng(&x) % 6);
            k = k > n - i ? n - i : k;
            push(&d, &parts, in + i, k);
            i += k;
        }
        flush(&d, &parts);
        assert_int_equal(parts.n, whole.n);
        assert_memory_equal(parts.buf, whole.buf, whole.n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ascii_and_whole_characters_pass_through),
        cmocka_unit_test(test_every_split_of_multibyte_characters),
        cmocka_unit_test(test_invalid_input_becomes_replacement),
        cmocka_unit_test(test_leading_space_option),
        cmocka_unit_test(test_buffer_errors),
        cmocka_unit_test(test_random_streams_give_valid_utf8),
    };
    return cmocka_run_group_tests_name("detok", tests, NULL, NULL);
}
