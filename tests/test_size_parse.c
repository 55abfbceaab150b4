/* test_size_parse.c: byte sizes as options give them: suffixes, fractions that must come
 * to whole bytes, overflow, and the errors of malformed text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/size_parse.h"

static void test_sizes_with_suffixes_and_fractions(void **state)
{
    (void)state;
    size_t v = 0;
    ts_error err = {0};
    assert_int_equal(size_parse(&v, "512M", &err), TS_OK);
    assert_int_equal(v, (size_t)512 << 20);
    assert_int_equal(size_parse(&v, "2G", NULL), TS_OK);
    assert_int_equal(v, (size_t)2 << 30);
    assert_int_equal(size_parse(&v, "1.5G", NULL), TS_OK);
    assert_int_equal(v, (size_t)3 << 29);
    assert_int_equal(size_parse(&v, "4096K", NULL), TS_OK);
    assert_int_equal(v, (size_t)4096 << 10);
    assert_int_equal(size_parse(&v, "123456", NULL), TS_OK);
    assert_int_equal(v, 123456);
    assert_int_equal(size_parse(&v, "1t", NULL), TS_OK);
    assert_int_equal(v, (size_t)1 << 40);
    assert_int_equal(size_parse(&v, "2GiB", NULL), TS_OK);
    assert_int_equal(v, (size_t)2 << 30);
    assert_int_equal(size_parse(&v, "64kb", NULL), TS_OK);
    assert_int_equal(v, 65536);
    assert_int_equal(size_parse(&v, "0.25K", NULL), TS_OK);
    assert_int_equal(v, 256);
    /* eight fraction digits of a T: frac * 2^40 is past 64 bits unless reduced first */
    assert_int_equal(size_parse(&v, "0.99609375T", NULL), TS_OK);
    assert_int_equal(v, (size_t)1095216660480ULL);
    assert_int_equal(size_parse(&v, "1.5000000000000K", NULL), TS_OK); /* zeros past 9 */
    assert_int_equal(v, 1536);

    const char *bad[] = {"", " ", "abc", "-1", "12X", "1.", ".5G", "1e9", "5G junk", "G",
                         "1.5", "0.3K", "99999999999999999999", "20000000000T", "1..5M",
                         "1.0000000001K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (ts_error){0};
        v = 7;
        assert_int_equal(size_parse(&v, bad[i], &err), TS_ERR_INVALID_ARG);
        assert_int_equal(v, 0);
        assert_true(strlen(err.msg) > 0);
    }
    assert_int_equal(size_parse(&v, NULL, NULL), TS_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_with_suffixes_and_fractions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
