/* test_engine_unread.c: bounded buffering for slow readers (max_unread_bytes), the
 * request counters it moves, and their rendering in /metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine_util.h"
#include "server/metrics.h"
#include "util.h"

static ts_engine *start(void)
{
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 4;
    o.kv_blocks = 64;
    return eu_start(eu_model, &o);
}

/* Submits 300 greedy tokens past end-of-generation with the given bound and reads nothing
 * until the engine is idle. */
static ts_request *submit_unread(ts_engine *e, size_t max_unread)
{
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n);
    ts_request_params p = eu_greedy(ids, n, 300);
    p.ignore_eos = true;
    p.max_unread_bytes = max_unread;
    ts_request *req = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_OK);
    free(ids);
    eu_wait_idle(e);
    return req;
}

static void test_unread_output_over_the_limit_cancels(void **state)
{
    (void)state;
    ts_engine *e = start();
    const size_t limit = 8 * TS_EVENT_OVERHEAD;
    ts_request *req = submit_unread(e, limit);
    eu_result r;
    eu_collect(req, &r);
    assert_true(r.error);
    assert_int_equal(r.error_status, TS_ERR_CANCELLED);
    assert_int_equal(r.n_done, 0);
    /* Cancelled as soon as the queue passed the bound: 8 or 9 events, far from 300. */
    assert_in_range(r.tokens[0], 1, 9);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    assert_int_equal(st.requests_submitted, 1);
    assert_int_equal(st.requests_cancelled, 1);
    assert_int_equal(st.requests_failed, 0);
    assert_int_equal(st.requests_completed, 0);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    eu_result_free(&r);
    ts_request_release(req);
    ts_engine_destroy(e);
}

static void test_error_event_says_why(void **state)
{
    (void)state;
    ts_engine *e = start();
    ts_request *req = submit_unread(e, 4096);
    ts_event ev = {0};
    bool seen = false;
    while (ts_request_next_event(req, &ev, 1000) == TS_OK) {
        if (ev.kind == TS_EVENT_ERROR) {
            seen = true;
            assert_non_null(strstr(ev.message, "over the limit of 4096"));
            assert_non_null(strstr(ev.message, "reads too slowly"));
        }
        ts_event_clear(&ev);
    }
    assert_true(seen);
    ts_request_release(req);
    ts_engine_destroy(e);
}

static void test_unbounded_and_large_limits_complete(void **state)
{
    (void)state;
    ts_engine *e = start();
    size_t limits[] = {0, 1 << 20};
    for (int i = 0; i < 2; i++) {
        ts_request *req = submit_unread(e, limits[i]);
        eu_result r;
        eu_collect(req, &r);
        assert_false(r.error);
        assert_int_equal(r.n_done, 1);
        assert_int_equal(r.tokens[0], 300);
        assert_int_equal(r.finish[0], TS_FINISH_LENGTH);
        eu_result_free(&r);
        ts_request_release(req);
    }
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    assert_int_equal(st.requests_completed, 2);
    assert_int_equal(st.requests_cancelled, 0);
    ts_engine_destroy(e);
}

static void test_metrics_render_request_counters(void **state)
{
    (void)state;
    metrics *m = NULL;
    assert_int_equal(metrics_create(&m, NULL), TS_OK);
    metrics_model mm = {.name = "toy"};
    mm.stats.requests_submitted = 10;
    mm.stats.requests_completed = 6;
    mm.stats.requests_failed = 1;
    mm.stats.requests_cancelled = 3;
    char *text = metrics_render(m, &mm, 1);
    assert_non_null(text);
    assert_non_null(strstr(text, "tessera_engine_requests_submitted_total{model=\"toy\"} 10\n"));
    assert_non_null(strstr(text, "tessera_engine_requests_completed_total{model=\"toy\"} 6\n"));
    assert_non_null(strstr(text, "tessera_engine_requests_failed_total{model=\"toy\"} 1\n"));
    assert_non_null(strstr(text, "tessera_engine_requests_cancelled_total{model=\"toy\"} 3\n"));
    assert_non_null(strstr(text, "# TYPE tessera_engine_requests_cancelled_total counter\n"));
    free(text);
    metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unread_output_over_the_limit_cancels),
        cmocka_unit_test(test_error_event_says_why),
        cmocka_unit_test(test_unbounded_and_large_limits_complete),
        cmocka_unit_test(test_metrics_render_request_counters),
    };
    return cmocka_run_group_tests_name("engine_unread", tests, eu_setup_stories,
                                       eu_teardown_stories);
}
