/* test_server_harden.c: the pure pieces of the server's defences against outside
 * attackers (issue 17): log escaping, URL unescaping that keeps %00, the Host / Origin /
 * Content-Type rules, NUL-safe JSON strings, trailing bytes and NUL escapes in bodies,
 * prefix-cache namespaces in the KV pool, and the request-line and header checks that
 * answer 400 as nginx does (reqcheck.h; tests/test_server_http.c sends them for real). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "kv/kv.h"
#include "server/openai.h"
#include "server/origin.h"
#include "server/reqcheck.h"
#include "server/utf8.h"

static void test_escape_controls(void **state)
{
    (void)state;
    char out[64];
    utf8_escape_controls(out, sizeof out, "/\nGET /health\x1b[31m\\\xff\xc3\xa9");
    assert_string_equal(out, "/\\x0aGET /health\\x1b[31m\\x5c\\xff\xc3\xa9");
    /* Cut between characters and escapes only. */
    utf8_escape_controls(out, 7, "ab\ncd");
    assert_string_equal(out, "ab\\x0a");
    utf8_escape_controls(out, 6, "ab\ncd");
    assert_string_equal(out, "ab");
    utf8_escape_controls(out, 4, "a\xc3\xa9z");
    assert_string_equal(out, "a\xc3\xa9");
    utf8_escape_controls(out, 3, "a\xc3\xa9z");
    assert_string_equal(out, "a");
}

static void test_unescape_keeps_nul(void **state)
{
    (void)state;
    char a[] = "/metrics%00x", b[] = "/a%2Fb%zz%4", c[] = "%ff%FE";
    assert_int_equal(utf8_unescape_url(a), strlen("/metrics%00x"));
    assert_string_equal(a, "/metrics%00x");
    utf8_unescape_url(b);
    assert_string_equal(b, "/a/b%zz%4");
    assert_int_equal(utf8_unescape_url(c), 2);
    assert_memory_equal(c, "\xff\xfe", 2);
}

static void test_host_origin_ctype(void **state)
{
    (void)state;
    assert_true(origin_host_ok("127.0.0.1", NULL, "127.0.0.1:8080"));
    assert_true(origin_host_ok("127.0.0.1", NULL, "localhost"));
    assert_true(origin_host_ok("127.0.0.1", NULL, "[::1]:80"));
    assert_true(origin_host_ok("127.0.0.1", NULL, NULL));
    assert_false(origin_host_ok("127.0.0.1", NULL, "evil.example:8080"));
    assert_false(origin_host_ok("127.0.0.1", NULL, "127.0.0.1.evil.example"));
    assert_true(origin_host_ok("127.0.0.1", "a.example, box", "box:8080"));
    assert_true(origin_host_ok("127.0.0.1", "*", "anything"));
    assert_true(origin_host_ok("0.0.0.0", NULL, "evil.example"));
    assert_int_equal(origin_check(NULL, "127.0.0.1:8080", NULL), ORIGIN_NONE);
    assert_int_equal(origin_check(NULL, "127.0.0.1:8080", "http://127.0.0.1:8080"), ORIGIN_SAME);
    assert_int_equal(origin_check(NULL, "127.0.0.1:8080", "http://127.0.0.1:9090"),
                     ORIGIN_REFUSED);
    assert_int_equal(origin_check(NULL, "x", "null"), ORIGIN_REFUSED);
    assert_int_equal(origin_check("*", "x", "null"), ORIGIN_REFUSED);
    assert_int_equal(origin_check("https://a.example", "x", "https://a.example"), ORIGIN_CORS);
    assert_int_equal(origin_check("https://a.example", "x", "https://a.example.evil"),
                     ORIGIN_REFUSED);
    assert_true(origin_content_type_ok(NULL, true));
    assert_true(origin_content_type_ok("application/json; charset=utf-8", true));
    assert_false(origin_content_type_ok("text/plain", false));
    assert_true(origin_content_type_ok("application/x-www-form-urlencoded", false));
    assert_false(origin_content_type_ok("application/x-www-form-urlencoded", true));
}

static void test_nul_in_json(void **state)
{
    (void)state;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "t", oai_bytes_string("a\0b\"\0", 5));
    char *s = cJSON_PrintUnformatted(o);
    assert_string_equal(s, "{\"t\":\"a\\u0000b\\\"\\u0000\"}");
    cJSON *back = cJSON_Parse(s);
    assert_non_null(back);
    free(s);
    cJSON_Delete(back);
    cJSON_Delete(o);

    oai_request r;
    oai_error e;
    const char *nul = "{\"model\": \"m\\u0000x\", \"prompt\": \"a\"}";
    assert_int_equal(oai_parse_request(OAI_COMPLETION, nul, strlen(nul), &r, &e),
                     TS_ERR_INVALID_ARG);
    assert_string_equal(e.param, "model");
    const char *lit = "{\"prompt\": \"a\\\\u0000\"}"; /* an escaped backslash: no NUL */
    assert_int_equal(oai_parse_request(OAI_COMPLETION, lit, strlen(lit), &r, &e), TS_OK);
    oai_request_clear(&r);
    const char *trail = "{\"prompt\": \"a\"} x";
    assert_int_equal(oai_parse_request(OAI_COMPLETION, trail, strlen(trail), &r, &e),
                     TS_ERR_INVALID_ARG);
    const char *ws = "{\"prompt\": \"a\"} \r\n";
    assert_int_equal(oai_parse_request(OAI_COMPLETION, ws, strlen(ws), &r, &e), TS_OK);
    oai_request_clear(&r);
}

/* A block published by a table of one namespace is found by that namespace only. */
static void test_kv_namespaces(void **state)
{
    (void)state;
    kv_config kc = {.n_layers = 1, .n_kv_heads = 1, .head_dim = 4, .dtype = KV_DTYPE_F32,
                    .n_blocks = 8};
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &kc, NULL), TS_OK);
    int32_t tok[2 * TS_KV_BLOCK];
    for (int i = 0; i < 2 * TS_KV_BLOCK; i++)
        tok[i] = i + 1;
    kv_table a, b, c;
    kv_table_init(&a);
    kv_table_init(&b);
    kv_table_init(&c);
    a.ns = 7;
    b.ns = 8;
    c.ns = 7;
    assert_int_equal(kv_table_reserve(pool, &a, 2 * TS_KV_BLOCK, NULL), TS_OK);
    a.n_tokens = 2 * TS_KV_BLOCK;
    bool pub;
    assert_int_equal(kv_prefix_publish(pool, &a, 0, tok, &pub, NULL), TS_OK);
    assert_true(pub);
    int64_t matched = -1;
    assert_int_equal(kv_prefix_lookup(pool, &b, tok, 2 * TS_KV_BLOCK - 1, &matched, NULL), TS_OK);
    assert_int_equal(matched, 0);
    assert_int_equal(kv_prefix_match(pool, tok, 2 * TS_KV_BLOCK), 0); /* namespace 0 */
    assert_int_equal(kv_prefix_lookup(pool, &c, tok, 2 * TS_KV_BLOCK - 1, &matched, NULL), TS_OK);
    assert_int_equal(matched, TS_KV_BLOCK);
    kv_table_free(pool, &a);
    kv_table_free(pool, &b);
    kv_table_free(pool, &c);
    kv_pool_free(pool);
}

static void test_reqcheck_host(void **state)
{
    (void)state;
    const char *good[] = {"localhost", "127.0.0.1:8080", "[::1]", "[::1]:80", "a-b.example",
                          "box:65535", "localhost  "};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!reqcheck_host_ok(good[i], strlen(good[i])))
            fail_msg("refused Host '%s'", good[i]);
    const char *bad[] = {"", "localhost:1:2", "a b", "localhost:", "localhost:123456",
                         "localhost:8o", "[::1", "[]", "[::1]x", "a/b", "a@b", "::1",
                         "127.0.0.1\r"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (reqcheck_host_ok(bad[i], strlen(bad[i])))
            fail_msg("accepted Host '%s'", bad[i]);
    assert_false(reqcheck_host_ok("a\0b", 3)); /* a NUL in the value */
}

static void test_reqcheck_fields(void **state)
{
    (void)state;
    assert_true(reqcheck_field_ok("X-A", 3, "a b\t", 4));
    assert_false(reqcheck_field_ok("X-A", 3, "a\rb", 3));  /* a bare CR */
    assert_false(reqcheck_field_ok("X-A", 3, "a\nb", 3));
    assert_false(reqcheck_field_ok("X-A", 3, "Bearer k\0junk", 13)); /* MHD's length */
    assert_false(reqcheck_field_ok("X A", 3, "a", 1));
    assert_false(reqcheck_field_ok("", 0, "a", 1));
    /* The header block as MHD 0.9.75 leaves it: CR LF (or LF) turned into NULs. */
    const char crlf[] = "A\0x\0\0B\0y\0\0\0\0";
    assert_true(reqcheck_value_whole(crlf + 2, 1, crlf + 5));
    assert_true(reqcheck_value_whole(crlf + 7, 1, NULL));
    const char lf[] = "A\0x\0B\0y\0\0";
    assert_true(reqcheck_value_whole(lf + 2, 1, lf + 4));
    const char cut[] = "A\0k\0junk\0\0B\0k\0junk\0\0\0\0";
    assert_false(reqcheck_value_whole(cut + 2, 1, cut + 10)); /* "k\0junk" */
    assert_false(reqcheck_value_whole(cut + 12, 1, NULL));    /* the last one */
    assert_true(reqcheck_value_whole("", 0, NULL));
}

static void test_reqcheck_line(void **state)
{
    (void)state;
    /* "GET /a HTTP/1.1" as MHD 0.9.75 splits it in place */
    const char ok[] = "GET\0/a\0HTTP/1.1";
    assert_true(reqcheck_line_ok(ok, ok + 4, 2, ok + 7, 1024));
    const char spaces[] = "GET\0  /a\0HTTP/1.1";
    assert_true(reqcheck_line_ok(spaces, spaces + 6, 2, spaces + 9, 1024));
    const char nul_uri[] = "GET\0/a\0junk\0HTTP/1.1"; /* "GET /a\0junk HTTP/1.1" */
    assert_false(reqcheck_line_ok(nul_uri, nul_uri + 4, 2, nul_uri + 12, 1024));
    const char nul_method[] = "GE\0T\0/a\0HTTP/1.1";
    assert_false(reqcheck_line_ok(nul_method, nul_method + 5, 2, nul_method + 8, 1024));
    /* pointers that are not one line are not judged */
    assert_true(reqcheck_line_ok(nul_uri, nul_uri + 4, 2, nul_uri + 12, 4));
    assert_true(reqcheck_line_ok(ok + 7, ok + 4, 2, ok, 1024));
    assert_true(reqcheck_target_ok("/a?b=%00%0d"));
    assert_false(reqcheck_target_ok("/a\rb"));
    assert_false(reqcheck_target_ok("/a\x1b[31m"));
    assert_false(reqcheck_target_ok("/a\x7f"));
}

/* A chat body with one tool whose parameters nest n objects, and (args_depth > 0) an
 * assistant call whose arguments string nests args_depth arrays. malloc'd. */
static char *deep_body(int n, int args_depth)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "string");
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject(), *props = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "object");
        cJSON_AddItemToObject(props, "a", p);
        cJSON_AddItemToObject(o, "properties", props);
        p = o;
    }
    cJSON *root = cJSON_CreateObject(), *tools = cJSON_AddArrayToObject(root, "tools");
    cJSON *t = cJSON_CreateObject(), *fn = cJSON_AddObjectToObject(t, "function");
    cJSON_AddStringToObject(t, "type", "function");
    cJSON_AddStringToObject(fn, "name", "f");
    cJSON_AddItemToObject(fn, "parameters", p);
    cJSON_AddItemToArray(tools, t);
    cJSON *msgs = cJSON_AddArrayToObject(root, "messages"), *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", "hi");
    cJSON_AddItemToArray(msgs, u);
    if (args_depth > 0) {
        char *args = malloc(2 * (size_t)args_depth + 1);
        assert_non_null(args);
        memset(args, '[', (size_t)args_depth);
        memset(args + args_depth, ']', (size_t)args_depth);
        args[2 * args_depth] = '\0';
        cJSON *a = cJSON_CreateObject(), *calls = cJSON_AddArrayToObject(a, "tool_calls");
        cJSON *c = cJSON_CreateObject(), *cf = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(a, "role", "assistant");
        cJSON_AddStringToObject(a, "content", "");
        cJSON_AddStringToObject(c, "id", "c1");
        cJSON_AddStringToObject(c, "type", "function");
        cJSON_AddStringToObject(cf, "name", "f");
        cJSON_AddStringToObject(cf, "arguments", args);
        cJSON_AddItemToArray(calls, c);
        cJSON_AddItemToArray(msgs, a);
        free(args);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    assert_non_null(s);
    return s;
}

/* Tool parameters and call arguments nested past OAI_MAX_JSON_DEPTH are a 400 naming the
 * field at parse, before the chat template (whose tojson stops at 64) could fail with a
 * 500; up to the bound they pass. */
static void test_deep_tools(void **state)
{
    (void)state;
    oai_request r;
    oai_error e;
    char *ok = deep_body(15, 32); /* parameters 31 deep, arguments 32 */
    assert_int_equal(oai_parse_request(OAI_CHAT, ok, strlen(ok), &r, &e), TS_OK);
    oai_request_clear(&r);
    free(ok);
    int deep[] = {16, 31, 200};
    for (size_t i = 0; i < sizeof deep / sizeof *deep; i++) {
        char *b = deep_body(deep[i], 0);
        assert_int_equal(oai_parse_request(OAI_CHAT, b, strlen(b), &r, &e), TS_ERR_INVALID_ARG);
        assert_int_equal(e.http_status, 400);
        assert_string_equal(e.param, "tools[0].function.parameters");
        free(b);
    }
    int args[] = {33, 500};
    for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
        char *b = deep_body(1, args[i]);
        assert_int_equal(oai_parse_request(OAI_CHAT, b, strlen(b), &r, &e), TS_ERR_INVALID_ARG);
        assert_int_equal(e.http_status, 400);
        assert_string_equal(e.param, "messages[1].tool_calls[0].function.arguments");
        free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_controls),
        cmocka_unit_test(test_unescape_keeps_nul),
        cmocka_unit_test(test_host_origin_ctype),
        cmocka_unit_test(test_nul_in_json),
        cmocka_unit_test(test_kv_namespaces),
        cmocka_unit_test(test_reqcheck_host),
        cmocka_unit_test(test_reqcheck_fields),
        cmocka_unit_test(test_reqcheck_line),
        cmocka_unit_test(test_deep_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
