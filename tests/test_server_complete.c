/* test_server_complete.c: completion requests through a real in-process server (stories260K,
 * loopback, a free port, libcurl): whole answers and streams agree on the text and the
 * text offsets, held-back text included; default max_tokens fit a small KV pool; what
 * requests cancelled at shutdown are answered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <pthread.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "common/strbuf.h"
#include "engine_util.h"
#include "server_util.h"
#include "tessera/server.h"

/* An engine on eu_model with eo (NULL: the defaults) behind a server on a free port. */
static void serve_start(sv_served *s, const ts_engine_options *eo, int grace_ms)
{
    ts_server_options so;
    ts_server_options_default(&so);
    so.grace_ms = grace_ms;
    sv_start(s, eo, &so);
}

/* POSTs body to route and returns the HTTP status, or -1 when no answer came; *out gets
 * the body, NUL-terminated (strbuf_free it). Asserts nothing: threads may call it. */
static long post_raw(const sv_served *s, const char *route, const char *body, strbuf *out)
{
    char url[128];
    snprintf(url, sizeof url, "%s%s", s->url, route);
    CURL *c = curl_easy_init();
    *out = (strbuf){0};
    if (!c)
        return -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(c);
    long status = -1;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        strbuf_addf(out, "%s", curl_easy_strerror(rc));
    curl_easy_cleanup(c);
    strbuf_add(out, "", 0); /* a NUL-terminated body even when it is empty */
    return out->failed ? -1 : status;
}

static long post(const sv_served *s, const char *route, const char *body, strbuf *out)
{
    long status = post_raw(s, route, body, out);
    if (status < 0)
        fail_msg("POST %s: %s", route, out->s ? out->s : "out of memory");
    return status;
}

/* The parsed JSON answer of a request that must succeed. */
static cJSON *post_ok(const sv_served *s, const char *route, const char *body)
{
    strbuf b;
    long status = post(s, route, body, &b);
    if (status != 200)
        fail_msg("POST %s %s: %ld %s", route, body, status, b.s);
    cJSON *j = cJSON_Parse(b.s);
    strbuf_free(&b);
    assert_non_null(j);
    return j;
}

static const cJSON *get(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v)
        fail_msg("no '%s'", name);
    return v;
}

static const cJSON *choice0(const cJSON *answer)
{
    const cJSON *c = cJSON_GetArrayItem(get(answer, "choices"), 0);
    assert_non_null(c);
    return c;
}

/* The text of a whole answer's first choice (malloc'd). */
static char *answer_text(const cJSON *answer, bool chat)
{
    const cJSON *c = choice0(answer);
    const cJSON *t = chat ? get(get(c, "message"), "content") : get(c, "text");
    assert_true(cJSON_IsString(t));
    return strdup(t->valuestring);
}

/* What a stream said about its first choice. */
typedef struct streamed {
    strbuf text;          /* the deltas joined */
    const char *finish;   /* static copy of the last finish_reason seen */
    int chunks_after_finish;
} streamed;

/* Streams body from route and joins its chunks. */
static void post_stream(const sv_served *s, const char *route, const char *body, bool chat,
                        streamed *out)
{
    strbuf b;
    long status = post(s, route, body, &b);
    if (status != 200)
        fail_msg("POST %s %s: %ld %s", route, body, status, b.s);
    *out = (streamed){0};
    strbuf_add(&out->text, "", 0);
    static char finish[32];
    bool finished = false, ended = false;
    for (char *line = strtok(b.s, "\n"); line; line = strtok(NULL, "\n")) {
        assert_false(ended);
        if (!strcmp(line, "data: [DONE]")) {
            ended = true;
            continue;
        }
        assert_int_equal(strncmp(line, "data: {", 7), 0);
        cJSON *j = cJSON_Parse(line + 6);
        assert_non_null(j);
        const cJSON *c = cJSON_GetArrayItem(get(j, "choices"), 0);
        if (c) {
            const cJSON *t = chat ? cJSON_GetObjectItem(get(c, "delta"), "content")
                                  : get(c, "text");
            if (finished && t && *t->valuestring)
                out->chunks_after_finish++;
            if (t)
                strbuf_add(&out->text, t->valuestring, strlen(t->valuestring));
            const cJSON *f = get(c, "finish_reason");
            if (cJSON_IsString(f)) {
                snprintf(finish, sizeof finish, "%s", f->valuestring);
                out->finish = finish;
                finished = true;
            }
        }
        cJSON_Delete(j);
    }
    assert_true(ended);
    assert_false(out->text.failed);
    strbuf_free(&b);
}

/* s as a JSON string, quotes included (malloc'd). */
static char *json_quote(const char *s)
{
    cJSON *str = cJSON_CreateString(s);
    char *q = str ? cJSON_PrintUnformatted(str) : NULL;
    cJSON_Delete(str);
    assert_non_null(q);
    return q;
}

/* Where the last UTF-8 character of s starts. */
static size_t last_char(const char *s)
{
    size_t i = strlen(s);
    assert_true(i > 0);
    do
        i--;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
    return i;
}

/* Text the engine holds back until DONE (here: a stop string's prefix at the very end)
 * belongs to the answer, whole or streamed, chat or completion. */
static void test_text_released_at_done(void **state)
{
    (void)state;
    sv_served s;
    serve_start(&s, NULL, 1000);
    static const struct { const char *route, *fields; bool chat; } kinds[] = {
        {"/v1/completions", "\"prompt\": \"Once upon a time\"", false},
        {"/v1/chat/completions", "\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]",
         true},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        char body[512];
        snprintf(body, sizeof body, "{%s, \"max_tokens\": 8, \"temperature\": 0}",
                 kinds[k].fields);
        cJSON *j = post_ok(&s, kinds[k].route, body);
        char *want = answer_text(j, kinds[k].chat);
        cJSON_Delete(j);
        assert_true(strlen(want) > 0);
        /* A stop string that cannot match: the last character, then U+0001. */
        char stop[16];
        snprintf(stop, sizeof stop, "%s\x01", want + last_char(want));
        char *stop_json = json_quote(stop);
        for (int stream = 0; stream < 2; stream++) {
            snprintf(body, sizeof body,
                     "{%s, \"max_tokens\": 8, \"temperature\": 0, \"stop\": [%s], \"stream\": %s}",
                     kinds[k].fields, stop_json, stream ? "true" : "false");
            if (!stream) {
                j = post_ok(&s, kinds[k].route, body);
                char *got = answer_text(j, kinds[k].chat);
                assert_string_equal(get(choice0(j), "finish_reason")->valuestring, "length");
                cJSON_Delete(j);
                assert_string_equal(got, want);
                free(got);
            } else {
                streamed st;
                post_stream(&s, kinds[k].route, body, kinds[k].chat, &st);
                assert_string_equal(st.text.s, want);
                assert_non_null(st.finish);
                assert_string_equal(st.finish, "length");
                assert_int_equal(st.chunks_after_finish, 0);
                strbuf_free(&st.text);
            }
        }
        free(stop_json);
        free(want);
    }
    sv_stop(&s);
}

/* A chat without max_tokens asks for the rest of the context, which a small KV pool cannot
 * hold: the default shrinks to what the pool holds for the prompt and n, and the answer
 * ends for length there. A max_tokens the client gives is still refused when too big. */
static void test_default_max_tokens_fits_the_pool(void **state)
{
    (void)state;
    ts_engine_options eo;
    ts_engine_options_default(&eo);
    eo.kv_blocks = 8; /* 256 tokens, a context of 2048 */
    sv_served s;
    serve_start(&s, &eo, 1000);
    for (int n = 1; n <= 2; n++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"n\": %d,"
                 " \"temperature\": 0, \"ignore_eos\": true}", n);
        cJSON *j = post_ok(&s, "/v1/chat/completions", body);
        int prompt = get(get(j, "usage"), "prompt_tokens")->valueint;
        int each = ts_engine_max_new_tokens(s.engine, (size_t)prompt, n);
        assert_true(each >= 32);
        assert_int_equal(get(get(j, "usage"), "completion_tokens")->valueint, n * each);
        for (int i = 0; i < n; i++)
            assert_string_equal(
                get(cJSON_GetArrayItem(get(j, "choices"), i), "finish_reason")->valuestring,
                "length");
        cJSON_Delete(j);
        /* the default is the pool's real limit: one token more, asked for, is refused */
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"n\": %d,"
                 " \"max_tokens\": %d}", n, each + 1);
        strbuf over;
        assert_int_equal(post(&s, "/v1/chat/completions", body, &over), 400);
        assert_non_null(strstr(over.s, "context_length_exceeded"));
        strbuf_free(&over);
    }
    strbuf b;
    assert_int_equal(post(&s, "/v1/chat/completions",
                          "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
                          " \"max_tokens\": 1000}", &b),
                     400);
    cJSON *j = cJSON_Parse(b.s);
    strbuf_free(&b);
    assert_non_null(j);
    assert_string_equal(get(get(j, "error"), "code")->valuestring, "context_length_exceeded");
    assert_non_null(strstr(get(get(j, "error"), "message")->valuestring, "the pool has 8"));
    cJSON_Delete(j);
    /* Completions keep OpenAI's default of 16. */
    j = post_ok(&s, "/v1/completions", "{\"prompt\": \"Hi\", \"ignore_eos\": true}");
    assert_int_equal(get(get(j, "usage"), "completion_tokens")->valueint, 16);
    cJSON_Delete(j);
    sv_stop(&s);
}

/* The text_offset of every token of a completion with logprobs, whole or streamed, in
 * offs (up to 64); returns their count and puts the text in *text (malloc'd). */
static int text_offsets(const sv_served *s, const char *body, bool stream, int *offs,
                        char **text)
{
    int n = 0;
    if (!stream) {
        cJSON *j = post_ok(s, "/v1/completions", body);
        const cJSON *a = get(get(choice0(j), "logprobs"), "text_offset");
        for (const cJSON *o = a->child; o; o = o->next) {
            assert_true(n < 64);
            offs[n++] = o->valueint;
        }
        *text = answer_text(j, false);
        cJSON_Delete(j);
        return n;
    }
    strbuf b;
    assert_int_equal(post(s, "/v1/completions", body, &b), 200);
    strbuf all = {0};
    strbuf_add(&all, "", 0);
    for (char *line = strtok(b.s, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7))
            continue;
        cJSON *j = cJSON_Parse(line + 6);
        assert_non_null(j);
        const cJSON *c = choice0(j);
        strbuf_add(&all, get(c, "text")->valuestring, strlen(get(c, "text")->valuestring));
        const cJSON *lp = get(c, "logprobs");
        if (!cJSON_IsNull(lp)) /* the text released at the end comes with no token */
            for (const cJSON *o = get(lp, "text_offset")->child; o; o = o->next) {
                assert_true(n < 64);
                offs[n++] = o->valueint;
            }
        cJSON_Delete(j);
    }
    strbuf_free(&b);
    assert_false(all.failed);
    *text = all.s;
    return n;
}

/* text_offset is where a token's text starts in what was emitted, whole or streamed, so a
 * token whose text is held back (here the first, the beginning of a stop string) starts
 * where the next one's does. */
static void test_text_offsets_agree(void **state)
{
    (void)state;
    sv_served s;
    serve_start(&s, NULL, 1000);
    const char *plain = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": 0,"
                        " \"logprobs\": 1}";
    cJSON *j = post_ok(&s, "/v1/completions", plain);
    const cJSON *toks = get(get(choice0(j), "logprobs"), "tokens");
    char stop[16];
    const char *first = cJSON_GetArrayItem(toks, 0)->valuestring;
    int held = (int)last_char(first); /* the first token's text up to its last character */
    snprintf(stop, sizeof stop, "%s\x01", first + held);
    char *want = answer_text(j, false);
    cJSON_Delete(j);
    char *stop_json = json_quote(stop);
    int whole[64], in_stream[64];
    char *text[2];
    char body[512];
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body,
                 "{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, \"temperature\": 0,"
                 " \"logprobs\": 1, \"stop\": [%s], \"stream\": %s}",
                 stop_json, stream ? "true" : "false");
        int n = text_offsets(&s, body, stream, stream ? in_stream : whole, &text[stream]);
        assert_int_equal(n, 8);
        assert_string_equal(text[stream], want);
    }
    assert_memory_equal(whole, in_stream, sizeof(int) * 8);
    assert_int_equal(whole[0], 0);
    assert_int_equal(whole[1], held); /* its last character came out with the second's */
    for (int i = 1; i < 8; i++)
        assert_true(whole[i] >= whole[i - 1] && whole[i] <= (int)strlen(want));
    free(text[0]);
    free(text[1]);
    free(stop_json);
    free(want);
    sv_stop(&s);
}

typedef struct posted {
    const sv_served *s;
    const char *body;
    long status;
    strbuf reply;
} posted;

static void *post_thread(void *arg)
{
    posted *p = arg;
    p->status = post_raw(p->s, "/v1/completions", p->body, &p->reply);
    return NULL;
}

/* Waits (bounded) until the engine's published stats satisfy done. */
static void wait_stats(ts_engine *e, bool (*done)(const ts_engine_stats *st))
{
    ts_engine_stats st;
    for (int i = 0;; i++) {
        ts_engine_get_stats(e, &st);
        if (done(&st))
            return;
        if (i == 20000)
            fail_msg("the engine never got there");
        usleep(1000);
    }
}

static bool one_generating(const ts_engine_stats *st)
{
    return st->running == 1 && st->generated_tokens > 0;
}

static bool two_queued(const ts_engine_stats *st)
{
    return st->queued[TS_PRIORITY_NORMAL] == 2;
}

/* Shutdown with no grace: the running request answers what it has, finish_reason
 * "cancelled"; a waiting one, which never made a token, the documented 503; a waiting
 * stream, already answered 200, ends with finish_reason "cancelled" and [DONE]. */
static void test_shutdown_refuses_waiting_requests(void **state)
{
    (void)state;
    ts_engine_options eo;
    ts_engine_options_default(&eo);
    eo.max_seqs = 1;
    sv_served s;
    serve_start(&s, &eo, 0);
    const char *body = "{\"prompt\": \"a\", \"max_tokens\": 1800, \"ignore_eos\": true}";
    const char *stream_body = "{\"prompt\": \"a\", \"max_tokens\": 1800, \"stream\": true}";
    posted p[3] = {{&s, body, 0, {0}}, {&s, body, 0, {0}}, {&s, stream_body, 0, {0}}};
    pthread_t t[3];
    assert_int_equal(pthread_create(&t[0], NULL, post_thread, &p[0]), 0);
    wait_stats(s.engine, one_generating);
    assert_int_equal(pthread_create(&t[1], NULL, post_thread, &p[1]), 0);
    assert_int_equal(pthread_create(&t[2], NULL, post_thread, &p[2]), 0);
    wait_stats(s.engine, two_queued);
    ts_server_stop(s.server);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        if (p[i].status < 0)
            fail_msg("request %d got no answer: %s", i, p[i].reply.s);
    }

    assert_int_equal(p[0].status, 200);
    cJSON *j = cJSON_Parse(p[0].reply.s);
    assert_non_null(j);
    assert_string_equal(get(choice0(j), "finish_reason")->valuestring, "cancelled");
    int made = get(get(j, "usage"), "completion_tokens")->valueint;
    assert_true(made > 0 && made < 1800);
    assert_true(strlen(get(choice0(j), "text")->valuestring) > 0);
    cJSON_Delete(j);

    if (p[1].status != 503)
        fail_msg("the waiting request got %ld %s", p[1].status, p[1].reply.s);
    j = cJSON_Parse(p[1].reply.s);
    assert_non_null(j);
    assert_string_equal(get(get(j, "error"), "type")->valuestring, "server_error");
    assert_string_equal(get(get(j, "error"), "code")->valuestring, "shutting_down");
    cJSON_Delete(j);

    assert_int_equal(p[2].status, 200);
    assert_non_null(strstr(p[2].reply.s, "\"finish_reason\":\"cancelled\""));
    assert_non_null(strstr(p[2].reply.s, "data: [DONE]\n\n"));
    for (int i = 0; i < 3; i++)
        strbuf_free(&p[i].reply);
    sv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_released_at_done),
        cmocka_unit_test(test_default_max_tokens_fits_the_pool),
        cmocka_unit_test(test_shutdown_refuses_waiting_requests),
        cmocka_unit_test(test_text_offsets_agree),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = cmocka_run_group_tests_name("server_complete", tests, eu_setup_stories,
                                             eu_teardown_stories);
    curl_global_cleanup();
    return failed;
}
