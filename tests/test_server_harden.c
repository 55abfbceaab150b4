/* test_server_harden.c: the pure pieces of the server's defences against outside
 * attackers (issue 17): log escaping, URL unescaping that keeps %00, the Host / Origin /
 * Content-Type rules, NUL-safe JSON strings, trailing bytes and NUL escapes in bodies,
 * and prefix-cache namespaces in the KV pool. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_controls),
        cmocka_unit_test(test_unescape_keeps_nul),
        cmocka_unit_test(test_host_origin_ctype),
        cmocka_unit_test(test_nul_in_json),
        cmocka_unit_test(test_kv_namespaces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
