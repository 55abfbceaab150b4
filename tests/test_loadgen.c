/* test_loadgen.c: the load generator's parts (percentiles, --mix, api keys, SSE split at
 * every byte and out of memory, a BOM, the stream-format deviations, URLs and the loopback
 * rule) and whole runs against a scripted HTTP peer. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "loadgen/loadgen.h"
#include "loadgen/run_internal.h"
#include "util.h"

/* |a - b| <= eps, naming both values when not. */
#define assert_near(a, b, eps)                                                             \
    do {                                                                                   \
        double a_ = (a), b_ = (b);                                                         \
        if (!(fabs(a_ - b_) <= (eps)))                                                     \
            fail_msg("%s = %.17g, want %.17g", #a, a_, b_);                                \
    } while (0)

/* ---- percentiles ---------------------------------------------------------------- */

static void test_percentiles(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    loadgen_pcts p;
    loadgen_pcts_of(&p, v, 5);
    assert_true(v[0] == 1 && v[4] == 5); /* sorted in place */
    assert_near(p.p50, 3.0, 1e-12);
    assert_near(p.p90, 4.6, 1e-12);
    assert_near(p.p99, 4.96, 1e-12);
    assert_near(loadgen_percentile(v, 5, 0.0), 1.0, 0);
    assert_near(loadgen_percentile(v, 5, 1.0), 5.0, 0);
    assert_near(loadgen_percentile(v, 5, 0.25), 2.0, 1e-12);
    assert_near(loadgen_percentile(v, 5, 7.0), 5.0, 0); /* q clamps */
    double one = 42;
    loadgen_pcts_of(&p, &one, 1);
    assert_true(p.p50 == 42 && p.p90 == 42 && p.p99 == 42);
    loadgen_pcts_of(&p, NULL, 0);
    assert_true(isnan(p.p50) && isnan(p.p90) && isnan(p.p99));

    /* 1..100: p99 = 99.01, p90 = 90.1, p50 = 50.5 */
    double h[100];
    for (int i = 0; i < 100; i++)
        h[i] = 100 - i;
    loadgen_pcts_of(&p, h, 100);
    assert_near(p.p50, 50.5, 1e-9);
    assert_near(p.p90, 90.1, 1e-9);
    assert_near(p.p99, 99.01, 1e-9);
}

/* ---- mix ------------------------------------------------------------------------ */

static void test_mix_parse(void **state)
{
    (void)state;
    loadgen_mix m;
    ts_error err = {0};
    assert_int_equal(loadgen_mix_parse(&m, "high:0.2,normal:0.6,low:0.2", &err), TS_OK);
    assert_near(m.weight[LOADGEN_CLASS_HIGH], 0.2, 1e-12);
    assert_near(m.weight[LOADGEN_CLASS_NORMAL], 0.6, 1e-12);
    assert_near(m.weight[LOADGEN_CLASS_LOW], 0.2, 1e-12);
    assert_int_equal(loadgen_mix_parse(&m, "low:3,high:1", &err), TS_OK); /* normalised */
    assert_near(m.weight[LOADGEN_CLASS_HIGH], 0.25, 1e-12);
    assert_near(m.weight[LOADGEN_CLASS_NORMAL], 0.0, 0);
    assert_near(m.weight[LOADGEN_CLASS_LOW], 0.75, 1e-12);

    static const struct { const char *spec, *says; } bad[] = {
        {"", "empty"},
        {"high", "not CLASS:WEIGHT"},
        {"high:0.5,low", "not CLASS:WEIGHT"},
        {"high:0.5,", "not CLASS:WEIGHT"},
        {"mid:1", "unknown class 'mid'"},
        {"HIGH:1", "unknown class"},
        {"high:1,high:2", "given twice"},
        {"high:x", "weight of high"},
        {"high:1x", "weight of high"},
        {"high:-1", "weight of high"},
        {"high:inf", "weight of high"},
        {"high:nan", "weight of high"},
        {"high:0,low:0", "all be 0"},
        {",high:1", "not CLASS:WEIGHT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (ts_error){0};
        m.weight[0] = -7;
        assert_int_equal(loadgen_mix_parse(&m, bad[i].spec, &err), TS_ERR_INVALID_ARG);
        if (!strstr(err.msg, bad[i].says))
            fail_msg("mix '%s': message '%s' lacks '%s'", bad[i].spec, err.msg, bad[i].says);
        assert_true(m.weight[0] == -7); /* untouched on failure */
    }
}

static void test_mix_pick(void **state)
{
    (void)state;
    loadgen_mix m;
    assert_int_equal(loadgen_mix_parse(&m, "high:0.2,normal:0.6,low:0.2", NULL), TS_OK);
    assert_int_equal(loadgen_mix_pick(&m, 0.0), LOADGEN_CLASS_HIGH);
    assert_int_equal(loadgen_mix_pick(&m, 0.1999), LOADGEN_CLASS_HIGH);
    assert_int_equal(loadgen_mix_pick(&m, 0.2001), LOADGEN_CLASS_NORMAL);
    assert_int_equal(loadgen_mix_pick(&m, 0.7999), LOADGEN_CLASS_NORMAL);
    assert_int_equal(loadgen_mix_pick(&m, 0.8001), LOADGEN_CLASS_LOW);
    assert_int_equal(loadgen_mix_pick(&m, 1.0), LOADGEN_CLASS_LOW);
    assert_int_equal(loadgen_mix_parse(&m, "normal:1,low:0", NULL), TS_OK);
    assert_int_equal(loadgen_mix_pick(&m, 1.0), LOADGEN_CLASS_NORMAL); /* never a 0 class */

    /* Seeded draws follow the weights and are a function of the seed. */
    assert_int_equal(loadgen_mix_parse(&m, "high:0.2,normal:0.6,low:0.2", NULL), TS_OK);
    int count[LOADGEN_CLASS_COUNT] = {0};
    for (uint64_t s = 0; s < 20000; s++) {
        double u = loadgen_uniform(s);
        assert_true(u >= 0 && u < 1);
        count[loadgen_mix_pick(&m, u)]++;
    }
    assert_in_range(count[LOADGEN_CLASS_HIGH], 3700, 4300);
    assert_in_range(count[LOADGEN_CLASS_NORMAL], 11500, 12500);
    assert_in_range(count[LOADGEN_CLASS_LOW], 3700, 4300);
    assert_true(loadgen_uniform(5) == loadgen_uniform(5));
}

/* ---- api keys and prompts ------------------------------------------------------- */

static const char *write_tmp(const char *name, const char *text)
{
    const char *path = tu_tmp_path(name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void test_keys_load(void **state)
{
    (void)state;
    loadgen_keys k;
    ts_error err = {0};
    const char *p = write_tmp("keys_ok.json",
                              "{\"sk-h1\": {\"tier\": \"high\", \"name\": \"a\"},"
                              " \"sk-h2\": {\"tier\": \"high\"},"
                              " \"sk-n\": {\"name\": \"no tier\"},"
                              " \"sk-l\": {\"tier\": \"low\"}}");
    assert_int_equal(loadgen_keys_load(&k, p, &err), TS_OK);
    assert_string_equal(k.key[LOADGEN_CLASS_HIGH], "sk-h1"); /* the first of a tier */
    assert_string_equal(k.key[LOADGEN_CLASS_NORMAL], "sk-n");  /* tier defaults to normal */
    assert_string_equal(k.key[LOADGEN_CLASS_LOW], "sk-l");
    loadgen_keys_free(&k);
    loadgen_keys_free(&k); /* twice is harmless */
    loadgen_keys_free(NULL);

    p = write_tmp("keys_low.json", "{\"only\": {\"tier\": \"low\"}}");
    assert_int_equal(loadgen_keys_load(&k, p, &err), TS_OK);
    assert_null(k.key[LOADGEN_CLASS_HIGH]);
    assert_null(k.key[LOADGEN_CLASS_NORMAL]);
    loadgen_keys_free(&k);

    static const struct { const char *text, *says; } bad[] = {
        {"[1, 2]", "not a JSON object"},
        {"{\"k\": ", "not a JSON object"},
        {"{\"k\": {\"tier\": \"urgent\"}}", "entry 'k'"},
        {"{\"k\": {\"tier\": 3}}", "entry 'k'"},
        {"{\"k\": \"high\"}", "entry 'k'"},
        {"{\"\": {\"tier\": \"high\"}}", "entry ''"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_tmp("keys_bad.json", bad[i].text);
        assert_int_equal(loadgen_keys_load(&k, p, &err), TS_ERR_FORMAT);
        if (!strstr(err.msg, bad[i].says))
            fail_msg("keys '%s': message '%s' lacks '%s'", bad[i].text, err.msg, bad[i].says);
        for (int c = 0; c < LOADGEN_CLASS_COUNT; c++)
            assert_null(k.key[c]);
    }
    assert_int_equal(loadgen_keys_load(&k, tu_tmp_path("no_such_keys.json"), &err), TS_ERR_IO);
    assert_non_null(strstr(err.msg, "no_such_keys.json"));
}

static int count_words(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += (p == s || p[-1] == ' ') && *p != ' ';
    return n;
}

static void test_words(void **state)
{
    (void)state;
    char *a = loadgen_words(100, 7), *b = loadgen_words(100, 7), *c = loadgen_words(100, 8);
    char *z = loadgen_words(0, 7);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_non_null(z);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(count_words(a), 100);
    assert_null(strstr(a, "  "));
    assert_string_equal(z, "");
    free(a);
    free(b);
    free(c);
    free(z);
}

/* ---- SSE ------------------------------------------------------------------------ */

typedef struct events {
    char text[4096]; /* events joined by '|' */
    int n, stop_after;
    const char *last; /* the last event's data as the parser passed it */
} events;

static bool collect(void *ctx, const char *data, size_t len)
{
    events *e = ctx;
    assert_int_equal(strlen(data), len);
    size_t used = strlen(e->text);
    assert_true(used + len + 2 < sizeof e->text);
    memcpy(e->text + used, data, len);
    e->text[used + len] = '|';
    e->text[used + len + 1] = '\0';
    e->n++;
    e->last = data;
    return e->n != e->stop_after;
}

static const char sse_stream[] =
    ": a comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "data:{\"b\":2}\n\n"
    "event: ignored\r"
    "data: line1\r"
    "data:  two spaces\r\r"
    "id: 5\n"
    "\n" /* a blank line without data dispatches nothing */
    "data\n\n" /* a data field with no colon: an empty event */
    "dataX: not a data field\n\n"
    "data: [DONE]\n\n"
    "data: unterminated";
static const char sse_expected[] = "{\"a\":1}|{\"b\":2}|line1\n two spaces||[DONE]|";

static void feed_all(events *e, const char *const *pieces, const size_t *lens, int n)
{
    loadgen_sse p;
    loadgen_sse_init(&p, 1024);
    memset(e, 0, sizeof *e);
    for (int i = 0; i < n; i++)
        assert_int_equal(loadgen_sse_feed(&p, pieces[i], lens[i], collect, e, NULL), TS_OK);
    loadgen_sse_free(&p);
}

static void test_sse_every_split(void **state)
{
    (void)state;
    size_t len = sizeof sse_stream - 1;
    events e;
    const char *whole[] = {sse_stream};
    feed_all(&e, whole, &len, 1);
    assert_string_equal(e.text, sse_expected);
    assert_int_equal(e.n, 5);

    /* Cut in two at every byte, and in three around every CR LF pair. */
    for (size_t cut = 0; cut <= len; cut++) {
        const char *pieces[] = {sse_stream, sse_stream + cut};
        size_t lens[] = {cut, len - cut};
        feed_all(&e, pieces, lens, 2);
        if (strcmp(e.text, sse_expected))
            fail_msg("split at %zu: got '%s'", cut, e.text);
        for (size_t cut2 = cut; cut2 <= len && cut2 < cut + 3; cut2++) {
            const char *p3[] = {sse_stream, sse_stream + cut, sse_stream + cut2};
            size_t l3[] = {cut, cut2 - cut, len - cut2};
            feed_all(&e, p3, l3, 3);
            assert_string_equal(e.text, sse_expected);
        }
    }
    /* One byte at a time. */
    loadgen_sse p;
    loadgen_sse_init(&p, 1024);
    memset(&e, 0, sizeof e);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(loadgen_sse_feed(&p, sse_stream + i, 1, collect, &e, NULL), TS_OK);
    assert_string_equal(e.text, sse_expected);
    loadgen_sse_free(&p);
}

static void test_sse_limits_and_stop(void **state)
{
    (void)state;
    loadgen_sse p;
    events e;
    ts_error err = {0};
    loadgen_sse_init(&p, 16);
    memset(&e, 0, sizeof e);
    assert_int_equal(loadgen_sse_feed(&p, "data: 0123456789abcdef\n", 23, collect, &e, &err),
                     TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "line over 16"));
    loadgen_sse_free(&p);

    /* Lines that fit but an event that does not. */
    loadgen_sse_init(&p, 16);
    const char two[] = "data: 01234567\ndata: 89abcdef\n\n";
    assert_int_equal(loadgen_sse_feed(&p, two, sizeof two - 1, collect, &e, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "event over 16"));
    assert_int_equal(e.n, 0);
    loadgen_sse_free(&p);

    /* The callback stops the parse. */
    loadgen_sse_init(&p, 1024);
    memset(&e, 0, sizeof e);
    e.stop_after = 2;
    const char three[] = "data: a\n\ndata: b\n\ndata: c\n\n";
    assert_int_equal(loadgen_sse_feed(&p, three, sizeof three - 1, collect, &e, NULL),
                     TS_ERR_CANCELLED);
    assert_string_equal(e.text, "a|b|");
    loadgen_sse_free(&p);
    loadgen_sse_free(NULL);
}

/* An allocation failure in the line or the event is TS_ERR_NOMEM (the buffers are marked
 * failed as a failed realloc leaves them); a dispatched event's bytes outlive the call. */
static void test_sse_out_of_memory_and_lifetime(void **state)
{
    (void)state;
    loadgen_sse p;
    events e;
    ts_error err = {0};
    loadgen_sse_init(&p, 1024);
    memset(&e, 0, sizeof e);
    p.line.failed = true;
    assert_int_equal(loadgen_sse_feed(&p, "data: a", 7, collect, &e, &err), TS_ERR_NOMEM);
    assert_string_equal(err.msg, "sse: out of memory");
    loadgen_sse_free(&p);

    loadgen_sse_init(&p, 1024);
    memset(&err, 0, sizeof err);
    p.data.failed = true;
    assert_int_equal(loadgen_sse_feed(&p, "data: a\n\n", 9, collect, &e, &err), TS_ERR_NOMEM);
    assert_string_equal(err.msg, "sse: out of memory");
    assert_int_equal(e.n, 0);
    loadgen_sse_free(&p);

    /* the last event's data, as the callback saw it, reads the same after the feed */
    loadgen_sse_init(&p, 1024);
    memset(&e, 0, sizeof e);
    const char two[] = "data: first\n\ndata: second\n\n: a comment\n";
    assert_int_equal(loadgen_sse_feed(&p, two, sizeof two - 1, collect, &e, NULL), TS_OK);
    assert_string_equal(e.text, "first|second|");
    assert_string_equal(e.last, "second");
    loadgen_sse_free(&p);
}

/* A leading BOM is skipped wherever the feed cuts it; fields other than data are counted;
 * an event the stream ends without a blank line after is dispatched by finish. */
static void test_sse_bom_fields_and_finish(void **state)
{
    (void)state;
    static const char s[] = "\xEF\xBB\xBF" "data: a\n\nevent: x\nid: 1\ndata: b\n\ndata: c";
    size_t len = sizeof s - 1;
    for (size_t cut = 0; cut <= len; cut++) {
        loadgen_sse p;
        events e;
        bool pending = false;
        loadgen_sse_init(&p, 1024);
        memset(&e, 0, sizeof e);
        assert_int_equal(loadgen_sse_feed(&p, s, cut, collect, &e, NULL), TS_OK);
        assert_int_equal(loadgen_sse_feed(&p, s + cut, len - cut, collect, &e, NULL), TS_OK);
        if (strcmp(e.text, "a|b|"))
            fail_msg("cut at %zu: '%s'", cut, e.text);
        assert_int_equal(p.other_fields, 2);
        assert_int_equal(loadgen_sse_finish(&p, &pending, collect, &e, NULL), TS_OK);
        assert_true(pending);
        assert_string_equal(e.text, "a|b|c|");
        assert_int_equal(loadgen_sse_finish(&p, &pending, collect, &e, NULL), TS_OK);
        assert_false(pending); /* nothing twice */
        loadgen_sse_free(&p);
    }
    /* Two bytes of a BOM and then something else: the bytes stay the line's. */
    loadgen_sse p;
    events e;
    bool pending = true;
    loadgen_sse_init(&p, 1024);
    memset(&e, 0, sizeof e);
    static const char half_bom[] = "\xEF\xBBxx: 1\n\ndata: d\n\n";
    assert_int_equal(loadgen_sse_feed(&p, half_bom, sizeof half_bom - 1, collect, &e, NULL), TS_OK);
    assert_string_equal(e.text, "d|");
    assert_int_equal(p.other_fields, 1);
    assert_int_equal(loadgen_sse_finish(&p, &pending, collect, &e, NULL), TS_OK);
    assert_false(pending);
    loadgen_sse_free(&p);
}

/* ---- Deviations ----------------------------------------------------------------- */

/* A completions chunk with every field OpenAI sends and text as its delta. */
static cJSON *full_chunk(const char *text)
{
    cJSON *j = cJSON_Parse("{\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,"
                           "\"model\":\"m\",\"choices\":[{\"index\":0,\"logprobs\":null,"
                           "\"finish_reason\":null}]}");
    assert_non_null(j);
    cJSON_AddStringToObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text",
                            text);
    return j;
}

/* The deviation bits of a stream of these deltas (NULL-terminated), ended cleanly. */
static uint32_t deltas_dev(const char *const *deltas)
{
    loadgen_check c;
    loadgen_check_init(&c, false);
    for (; *deltas; deltas++) {
        cJSON *j = full_chunk(*deltas);
        loadgen_check_chunk(&c, j, *deltas);
        cJSON_Delete(j);
    }
    c.finish_seen = c.usage_seen = true;
    loadgen_check_end(&c);
    return c.dev;
}

static void test_check_utf8(void **state)
{
    (void)state;
    const uint32_t split = 1u << LOADGEN_DEV_SPLIT_UTF8, bad = 1u << LOADGEN_DEV_INVALID_UTF8,
                   repl = 1u << LOADGEN_DEV_REPLACEMENT;
    static const struct {
        const char *d[5];
        int want; /* 0 none, 1 split, 2 invalid, 3 replacement */
    } cases[] = {
        {{"ab", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", NULL}, 0},
        {{"caf\xC3", "\xA9 ok", NULL}, 1},
        {{"\xE2\x82", "\xAC", NULL}, 1},
        {{"x\xF0", "\x9F", "\x98", "\x80!", NULL}, 1}, /* one character over four deltas */
        {{"\xC3", "\xA9\xE2", "\x82\xAC", NULL}, 1},   /* two characters, each split */
        {{"up\xFFon", NULL}, 2},
        {{"\xA9", NULL}, 2},                      /* a continuation byte alone */
        {{"\xC3", "x", NULL}, 2},                 /* a lead byte never continued */
        {{"ok", "\xC3", NULL}, 2},                /* ... or cut off at the end */
        {{"\xED\xA0\x80", NULL}, 2},              /* a surrogate */
        {{"\xC0\x80", NULL}, 2},                  /* an overlong NUL */
        {{"\xF4\x90\x80\x80", NULL}, 2},          /* past U+10FFFF */
        {{"\xE0", "\x80\x80", NULL}, 2},          /* overlong, split */
        {{"a \xEF\xBF\xBD b", NULL}, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t want = cases[i].want == 1 ? split : cases[i].want == 2 ? bad
                        : cases[i].want == 3 ? repl : 0;
        uint32_t got = deltas_dev(cases[i].d);
        if (got != want)
            fail_msg("case %zu: deviations 0x%x, want 0x%x", i, got, want);
    }
}

static void test_check_fields(void **state)
{
    (void)state;
    loadgen_check c;
    loadgen_check_init(&c, false);
    cJSON *j = full_chunk("hi");
    loadgen_check_chunk(&c, j, "hi");
    assert_int_equal(c.dev, 0);
    assert_false(c.finish_seen);
    /* llama.cpp's final chunk: usage and its own timings */
    cJSON_AddItemToObject(j, "timings", cJSON_CreateObject());
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "completion_tokens", 3);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                              "finish_reason", cJSON_CreateString("length"));
    loadgen_check_chunk(&c, j, "");
    assert_int_equal(c.dev, 1u << LOADGEN_DEV_EXTRA_FIELDS);
    assert_string_equal(c.extra, "timings");
    assert_true(c.finish_seen && c.usage_seen);
    loadgen_check_end(&c);
    assert_int_equal(c.dev, 1u << LOADGEN_DEV_EXTRA_FIELDS);
    cJSON_Delete(j);

    /* a chat chunk without created, a choice without index, an extra delta field */
    loadgen_check_init(&c, true);
    j = cJSON_Parse("{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\","
                    "\"choices\":[{\"finish_reason\":null,\"delta\":{\"content\":\"a\","
                    "\"reasoning_content\":\"\"}}]}");
    loadgen_check_chunk(&c, j, "a");
    cJSON_Delete(j);
    assert_int_equal(c.dev, (1u << LOADGEN_DEV_MISSING_FIELDS) | (1u << LOADGEN_DEV_EXTRA_FIELDS));
    assert_string_equal(c.extra, "choices[].delta.reasoning_content");
    loadgen_check_end(&c);
    assert_true(c.dev & (1u << LOADGEN_DEV_MISSING_FINISH));
    assert_true(c.dev & (1u << LOADGEN_DEV_MISSING_USAGE));

    /* an error event keeps its message, non-ASCII bytes as '?' */
    loadgen_check_init(&c, false);
    j = cJSON_Parse("{\"error\":{\"code\":500,\"message\":\"bad \xC3\xA9 byte\"}}");
    loadgen_check_chunk(&c, j, NULL);
    cJSON_Delete(j);
    assert_int_equal(c.dev, 1u << LOADGEN_DEV_ERROR_EVENT);
    assert_string_equal(c.error, "bad ?? byte");
    for (int d = 0; d < LOADGEN_DEV_COUNT; d++)
        assert_non_null(strchr(loadgen_dev_name((loadgen_dev)d), '_'));
    assert_string_equal(loadgen_dev_name(LOADGEN_DEV_INVALID_UTF8), "invalid_utf8_in_delta");
    assert_string_equal(loadgen_dev_name(LOADGEN_DEV_COUNT), "unknown");
}

/* ---- URLs ----------------------------------------------------------------------- */

static void test_url_parse(void **state)
{
    (void)state;
    loadgen_url u;
    ts_error err = {0};
    char buf[256];
    assert_int_equal(loadgen_url_parse(&u, "http://127.0.0.1:8080", &err), TS_OK);
    assert_string_equal(u.scheme, "http");
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 8080);
    assert_string_equal(u.path, "");
    assert_int_equal(loadgen_url_format(buf, &u, "/v1/completions", sizeof buf, &err), TS_OK);
    assert_string_equal(buf, "http://127.0.0.1:8080/v1/completions");

    assert_int_equal(loadgen_url_parse(&u, "HTTP://localhost/api/", &err), TS_OK);
    assert_string_equal(u.host, "localhost");
    assert_int_equal(u.port, 80);
    assert_string_equal(u.path, "/api");
    assert_int_equal(loadgen_url_parse(&u, "https://[::1]:9443//", &err), TS_OK);
    assert_string_equal(u.scheme, "https");
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 9443);
    assert_int_equal(loadgen_url_format(buf, &u, "/health", sizeof buf, &err), TS_OK);
    assert_string_equal(buf, "https://[::1]:9443/health");
    assert_int_equal(loadgen_url_format(buf, &u, "/health", 10, &err), TS_ERR_TOO_LONG);
    assert_int_equal(loadgen_url_parse(&u, "https://example.com", &err), TS_OK);
    assert_int_equal(u.port, 443);

    /* The base URL OpenAI clients take (README) ends in /v1: it is not doubled. */
    static const struct { const char *url, *path; } v1[] = {
        {"http://127.0.0.1:8080/v1", ""},        {"http://127.0.0.1:8080/v1/", ""},
        {"http://127.0.0.1:8080/api/v1//", "/api"}, {"http://127.0.0.1:8080/v10", "/v10"},
        {"http://127.0.0.1:8080/xv1", "/xv1"},
    };
    for (size_t i = 0; i < sizeof v1 / sizeof *v1; i++) {
        assert_int_equal(loadgen_url_parse(&u, v1[i].url, &err), TS_OK);
        if (strcmp(u.path, v1[i].path))
            fail_msg("%s: path '%s', not '%s'", v1[i].url, u.path, v1[i].path);
    }
    assert_int_equal(loadgen_url_parse(&u, "http://127.0.0.1:8080/v1/", &err), TS_OK);
    assert_int_equal(loadgen_url_format(buf, &u, "/v1/completions", sizeof buf, &err), TS_OK);
    assert_string_equal(buf, "http://127.0.0.1:8080/v1/completions");

    static const struct { const char *url, *says; } bad[] = {
        {"127.0.0.1:8080", "no scheme"},
        {"ftp://127.0.0.1", "scheme must be"},
        {"http://", "empty host"},
        {"http://:80", "empty host"},
        {"http://127.0.0.1@evil.example", "user info"},
        {"http://user:pw@127.0.0.1:80/", "user info"},
        {"http://127.0.0.1:80?x=1", "no query"},
        {"http://127.0.0.1/#f", "no query"},
        {"http://127.0.0.1:", "bad port"},
        {"http://127.0.0.1:0", "1..65535"},
        {"http://127.0.0.1:65536", "1..65535"},
        {"http://127.0.0.1:8o", "1..65535"},
        {"http://127.0.0.1:-1", "1..65535"},
        {"http://[::1", "unclosed"},
        {"http://[::1]x", "bad port"},
        {"http://127.0.0.1/a b", "control or space"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (ts_error){0};
        assert_int_equal(loadgen_url_parse(&u, bad[i].url, &err), TS_ERR_INVALID_ARG);
        if (!strstr(err.msg, bad[i].says))
            fail_msg("url '%s': message '%s' lacks '%s'", bad[i].url, err.msg, bad[i].says);
    }
    char longhost[400] = "http://";
    memset(longhost + 7, 'a', 300);
    assert_int_equal(loadgen_url_parse(&u, longhost, &err), TS_ERR_TOO_LONG);
}

static void test_url_loopback(void **state)
{
    (void)state;
    static const struct { const char *url; bool loopback; } cases[] = {
        {"http://127.0.0.1:8080", true},     {"http://127.255.3.4", true},
        {"http://localhost:1", true},        {"http://LocalHost", true},
        {"http://[::1]:80", true},           {"http://[::ffff:127.0.0.1]", true},
        {"http://[0:0:0:0:0:0:0:1]", true},  {"http://10.0.0.1", false},
        {"http://128.0.0.1", false},         {"http://0.0.0.0", false},
        {"http://[::2]", false},             {"http://[::ffff:10.0.0.1]", false},
        {"http://example.com", false},       {"http://localhost.evil.example", false},
        {"http://127.0.0.1.nip.io", false},  {"http://2130706433", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loadgen_url u;
        assert_int_equal(loadgen_url_parse(&u, cases[i].url, NULL), TS_OK);
        if (loadgen_url_is_loopback(&u) != cases[i].loopback)
            fail_msg("%s: loopback should be %d", cases[i].url, cases[i].loopback);
    }
}

/* ---- whole runs against a scripted HTTP peer -------------------------------------- */

typedef enum peer_mode {
    PEER_STREAM,     /* 3 content chunks 20 ms apart, usage, [DONE] */
    PEER_JSON,       /* one JSON completion */
    PEER_MIXED,      /* by the request's key: sk-high gets 200 JSON, others 429 */
    PEER_BAD,        /* 200 that is not JSON */
    PEER_STREAM_ERR, /* a stream with an error event */
    PEER_NO_USAGE,   /* a stream without usage */
    PEER_SLOW,       /* answers after 600 ms */
} peer_mode;

typedef struct peer {
    int fd, port;
    peer_mode mode;
    pthread_t thread;
    pthread_mutex_t mu;
    int stop;              /* under mu */
    int requests;          /* under mu */
    int by_key[LOADGEN_CLASS_COUNT + 1]; /* sk-high, sk-normal, sk-low, none; under mu */
    char last_body[8192];  /* under mu */
    pthread_t conn[256];
    int n_conn;            /* only the accept thread and peer_stop touch these */
} peer;

typedef struct conn_arg {
    peer *p;
    int fd;
} conn_arg;

static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void *conn_main(void *arg)
{
    conn_arg *c = arg;
    peer *p = c->p;
    char req[16384];
    size_t len = 0;
    char *hdr_end = NULL;
    long clen = 0;
    while (len + 1 < sizeof req) { /* headers, then Content-Length bytes of body */
        ssize_t r = recv(c->fd, req + len, sizeof req - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        req[len] = '\0';
        if (!hdr_end && (hdr_end = strstr(req, "\r\n\r\n"))) {
            const char *cl = strcasestr(req, "Content-Length:");
            clen = cl ? strtol(cl + 15, NULL, 10) : 0;
        }
        if (hdr_end && (long)(len - (size_t)(hdr_end + 4 - req)) >= clen)
            break;
    }
    int key = LOADGEN_CLASS_COUNT;
    if (strstr(req, "Bearer sk-high\r"))
        key = LOADGEN_CLASS_HIGH;
    else if (strstr(req, "Bearer sk-normal\r"))
        key = LOADGEN_CLASS_NORMAL;
    else if (strstr(req, "Bearer sk-low\r"))
        key = LOADGEN_CLASS_LOW;
    pthread_mutex_lock(&p->mu);
    p->requests++;
    p->by_key[key]++;
    if (hdr_end)
        snprintf(p->last_body, sizeof p->last_body, "%s", hdr_end + 4);
    pthread_mutex_unlock(&p->mu);

    static const char json_ok[] =
        "{\"choices\":[{\"text\":\"abc\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7}}";
    static const char sse_head[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    char out[512];
    switch (p->mode) {
    case PEER_MIXED:
        if (key != LOADGEN_CLASS_HIGH) {
            put(c->fd, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 2\r\n"
                       "Connection: close\r\n\r\n{}");
            break;
        }
        /* fall through */
    case PEER_JSON:
        snprintf(out, sizeof out,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n%s", strlen(json_ok), json_ok);
        put(c->fd, out);
        break;
    case PEER_BAD:
        put(c->fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        break;
    case PEER_SLOW:
        usleep(600 * 1000);
        put(c->fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        break;
    case PEER_STREAM:
    case PEER_STREAM_ERR:
    case PEER_NO_USAGE:
        put(c->fd, sse_head);
        put(c->fd, "data: {\"choices\":[{\"text\":\"\"}]}\n\n"); /* held back: no content */
        for (int i = 0; i < 3; i++) {
            usleep(20 * 1000);
            put(c->fd, "data: {\"choices\":[{\"text\":\"x\"}]}\n\n");
        }
        if (p->mode == PEER_STREAM_ERR)
            put(c->fd, "data: {\"error\":{\"message\":\"boom\"}}\n\n");
        if (p->mode != PEER_NO_USAGE)
            put(c->fd, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
                       "\"completion_tokens\":3}}\n\n");
        put(c->fd, "data: [DONE]\n\n");
        break;
    }
    close(c->fd);
    free(c);
    return NULL;
}

static void *accept_main(void *arg)
{
    peer *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
        struct timeval tv = {0, 20000};
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(p->fd, &rd);
        if (select(p->fd + 1, &rd, NULL, NULL, &tv) <= 0)
            continue;
        int fd = accept(p->fd, NULL, NULL);
        if (fd < 0)
            continue;
        conn_arg *c = malloc(sizeof *c);
        assert_non_null(c);
        *c = (conn_arg){p, fd};
        assert_true(p->n_conn < 256);
        assert_int_equal(pthread_create(&p->conn[p->n_conn++], NULL, conn_main, c), 0);
    }
}

/* A listening socket on 127.0.0.1 at a free port. */
static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static peer *peer_start(peer_mode mode)
{
    peer *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->mode = mode;
    p->fd = listen_any(&p->port);
    pthread_mutex_init(&p->mu, NULL);
    assert_int_equal(pthread_create(&p->thread, NULL, accept_main, p), 0);
    return p;
}

static void peer_stop(peer *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    for (int i = 0; i < p->n_conn; i++)
        pthread_join(p->conn[i], NULL);
    close(p->fd);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static void config_for(loadgen_config *cfg, char *url, size_t cap, int port, const int *levels,
                       int n_levels, int requests)
{
    loadgen_config_default(cfg);
    snprintf(url, cap, "http://127.0.0.1:%d", port);
    cfg->url = url;
    cfg->levels = levels;
    cfg->n_levels = n_levels;
    cfg->requests = requests;
    cfg->prompt_len = 10;
    cfg->max_tokens = 3;
    cfg->timeout_s = 10;
    cfg->deadline_s = 30;
}

static int errors_of(const loadgen_level *l, int code)
{
    for (int k = 0; k < l->n_err_kinds; k++)
        if (l->err_code[k] == code)
            return l->err_count[k];
    return 0;
}

static void test_run_stream(void **state)
{
    (void)state;
    peer *p = peer_start(PEER_STREAM);
    static const int levels[] = {1, 4};
    loadgen_config cfg;
    char url[64];
    config_for(&cfg, url, sizeof url, p->port, levels, 2, 6);
    cfg.stream = true;
    cfg.shared_prefix = 5;
    cfg.model = "m1";
    loadgen_result r;
    ts_error err = {0};
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_OK);
    assert_int_equal(r.n_levels, 2);
    assert_false(r.deadline_hit);
    assert_false(r.mixed);
    for (int i = 0; i < 2; i++) {
        const loadgen_level *l = &r.levels[i];
        assert_int_equal(l->concurrency, levels[i]);
        assert_int_equal(l->all.sent, 6);
        assert_int_equal(l->all.ok, 6);
        assert_int_equal(l->n_err_kinds, 0);
        assert_int_equal(l->all.output_tokens, 18);
        assert_int_equal(l->all.prompt_tokens, 24);
        /* three chunks 20 ms apart after a 20 ms wait: TTFT >= 20, two gaps >= 20 each */
        assert_true(l->all.ttft_ms.p50 >= 19 && l->all.ttft_ms.p99 < 5000);
        assert_true(l->all.itl_ms.p50 >= 19 && l->all.itl_ms.p50 < 1000);
        assert_true(l->all.latency_ms.p50 >= 59);
        assert_true(l->wall_s > 0 && l->output_tok_s > 0);
        assert_near(l->req_s, 6 / l->wall_s, 1e-9);
        assert_near(l->output_tok_s, 18 / l->wall_s, 1e-9);
    }
    /* four at once finish faster than one at a time */
    assert_true(r.levels[1].wall_s < r.levels[0].wall_s);
    assert_int_equal(p->requests, 12);
    assert_int_equal(p->by_key[LOADGEN_CLASS_COUNT], 12); /* no keys, no Authorization */
    cJSON *body = cJSON_Parse(p->last_body);
    assert_non_null(body);
    assert_string_equal(cJSON_GetObjectItem(body, "model")->valuestring, "m1");
    assert_int_equal(count_words(cJSON_GetObjectItem(body, "prompt")->valuestring), 15);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(body, "stream")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(body, "ignore_eos")));
    assert_true(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(body, "stream_options"), "include_usage")));
    assert_int_equal(cJSON_GetObjectItem(body, "max_tokens")->valueint, 3);
    cJSON_Delete(body);

    cJSON *j = loadgen_result_json(&r, &cfg);
    assert_non_null(j);
    cJSON *l1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "levels"), 1);
    assert_int_equal(cJSON_GetObjectItem(l1, "concurrency")->valueint, 4);
    assert_near(cJSON_GetObjectItem(l1, "output_tok_s")->valuedouble, r.levels[1].output_tok_s,
                        1e-9);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(l1, "itl_ms"), "p99"));
    assert_null(cJSON_GetObjectItem(l1, "classes"));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "mix")));
    cJSON_Delete(j);
    peer_stop(p);
}

static void test_run_mixed_keys_and_statuses(void **state)
{
    (void)state;
    peer *p = peer_start(PEER_MIXED);
    static const int levels[] = {3};
    loadgen_config cfg;
    char url[64];
    config_for(&cfg, url, sizeof url, p->port, levels, 1, 40);
    cfg.chat = true;
    loadgen_mix mix;
    loadgen_keys keys;
    assert_int_equal(loadgen_mix_parse(&mix, "high:0.5,normal:0.25,low:0.25", NULL), TS_OK);
    const char *kp = write_tmp("keys_mix.json", "{\"sk-high\": {\"tier\": \"high\"},"
                                                " \"sk-normal\": {\"tier\": \"normal\"},"
                                                " \"sk-low\": {\"tier\": \"low\"}}");
    assert_int_equal(loadgen_keys_load(&keys, kp, NULL), TS_OK);
    cfg.mix = &mix;
    cfg.keys = &keys;
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    const loadgen_level *l = &r.levels[0];
    assert_true(r.mixed);
    int high = l->cls[LOADGEN_CLASS_HIGH].sent;
    assert_int_equal(high + l->cls[LOADGEN_CLASS_NORMAL].sent + l->cls[LOADGEN_CLASS_LOW].sent, 40);
    assert_in_range(high, 10, 30);
    /* each class went out under its own key; only HIGH succeeded */
    assert_int_equal(p->by_key[LOADGEN_CLASS_HIGH], high);
    assert_int_equal(p->by_key[LOADGEN_CLASS_NORMAL], l->cls[LOADGEN_CLASS_NORMAL].sent);
    assert_int_equal(p->by_key[LOADGEN_CLASS_LOW], l->cls[LOADGEN_CLASS_LOW].sent);
    assert_int_equal(l->cls[LOADGEN_CLASS_HIGH].ok, high);
    assert_int_equal(l->cls[LOADGEN_CLASS_LOW].ok, 0);
    assert_int_equal(l->all.ok, high);
    assert_int_equal(errors_of(l, 429), 40 - high);
    assert_int_equal(l->all.output_tokens, 7L * high);
    /* non-stream: TTFT is the whole latency, and there is no ITL */
    assert_near(l->cls[LOADGEN_CLASS_HIGH].ttft_ms.p50,
                        l->cls[LOADGEN_CLASS_HIGH].latency_ms.p50, 1e-9);
    assert_true(isnan(l->all.itl_ms.p50));
    assert_true(isnan(l->cls[LOADGEN_CLASS_LOW].ttft_ms.p99));
    cJSON *body = cJSON_Parse(p->last_body);
    assert_non_null(cJSON_GetObjectItem(body, "messages"));
    assert_null(cJSON_GetObjectItem(body, "stream"));
    cJSON_Delete(body);

    /* The same seed sends the same classes again. */
    loadgen_result r2;
    assert_int_equal(loadgen_run(&r2, &cfg, NULL), TS_OK);
    assert_int_equal(r2.levels[0].cls[LOADGEN_CLASS_HIGH].sent, high);

    cJSON *j = loadgen_result_json(&r, &cfg);
    cJSON *lj = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "levels"), 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(lj, "errors"), "429")->valueint,
                     40 - high);
    cJSON *low = cJSON_GetObjectItem(cJSON_GetObjectItem(lj, "classes"), "low");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(low, "ttft_ms"), "p50")));
    assert_near(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "mix"), "high")->valuedouble,
                        0.5, 1e-12);
    cJSON_Delete(j);
    loadgen_keys_free(&keys);
    peer_stop(p);
}

static void test_run_failures(void **state)
{
    (void)state;
    static const struct { peer_mode mode; int code; } cases[] = {
        {PEER_BAD, LOADGEN_ERR_BAD_RESPONSE},
        {PEER_STREAM_ERR, LOADGEN_ERR_STREAM},
        {PEER_SLOW, LOADGEN_ERR_TIMEOUT},
    };
    static const int levels[] = {2};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        peer *p = peer_start(cases[i].mode);
        loadgen_config cfg;
        char url[64];
        config_for(&cfg, url, sizeof url, p->port, levels, 1, 2);
        cfg.stream = cases[i].mode != PEER_BAD && cases[i].mode != PEER_SLOW;
        cfg.timeout_s = 0.2;
        loadgen_result r;
        assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
        if (errors_of(&r.levels[0], cases[i].code) != 2)
            fail_msg("case %zu: want 2 errors of kind %d", i, cases[i].code);
        assert_int_equal(r.levels[0].all.ok, 0);
        assert_int_equal(r.levels[0].all.output_tokens, 0);
        if (cases[i].mode == PEER_STREAM_ERR) {
            assert_int_equal(r.levels[0].dev_count[LOADGEN_DEV_ERROR_EVENT], 2);
            assert_string_equal(r.levels[0].error_sample, "boom");
            assert_int_equal(r.levels[0].all.failed_chunks, 6); /* 3 each before the error */
        }
        peer_stop(p);
    }

    /* Nobody listening: transport errors. */
    int port;
    int fd = listen_any(&port);
    close(fd);
    loadgen_config cfg;
    char url[64];
    config_for(&cfg, url, sizeof url, port, levels, 1, 3);
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    assert_int_equal(errors_of(&r.levels[0], LOADGEN_ERR_TRANSPORT), 3);
    char buf[16];
    assert_string_equal(loadgen_error_name(LOADGEN_ERR_TRANSPORT, buf, sizeof buf), "transport");
    assert_string_equal(loadgen_error_name(503, buf, sizeof buf), "503");
}

/* A stream without usage is measured all the same: tokens are its content chunks, and the
 * missing parts (usage, finish_reason, the chunk's id/object/...) are counted by name. */
static void test_run_no_usage_measured(void **state)
{
    (void)state;
    peer *p = peer_start(PEER_NO_USAGE);
    static const int levels[] = {2};
    loadgen_config cfg;
    char url[64];
    config_for(&cfg, url, sizeof url, p->port, levels, 1, 3);
    cfg.stream = true;
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    const loadgen_level *l = &r.levels[0];
    assert_int_equal(l->all.ok, 3);
    assert_int_equal(l->n_err_kinds, 0);
    assert_int_equal(l->all.output_tokens, 9);
    assert_true(l->all.itl_ms.p50 >= 19);
    assert_int_equal(l->dev_count[LOADGEN_DEV_MISSING_USAGE], 3);
    assert_int_equal(l->dev_count[LOADGEN_DEV_MISSING_FINISH], 3);
    assert_int_equal(l->dev_count[LOADGEN_DEV_MISSING_FIELDS], 3);
    assert_int_equal(l->dev_count[LOADGEN_DEV_MISSING_DONE], 0);
    assert_int_equal(l->dev_count[LOADGEN_DEV_CONTENT_TYPE], 0);
    cJSON *j = loadgen_result_json(&r, &cfg);
    cJSON *lj = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "levels"), 0);
    cJSON *devs = cJSON_GetObjectItem(lj, "deviations");
    assert_int_equal(cJSON_GetObjectItem(devs, "missing_usage")->valueint, 3);
    assert_null(cJSON_GetObjectItem(devs, "missing_done"));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(lj, "error_sample")));
    cJSON_Delete(j);
    peer_stop(p);
}

static void test_run_deadline(void **state)
{
    (void)state;
    peer *p = peer_start(PEER_SLOW);
    static const int levels[] = {2, 4};
    loadgen_config cfg;
    char url[64];
    config_for(&cfg, url, sizeof url, p->port, levels, 2, 10);
    cfg.deadline_s = 0.3;
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    assert_true(r.deadline_hit);
    assert_int_equal(r.n_levels, 1); /* the second level never started */
    assert_int_equal(r.levels[0].all.sent, 2);
    assert_int_equal(errors_of(&r.levels[0], LOADGEN_ERR_DEADLINE), 2);
    peer_stop(p);
}

static void test_run_refusals(void **state)
{
    (void)state;
    static const int levels[] = {1}, zero[] = {0};
    loadgen_config cfg;
    loadgen_result r;
    ts_error err = {0};
    char url[64];
    config_for(&cfg, url, sizeof url, 9, levels, 1, 1);
    cfg.url = "http://192.0.2.1:8080";
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "not a loopback host"));
    cfg.url = "127.0.0.1:8080";
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);

    config_for(&cfg, url, sizeof url, 9, levels, 1, 1);
    loadgen_mix mix;
    assert_int_equal(loadgen_mix_parse(&mix, "high:1,low:1", NULL), TS_OK);
    cfg.mix = &mix;
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "needs the api keys"));
    loadgen_keys keys;
    assert_int_equal(loadgen_keys_load(&keys, write_tmp("keys_hi.json",
                                                        "{\"a\": {\"tier\": \"high\"}}"), NULL),
                     TS_OK);
    cfg.keys = &keys;
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no low key"));
    loadgen_keys_free(&keys);

    config_for(&cfg, url, sizeof url, 9, zero, 1, 1);
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
    config_for(&cfg, url, sizeof url, 9, levels, 1, 0);
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
    config_for(&cfg, url, sizeof url, 9, levels, 1, 1);
    cfg.prompt_len = 0;
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
    config_for(&cfg, url, sizeof url, 9, levels, 1, 1);
    cfg.timeout_s = NAN;
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_ERR_INVALID_ARG);
}

/* The server's counters are summed over its models' samples; a longer name that starts
 * with the counter's is another counter; a page without them is not a speculating server. */
static void test_spec_counters_summed(void **state)
{
    (void)state;
    const char *page = "# HELP tessera_spec_drafted_tokens_total Draft tokens.\n"
                       "# TYPE tessera_spec_drafted_tokens_total counter\n"
                       "tessera_spec_drafted_tokens_total{model=\"a\"} 40\n"
                       "tessera_spec_drafted_tokens_total{model=\"b\"} 2\n"
                       "tessera_spec_drafted_tokens_total_more{model=\"a\"} 1000\n"
                       "tessera_spec_accepted_tokens_total 30";
    uint64_t v = 7;
    assert_true(loadgen_spec_sum(page, "tessera_spec_drafted_tokens_total", &v));
    assert_int_equal(v, 42);
    assert_true(loadgen_spec_sum(page, "tessera_spec_accepted_tokens_total", &v));
    assert_int_equal(v, 30);
    assert_false(loadgen_spec_sum("llamacpp:tokens_predicted_total 5\n",
                                  "tessera_spec_drafted_tokens_total", &v));
    assert_int_equal(v, 0);
    assert_false(loadgen_spec_sum("", "tessera_spec_drafted_tokens_total", &v));
}

/* The counters by draft source: each source's samples summed over the models, a label
 * value that only starts like the source's is another source; an older page without them
 * still gives the totals. */
static void test_spec_counters_by_source(void **state)
{
    (void)state;
    const char *page =
        "tessera_spec_drafted_tokens_total{model=\"a\"} 50\n"
        "tessera_spec_accepted_tokens_total{model=\"a\"} 31\n"
        "tessera_spec_draft_tokens_total{model=\"a\",source=\"ngram\"} 40\n"
        "tessera_spec_draft_tokens_total{model=\"b\",source=\"ngram\"} 2\n"
        "tessera_spec_draft_tokens_total{model=\"a\",source=\"ngram_x\"} 500\n"
        "tessera_spec_draft_tokens_total{model=\"a\",source=\"draft_model\"} 8\n"
        "tessera_spec_draft_accepted_tokens_total{model=\"a\",source=\"ngram\"} 30\n"
        "tessera_spec_draft_accepted_tokens_total{model=\"a\",source=\"draft_model\"} 1\n";
    loadgen_spec_counts c;
    assert_true(loadgen_spec_read(page, &c));
    assert_int_equal(c.drafted, 50);
    assert_int_equal(c.accepted, 31);
    assert_true(c.by_source);
    assert_int_equal(c.source_drafted[LOADGEN_SPEC_NGRAM], 42);
    assert_int_equal(c.source_accepted[LOADGEN_SPEC_NGRAM], 30);
    assert_int_equal(c.source_drafted[LOADGEN_SPEC_DRAFT_MODEL], 8);
    assert_int_equal(c.source_accepted[LOADGEN_SPEC_DRAFT_MODEL], 1);
    assert_string_equal(loadgen_spec_source_name(LOADGEN_SPEC_DRAFT_MODEL), "draft_model");
    assert_true(loadgen_spec_read("tessera_spec_drafted_tokens_total 5\n"
                                  "tessera_spec_accepted_tokens_total 4\n", &c));
    assert_int_equal(c.drafted, 5);
    assert_false(c.by_source);
    assert_false(loadgen_spec_read("tessera_spec_draft_tokens_total{source=\"ngram\"} 5\n", &c));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles),
        cmocka_unit_test(test_mix_parse),
        cmocka_unit_test(test_mix_pick),
        cmocka_unit_test(test_keys_load),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_sse_every_split),
        cmocka_unit_test(test_sse_limits_and_stop),
        cmocka_unit_test(test_sse_out_of_memory_and_lifetime),
        cmocka_unit_test(test_sse_bom_fields_and_finish),
        cmocka_unit_test(test_check_utf8),
        cmocka_unit_test(test_check_fields),
        cmocka_unit_test(test_spec_counters_summed),
        cmocka_unit_test(test_spec_counters_by_source),
        cmocka_unit_test(test_url_parse),
        cmocka_unit_test(test_url_loopback),
        cmocka_unit_test(test_run_stream),
        cmocka_unit_test(test_run_mixed_keys_and_statuses),
        cmocka_unit_test(test_run_failures),
        cmocka_unit_test(test_run_no_usage_measured),
        cmocka_unit_test(test_run_deadline),
        cmocka_unit_test(test_run_refusals),
    };
    return cmocka_run_group_tests_name("loadgen", tests, NULL, NULL);
}
