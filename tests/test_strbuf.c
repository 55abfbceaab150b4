/* test_strbuf.c: the growable byte buffer: appends of bytes and of formatted text, the
 * NUL kept after the bytes, growth over many appends, reset, free. */
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
    /* one append larger than the room left, and one that doubles an empty buffer
     * several times over */
    static char big[40000];
    memset(big, 'z', sizeof big);
    size_t room = b.cap - b.len;
    assert_true(sizeof big > room);
    assert_true(strbuf_add(&b, big, sizeof big));
    assert_int_equal(b.len, 90000);
    assert_true(b.cap > b.len);
    assert_memory_equal(b.s + 5 * 9999, "9999,z", 6);
    assert_int_equal(b.s[89999], 'z');
    assert_int_equal(b.s[90000], '\0');
    strbuf_free(&b);

    strbuf c = {0};
    assert_true(strbuf_add(&c, big, 3000));
    assert_int_equal(c.len, 3000);
    assert_true(c.cap > 3000);
    assert_int_equal(c.s[2999], 'z');
    assert_int_equal(c.s[3000], '\0');
    strbuf_free(&c);
}

/* After a failed append the buffer refuses further appends and keeps what it had. */
static void test_failed_buffer_refuses_appends(void **state)
{
    (void)state;
    strbuf b = {0};
    assert_true(strbuf_add(&b, "kept", 4));
    b.failed = true; /* as an allocation failure leaves it */
    assert_false(strbuf_add(&b, "more", 4));
    assert_false(strbuf_addf(&b, "%d", 42));
    assert_int_equal(b.len, 4);
    assert_string_equal(b.s, "kept");
    strbuf_free(&b);
}

/* A reset buffer is empty text with its room kept, ready for appends. */
static void test_reset_keeps_the_room(void **state)
{
    (void)state;
    strbuf b = {0};
    strbuf_reset(&b); /* nothing allocated yet: stays so */
    assert_null(b.s);
    assert_true(strbuf_add(&b, "some text", 9));
    char *s = b.s;
    size_t cap = b.cap;
    strbuf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.s, "");
    assert_ptr_equal(b.s, s);
    assert_int_equal(b.cap, cap);
    assert_true(strbuf_add(&b, "ab", 2));
    assert_string_equal(b.s, "ab");
    strbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends_keep_a_nul_after_the_bytes),
        cmocka_unit_test(test_grows_over_many_appends),
        cmocka_unit_test(test_failed_buffer_refuses_appends),
        cmocka_unit_test(test_reset_keeps_the_room),
    };
    return cmocka_run_group_tests_name("strbuf", tests, NULL, NULL);
}
