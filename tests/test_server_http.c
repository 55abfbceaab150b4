/* test_server_http.c: raw requests that nginx answers 400 get 400 from a real server too:
 * two Hosts, none in HTTP/1.1, "Host: localhost:1:2", a NUL or control byte in the request
 * line, a bare CR or a NUL in a header, "Bearer KEY\0junk"; the same requests made well
 * still pass. And every request's memory (its body, /tokenize's and /detokenize's work)
 * counts against the server-wide budget: 503 with Retry-After once it is spent, all of it
 * given back after. Loopback only; every read is bounded by a timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "engine_util.h"
#include "server_util.h"
#include "server/server_internal.h"
#include "tessera/server.h"
#include "util.h"

#define KEY "sk-http-test"

static sv_served g_srv;
static char g_keys[512];

static int setup(void **state)
{
    if (eu_setup_stories(state))
        return -1;
    snprintf(g_keys, sizeof g_keys, "%s", tu_tmp_path("http_keys.json"));
    FILE *f = fopen(g_keys, "w");
    if (!f)
        return -1;
    fputs("{\"" KEY "\": {\"tier\": \"normal\"}}", f);
    if (fclose(f))
        return -1;
    ts_server_options so;
    ts_server_options_default(&so);
    so.api_keys_path = g_keys;
    sv_start(&g_srv, NULL, &so);
    return 0;
}

static int teardown(void **state)
{
    sv_stop(&g_srv);
    unlink(g_keys);
    return eu_teardown_stories(state);
}

/* Sends the n bytes of req on a new loopback connection; returns the answer's status (0
 * when none came within 10 s) and the start of its body in body (cap bytes). */
static int raw_status(const char *req, size_t n, char *body, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)ts_server_port(g_srv.server))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(send(fd, req, n, MSG_NOSIGNAL), (ssize_t)n);
    char buf[2048];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0) {
        got += (size_t)r;
        buf[got] = '\0';
        const char *end = strstr(buf, "\r\n\r\n");
        if (end && strstr(end, "}")) /* the JSON body is in */
            break;
    }
    close(fd);
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, cap, "%s", b ? b + 4 : "");
    return status;
}

#define RAW(lit, body) raw_status(lit, sizeof(lit) - 1, body, sizeof body)

/* Each request, its well-formed twin first: the twin passes, the request gets 400. */
static void test_nginx_400s(void **state)
{
    (void)state;
    static const struct {
        const char *name, *req;
        size_t len;
    } bad[] = {
#define CASE(name, lit) {name, lit, sizeof(lit) - 1}
        CASE("two Hosts", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n"),
        CASE("no Host", "GET /health HTTP/1.1\r\n\r\n"),
        CASE("Host localhost:1:2", "GET /health HTTP/1.1\r\nHost: localhost:1:2\r\n\r\n"),
        CASE("Host with a space", "GET /health HTTP/1.1\r\nHost: local host\r\n\r\n"),
        CASE("NUL in the target", "GET /health\0junk HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        CASE("NUL in the method", "GE\0T /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        CASE("CR in the target", "GET /health\rx HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        CASE("ESC in the target", "GET /health\x1b[2J HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        CASE("bare CR in a header", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\rb\r\n\r\n"),
        CASE("NUL in a header", "GET /health HTTP/1.1\r\nX-A: a\0b\r\nHost: 127.0.0.1\r\n\r\n"),
        CASE("NUL in the last header", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\0b\r\n\r\n"),
        CASE("Bearer KEY NUL junk", "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Authorization: Bearer " KEY "\0junk\r\n\r\n"),
        CASE("Bearer KEY NUL junk, LF", "GET /v1/models HTTP/1.1\nHost: 127.0.0.1\n"
                                        "Authorization: Bearer " KEY "\0junk\n\n"),
#undef CASE
    };
    char body[512];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int st = raw_status(bad[i].req, bad[i].len, body, sizeof body);
        if (st != 400)
            fail_msg("%s: %d, not 400 (%s)", bad[i].name, st, body);
        assert_non_null(strstr(body, "invalid_request"));
    }
}

static void test_well_formed_pass(void **state)
{
    (void)state;
    char body[512];
    assert_int_equal(RAW("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", body), 200);
    assert_int_equal(RAW("GET /health HTTP/1.0\r\n\r\n", body), 200); /* 1.0: no Host needed */
    assert_int_equal(RAW("GET /health HTTP/1.1\nHost: localhost\nX-A: ab\n\n", body), 200);
    assert_int_equal(RAW("GET /health HTTP/1.1\r\nX-A:\r\nHost: [::1]:8080  \r\nX-B: b \r\n\r\n",
                         body), 200);
    assert_int_equal(RAW("GET /he%61lth?a=%00b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", body), 200);
    assert_int_equal(RAW("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Authorization: Bearer " KEY "\r\n\r\n", body), 200);
    assert_int_equal(RAW("GET /v1/models HTTP/1.1\nHost: 127.0.0.1\n"
                         "Authorization: Bearer " KEY "\n\n", body), 200);
    assert_int_equal(RAW("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Authorization: Bearer sk-other\r\n\r\n", body), 401);
}

/* A JSON body {"model": "stories", "prompt": n bytes of text}. malloc'd. */
static char *tokenize_body(size_t n)
{
    char *b = malloc(n + 64);
    assert_non_null(b);
    int at = sprintf(b, "{\"model\": \"stories\", \"prompt\": \"");
    for (size_t i = 0; i < n; i++)
        b[at + i] = "Once upon a time "[i % 17];
    strcpy(b + at + n, "\"}");
    return b;
}

static void expect_busy(const sv_served *s, const char *path, const char *body)
{
    sv_answer a;
    sv_post(s->url, path, body, &a);
    if (a.status != 503)
        fail_msg("%s: %ld, not 503: %.200s", path, a.status, a.body.s);
    assert_non_null(strstr(a.body.s, "server_busy"));
    char *retry = sv_header(&a, "Retry-After");
    assert_non_null(retry);
    assert_string_equal(retry, "1");
    free(retry);
    sv_answer_free(&a);
}

/* With a 256 KiB budget: a small /tokenize passes and answers every token; one whose work
 * would pass the budget, a body past it, and a /detokenize whose text would, are 503
 * server_busy with Retry-After; the budget is all given back once they complete. */
static void test_request_budget(void **state)
{
    (void)state;
    ts_server_options so;
    ts_server_options_default(&so);
    so.max_answers_total = 256 << 10;
    sv_served s;
    sv_start(&s, NULL, &so);

    char *small = tokenize_body(4000);
    sv_answer a;
    sv_post(s.url, "/tokenize", small, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(a.json);
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(a.json, "tokens");
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(a.json, "count");
    assert_true(cJSON_IsArray(tokens) && cJSON_IsNumber(count));
    assert_int_equal(cJSON_GetArraySize(tokens), count->valueint);
    assert_true(count->valueint > 100);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(a.json, "model")->valuestring,
                        "stories");
    sv_answer_free(&a);
    free(small);

    char *big = tokenize_body(64000); /* 64 KB of text: ~1.5 MB of work */
    expect_busy(&s, "/tokenize", big);
    free(big);
    char *huge = tokenize_body(300000); /* the body alone is past the budget */
    expect_busy(&s, "/v1/completions", huge);
    free(huge);
    /* a 16 KB chat body: its JSON tree while parsed (40 bytes a byte) is past 256 KiB */
    strbuf chat = {0};
    strbuf_addf(&chat, "{\"model\": \"stories\", \"max_tokens\": 1, \"messages\": [");
    for (int i = 0; i < 700; i++)
        strbuf_addf(&chat, "%s{\"role\": \"user\", \"content\": \"x\"}", i ? "," : "");
    strbuf_addf(&chat, "]}");
    assert_true(chat.len > 16000 && chat.len < 40000);
    expect_busy(&s, "/v1/chat/completions", chat.s);
    strbuf_free(&chat);
    strbuf d = {0}; /* 20000 tokens of "Once": ~100 KB of text, ~700 KB as JSON at worst */
    strbuf_addf(&d, "{\"model\": \"stories\", \"tokens\": [");
    for (int i = 0; i < 20000; i++)
        strbuf_addf(&d, "%s%d", i ? "," : "", 300 + i % 200);
    strbuf_addf(&d, "]}");
    expect_busy(&s, "/detokenize", d.s);
    strbuf_free(&d);

    /* on_completed gives each request's bytes back; it may run just after the answer */
    for (int i = 0; i < 100 && atomic_load(&s.server->answer_bytes) != 0; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&s.server->answer_bytes), 0);
    sv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed_pass),
        cmocka_unit_test(test_nginx_400s),
        cmocka_unit_test(test_request_budget),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = cmocka_run_group_tests_name("server_http", tests, setup, teardown);
    curl_global_cleanup();
    return failed;
}
