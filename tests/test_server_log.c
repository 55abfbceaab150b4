/* test_server_log.c: request ids (taken from the client only when sane, fresh ones
 * distinct) and the log line formats, text and JSON (src/server/log.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "server/log.h"

static void test_request_ids(void **state)
{
    (void)state;
    char id[SRV_REQUEST_ID_CAP], other[SRV_REQUEST_ID_CAP];
    srv_request_id(id, "abc-123_x.y:z", 1);
    assert_string_equal(id, "abc-123_x.y:z");
    char longest[65];
    memset(longest, 'a', 64);
    longest[64] = '\0';
    srv_request_id(id, longest, 1);
    assert_string_equal(id, longest);
    /* Refused: empty, 65 bytes, white space, a newline or quote (log and header
     * injection), non-ASCII. Each gives a fresh id. */
    char too_long[66];
    memset(too_long, 'a', 65);
    too_long[65] = '\0';
    const char *bad[] = {NULL, "", too_long, "a b", "a\nb", "a\"b", "caf\xc3\xa9", "a\r"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        srv_request_id(id, bad[i], 7);
        assert_int_equal(strlen(id), 16);
        assert_int_equal(strspn(id, "0123456789abcdef"), 16);
    }
    srv_request_id(other, NULL, 7);
    assert_string_equal(id, other); /* the fresh value decides */
    for (uint64_t v = 0; v < 1000; v++) {
        srv_request_id(id, NULL, v);
        srv_request_id(other, NULL, v + 1);
        assert_string_not_equal(id, other);
    }
}

typedef struct captured {
    char lines[4][1024];
    int n;
} captured;

static void capture(void *user, const char *line)
{
    captured *c = user;
    assert_true(c->n < 4);
    snprintf(c->lines[c->n++], sizeof c->lines[0], "%s", line);
}

/* "2026-11-25T15:18:05.123Z", then end_char */
static void assert_iso_time(const char *s, char end_char)
{
    int y, mo, d, h, mi, sec, ms;
    char z;
    assert_int_equal(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &sec, &ms,
                            &z),
                     8);
    assert_true(y >= 2024 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60);
    assert_int_equal(z, 'Z');
    assert_int_equal(s[10], 'T');
    assert_int_equal(s[24], end_char);
}

static void test_text_lines(void **state)
{
    (void)state;
    captured c = {.n = 0};
    ts_server_options o;
    ts_server_options_default(&o);
    srv_log(&o, &(srv_log_entry){.message = "nobody hears this"}); /* no callback: no call */
    o.log = capture;
    o.log_user = &c;
    srv_log(&o, &(srv_log_entry){.request_id = "r1", .model = "stories", .method = "POST",
                                 .path = "/v1/completions", .status = 200, .prompt_tokens = 5,
                                 .completion_tokens = 16, .duration_ms = 12.34});
    srv_log(&o, &(srv_log_entry){.request_id = "r2", .method = "GET", .path = "/health",
                                 .status = 200, .duration_ms = 0.04,
                                 .message = "connection closed early"});
    srv_log(&o, &(srv_log_entry){.request_id = "r3", .model = "m", .message = "failed: x"});
    srv_log(&o, &(srv_log_entry){.request_id = "r4", .method = "POST", .path = "/v1/completions",
                                 .status = 400, .duration_ms = 0.5, .error_code = "invalid_type",
                                 .error_param = "temperature"});
    assert_int_equal(c.n, 4);
    for (int i = 0; i < 4; i++)
        assert_iso_time(c.lines[i], ' ');
    assert_string_equal(c.lines[0] + 25, "req=r1 model=stories POST /v1/completions 200 "
                                         "prompt_tokens=5 completion_tokens=16 12.3ms");
    assert_string_equal(c.lines[1] + 25, "req=r2 model=- GET /health 200 prompt_tokens=0 "
                                         "completion_tokens=0 0.0ms (connection closed early)");
    assert_string_equal(c.lines[2] + 25, "req=r3 model=m failed: x");
    assert_string_equal(c.lines[3] + 25, "req=r4 model=- POST /v1/completions 400 prompt_tokens=0 "
                                         "completion_tokens=0 0.5ms error=invalid_type "
                                         "param=temperature");
}

static void test_json_lines(void **state)
{
    (void)state;
    captured c = {.n = 0};
    ts_server_options o;
    ts_server_options_default(&o);
    o.log = capture;
    o.log_user = &c;
    o.log_json = true;
    srv_log(&o, &(srv_log_entry){.request_id = "r1", .model = "we\"ird", .method = "POST",
                                 .path = "/v1/chat/completions", .status = 429,
                                 .prompt_tokens = 7, .completion_tokens = 0,
                                 .duration_ms = 3.25, .error_code = "queue_full"});
    srv_log(&o, &(srv_log_entry){.request_id = "r2", .message = "line\nbreak"});
    assert_int_equal(c.n, 2);
    assert_null(strchr(c.lines[0], '\n'));
    assert_null(strchr(c.lines[1], '\n'));
    cJSON *j = cJSON_Parse(c.lines[0]);
    assert_non_null(j);
    assert_iso_time(cJSON_GetObjectItem(j, "time")->valuestring, '\0');
    assert_string_equal(cJSON_GetObjectItem(j, "request_id")->valuestring, "r1");
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "we\"ird");
    assert_string_equal(cJSON_GetObjectItem(j, "method")->valuestring, "POST");
    assert_string_equal(cJSON_GetObjectItem(j, "path")->valuestring, "/v1/chat/completions");
    assert_int_equal(cJSON_GetObjectItem(j, "status")->valueint, 429);
    assert_int_equal(cJSON_GetObjectItem(j, "prompt_tokens")->valueint, 7);
    assert_int_equal(cJSON_GetObjectItem(j, "completion_tokens")->valueint, 0);
    assert_true(cJSON_GetObjectItem(j, "duration_ms")->valuedouble == 3.2);
    assert_null(cJSON_GetObjectItem(j, "message"));
    assert_string_equal(cJSON_GetObjectItem(j, "error_code")->valuestring, "queue_full");
    assert_null(cJSON_GetObjectItem(j, "error_param"));
    cJSON_Delete(j);
    j = cJSON_Parse(c.lines[1]);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "message")->valuestring, "line\nbreak");
    assert_null(cJSON_GetObjectItem(j, "model"));
    assert_null(cJSON_GetObjectItem(j, "status"));
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_text_lines),
        cmocka_unit_test(test_json_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
