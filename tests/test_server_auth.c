/* test_server_auth.c: the API-key file format (malformed files rejected clearly), bearer
 * header checks and the constant-time comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "server/auth.h"
#include "util.h"

static auth_keys *parse_ok(const char *json)
{
    auth_keys *k = NULL;
    ts_error err = {0};
    assert_int_equal(auth_keys_parse(json, strlen(json), &k, &err), TS_OK);
    assert_non_null(k);
    return k;
}

static void expect_bad(const char *json, const char *words)
{
    auth_keys *k = (auth_keys *)1;
    ts_error err = {0};
    assert_int_equal(auth_keys_parse(json, strlen(json), &k, &err), TS_ERR_FORMAT);
    assert_null(k);
    if (!strstr(err.msg, words))
        fail_msg("message '%s' lacks '%s'", err.msg, words);
}

static void test_parse_tiers_and_names(void **state)
{
    (void)state;
    auth_keys *k = parse_ok("{\"sk-high\":{\"tier\":\"high\",\"name\":\"ops\"},"
                            "\"sk-low\":{\"tier\":\"low\"},\"sk-def\":{}}");
    assert_int_equal(auth_keys_count(k), 3);
    const auth_key *e = auth_check(k, "Bearer sk-high");
    assert_non_null(e);
    assert_int_equal(e->tier, TS_PRIORITY_HIGH);
    assert_string_equal(e->name, "ops");
    e = auth_check(k, "bearer   sk-low ");
    assert_non_null(e);
    assert_int_equal(e->tier, TS_PRIORITY_LOW);
    e = auth_check(k, "Bearer sk-def");
    assert_non_null(e);
    assert_int_equal(e->tier, TS_PRIORITY_NORMAL);
    assert_string_equal(e->name, "");
    assert_null(auth_check(k, "Bearer sk-hig"));
    assert_null(auth_check(k, "Bearer sk-high2"));
    assert_null(auth_check(k, "sk-high"));
    assert_null(auth_check(k, "Basic sk-high"));
    assert_null(auth_check(k, "Bearer "));
    assert_null(auth_check(k, NULL));
    assert_null(auth_check(NULL, "Bearer sk-high"));
    auth_keys_free(k);
    auth_keys_free(NULL);
}

static void test_malformed_files(void **state)
{
    (void)state;
    expect_bad("{\"k\":", "not valid JSON");
    expect_bad("[\"k\"]", "must hold an object");
    expect_bad("{}", "no keys");
    expect_bad("{\"k1\":\"high\"}", "must be an object");
    expect_bad("{\"k1\":{\"tier\":\"urgent\"}}", "tier");
    expect_bad("{\"k1\":{\"tier\":1}}", "tier");
    expect_bad("{\"k1\":{\"name\":5}}", "name");
    expect_bad("{\"\":{}}", "printable");
    expect_bad("{\"a b\":{}}", "printable");
    expect_bad("{\"k1\":{},\"k1\":{}}", "repeats");
    char big[600];
    memset(big, 'x', sizeof big);
    memcpy(big, "{\"", 2);
    snprintf(big + 300, sizeof big - 300, "\":{}}");
    expect_bad(big, "printable");
    /* Messages never quote the key itself. */
    auth_keys *k = NULL;
    ts_error err = {0};
    const char *j = "{\"secret-key\":{\"tier\":\"x\"}}";
    assert_int_equal(auth_keys_parse(j, strlen(j), &k, &err), TS_ERR_FORMAT);
    assert_null(strstr(err.msg, "secret-key"));
}

static void test_load_file(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("keys.json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"sk-1\": {\"tier\": \"normal\", \"name\": \"a\"}}", f);
    fclose(f);
    auth_keys *k = NULL;
    ts_error err = {0};
    assert_int_equal(auth_keys_load(path, &k, &err), TS_OK);
    assert_non_null(auth_check(k, "Bearer sk-1"));
    auth_keys_free(k);
    f = fopen(path, "w");
    fputs("{\"sk-1\": {\"tier\": ", f);
    fclose(f);
    assert_int_equal(auth_keys_load(path, &k, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, path));
    remove(path);
    assert_int_equal(auth_keys_load(path, &k, &err), TS_ERR_IO);
    assert_null(k);
}

static void test_constant_time_compare(void **state)
{
    (void)state;
    assert_true(auth_equal_ct("abc", 3, "abc", 3));
    assert_false(auth_equal_ct("abc", 3, "abd", 3));
    assert_false(auth_equal_ct("abc", 3, "ab", 2));
    assert_false(auth_equal_ct("ab", 2, "abc", 3));
    assert_false(auth_equal_ct("", 0, "a", 1));
    assert_true(auth_equal_ct("", 0, "", 0));
    /* Equal prefixes of a longer string do not match. */
    assert_false(auth_equal_ct("abc\0", 4, "abc", 3));
    char a[AUTH_MAX_KEY_LEN + 1], b[AUTH_MAX_KEY_LEN + 1];
    memset(a, 'k', sizeof a);
    memset(b, 'k', sizeof b);
    assert_true(auth_equal_ct(a, AUTH_MAX_KEY_LEN, b, AUTH_MAX_KEY_LEN));
    b[AUTH_MAX_KEY_LEN - 1] = 'j';
    assert_false(auth_equal_ct(a, AUTH_MAX_KEY_LEN, b, AUTH_MAX_KEY_LEN));
    /* Over-long inputs never match, even when equal. */
    assert_false(auth_equal_ct(a, AUTH_MAX_KEY_LEN + 1, a, AUTH_MAX_KEY_LEN + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_tiers_and_names),
        cmocka_unit_test(test_malformed_files),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_constant_time_compare),
    };
    return cmocka_run_group_tests_name("server_auth", tests, NULL, NULL);
}
