/* test_status.c: the status table and the error record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "tessera/status.h"

static void test_every_status_has_a_distinct_message(void **state)
{
    (void)state;
    for (int a = 0; a < TS_STATUS_COUNT; a++) {
        assert_non_null(ts_status_str((ts_status)a));
        for (int b = a + 1; b < TS_STATUS_COUNT; b++)
            assert_string_not_equal(ts_status_str((ts_status)a), ts_status_str((ts_status)b));
    }
    assert_string_equal(ts_status_str(TS_OK), "success");
    assert_string_equal(ts_status_str((ts_status)TS_STATUS_COUNT), "unknown status");
}

static void test_error_set_formats_and_returns_status(void **state)
{
    (void)state;
    ts_error err = {0};
    assert_int_equal(ts_error_set(&err, TS_ERR_FORMAT, "tensor %s: %d", "blk.0", 7), TS_ERR_FORMAT);
    assert_int_equal(err.status, TS_ERR_FORMAT);
    assert_string_equal(err.msg, "tensor blk.0: 7");
    assert_int_equal(ts_error_set(NULL, TS_ERR_IO, "ignored"), TS_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_status_has_a_distinct_message),
        cmocka_unit_test(test_error_set_formats_and_returns_status),
    };
    return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
