/* test_strbuf.c: the growable byte buffer: appends of bytes and of formatted text, the
 * NUL kept after the bytes, growth over many appends, free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/strbuf.h"

static void test_appends_keep_a_nul_after_the_bytes(void **state)
{
    (void)state;
    strbuf b = {0};
    assert_true(strbuf_add(&b, "", 0)); /* an empty append still gives a string */
    assert_non_null(b.s);
    assert_string_equal(b.s, "");
    assert_true(strbuf_add(&b, "ab\0cd", 5)); /* bytes, NULs included */
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.s, "ab\0cd", 6);
    assert_true(strbuf_addf(&b, "-%d-%s", 42, "x"));
    assert_int_equal(b.len, 10);
    assert_memory_equal(b.s, "ab\0cd-42-x", 11);
    assert_false(b.failed);
    strbuf_free(&b);
    assert_null(b.s);
    assert_int_equal(b.len, 0);
    strbuf_free(&b); /* twice is harmless */
}

static void test_grows_over_many_appends(void **state)
{
    (void)state;
    strbuf b = {0};
    for (int i = 0; i < 10000; i++)
        assert_true(strbuf_addf(&b, "%04d,", i % 10000));
    assert_int_equal(b.len, 50000);
    assert_true(b.cap > b.len);
    assert_int_equal(b.s[b.len], '\0');
    assert_memory_equal(b.s + 5 * 1234, "1234,", 5);
    char big[3000];
    memset(big, 'z', sizeof big);
    assert_true(strbuf_add(&b, big, sizeof big)); /* one append past the doubling */
    assert_int_equal(b.len, 53000);
    assert_int_equal(b.s[52999], 'z');
    strbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends_keep_a_nul_after_the_bytes),
        cmocka_unit_test(test_grows_over_many_appends),
    };
    return cmocka_run_group_tests_name("strbuf", tests, NULL, NULL);
}
