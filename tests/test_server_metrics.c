/* test_server_metrics.c: Prometheus text: counters by route and status, cumulative
 * histogram buckets with _sum and _count, per-model engine gauges. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/build_info.h"
#include "server/metrics.h"

static void assert_prometheus_names(const char *t);

/* The value of the sample line that starts with `series ` (exact series text). */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, series, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    fail_msg("no sample '%s'", series);
    return -1;
}

static void test_request_counters(void **state)
{
    (void)state;
    metrics *m = NULL;
    assert_int_equal(metrics_create(&m, NULL), TS_OK);
    metrics_count_request(m, METRICS_ROUTE_CHAT, 200);
    metrics_count_request(m, METRICS_ROUTE_CHAT, 200);
    metrics_count_request(m, METRICS_ROUTE_CHAT, 400);
    metrics_count_request(m, METRICS_ROUTE_HEALTH, 200);
    metrics_count_request(m, METRICS_ROUTE_OTHER, 418);
    metrics_add_tokens(m, 10, 4);
    metrics_add_tokens(m, 5, 1);
    char *t = metrics_render(m, NULL, 0);
    assert_non_null(t);
    assert_prometheus_names(t);
    assert_non_null(strstr(t, "# TYPE tessera_requests_total counter\n"));
    assert_true(sample(t, "tessera_requests_total{route=\"chat_completions\",status=\"200\"}") == 2);
    assert_true(sample(t, "tessera_requests_total{route=\"chat_completions\",status=\"400\"}") == 1);
    assert_true(sample(t, "tessera_requests_total{route=\"health\",status=\"200\"}") == 1);
    assert_true(sample(t, "tessera_requests_total{route=\"other\",status=\"other\"}") == 1);
    assert_true(sample(t, "tessera_prompt_tokens_total") == 15);
    assert_true(sample(t, "tessera_generated_tokens_total") == 5);
    /* tessera_build_info: 1, labelled with what `tessera version` prints. */
    ts_build_info bi;
    ts_build_info_get(&bi);
    char want[256];
    snprintf(want, sizeof want, "tessera_build_info{version=\"%s\",commit=\"%s\",build_type=\"%s\","
             "compiler=\"%s\",kernels=\"%s\",", bi.version, bi.commit, bi.build_type, bi.compiler,
             bi.vector);
    const char *info = strstr(t, want);
    assert_non_null(info);
    const char *eol = strchr(info, '\n');
    assert_non_null(eol);
    assert_memory_equal(eol - 4, "\"} 1", 4);
    assert_true(strlen(bi.version) > 0 && strcmp(bi.version, "unknown") != 0);
    /* Every line is a comment or "series value". */
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(line[0] == '#' || strchr(line, ' '));
    free(t);
    metrics_free(m);
}

static void test_histogram_cumulative(void **state)
{
    (void)state;
    metrics *m = NULL;
    assert_int_equal(metrics_create(&m, NULL), TS_OK);
    metrics_observe(m, METRICS_HIST_TTFT, 0.003);  /* <= 0.005 */
    metrics_observe(m, METRICS_HIST_TTFT, 0.005);  /* le is inclusive */
    metrics_observe(m, METRICS_HIST_TTFT, 0.2);    /* <= 0.25 */
    metrics_observe(m, METRICS_HIST_TTFT, 100.0);  /* +Inf only */
    metrics_observe(m, METRICS_HIST_TTFT, -1.0);   /* ignored */
    metrics_observe(m, METRICS_HIST_ITL, 0.02);
    char *t = metrics_render(m, NULL, 0);
    assert_non_null(t);
    const char *h = "tessera_time_to_first_token_seconds";
    char series[128];
    snprintf(series, sizeof series, "%s_bucket{le=\"0.005\"}", h);
    assert_true(sample(t, series) == 2);
    snprintf(series, sizeof series, "%s_bucket{le=\"0.1\"}", h);
    assert_true(sample(t, series) == 2);
    snprintf(series, sizeof series, "%s_bucket{le=\"0.25\"}", h);
    assert_true(sample(t, series) == 3);
    snprintf(series, sizeof series, "%s_bucket{le=\"30\"}", h);
    assert_true(sample(t, series) == 3);
    snprintf(series, sizeof series, "%s_bucket{le=\"+Inf\"}", h);
    assert_true(sample(t, series) == 4);
    snprintf(series, sizeof series, "%s_count", h);
    assert_true(sample(t, series) == 4);
    snprintf(series, sizeof series, "%s_sum", h);
    assert_float_equal(sample(t, series), 100.208, 1e-9);
    assert_non_null(strstr(t, "# TYPE tessera_time_to_first_token_seconds histogram\n"));
    assert_true(sample(t, "tessera_inter_token_latency_seconds_count") == 1);
    assert_true(sample(t, "tessera_request_duration_seconds_count") == 0);
    assert_true(sample(t, "tessera_request_duration_seconds_bucket{le=\"+Inf\"}") == 0);
    /* Buckets never decrease. */
    double prev = -1;
    for (const char *p = strstr(t, "tessera_inter_token_latency_seconds_bucket"); p;
         p = strstr(p + 1, "tessera_inter_token_latency_seconds_bucket")) {
        double v = strtod(strchr(p, ' ') + 1, NULL);
        assert_true(v >= prev);
        prev = v;
    }
    free(t);
    metrics_free(m);
}

/* Prometheus' naming rule, which promtool checks: a counter's name ends in _total and
 * nothing else's does; every sample belongs to a family with a TYPE line. */
static void assert_prometheus_names(const char *t)
{
    char types[64][96];
    int n = 0;
    for (const char *line = t; *line; line = strchr(line, '\n') + 1) {
        char name[96], type[32];
        if (sscanf(line, "# TYPE %95s %31s", name, type) == 2) {
            size_t len = strlen(name);
            bool total = len > 6 && !strcmp(name + len - 6, "_total");
            if (total != !strcmp(type, "counter"))
                fail_msg("%s is a %s", name, type);
            assert_true(n < 64);
            snprintf(types[n++], sizeof types[0], "%s", name);
        } else if (line[0] != '#') {
            size_t len = strcspn(line, "{ ");
            bool known = false;
            for (int i = 0; i < n && !known; i++) {
                size_t tl = strlen(types[i]);
                /* a histogram's samples add _bucket, _sum or _count to its name */
                known = len >= tl && !strncmp(line, types[i], tl) &&
                        (len == tl || !strncmp(line + tl, "_bucket", 7) ||
                         !strncmp(line + tl, "_sum", 4) || !strncmp(line + tl, "_count", 6));
            }
            if (!known)
                fail_msg("no TYPE for %.*s", (int)len, line);
        }
        if (!strchr(line, '\n'))
            break;
    }
}

static void test_model_gauges(void **state)
{
    (void)state;
    metrics *m = NULL;
    assert_int_equal(metrics_create(&m, NULL), TS_OK);
    metrics_model mm[2] = {{.name = "stories"}, {.name = "we\"ird"}};
    mm[0].stats.queued[TS_PRIORITY_LOW] = 3;
    mm[0].stats.running = 2;
    mm[0].stats.kv_blocks_total = 100;
    mm[0].stats.kv_blocks_free = 90;
    mm[0].stats.kv_blocks_used = 7;
    mm[0].stats.kv_blocks_cached = 3;
    mm[0].stats.prefix_hit_blocks = 1;
    mm[0].stats.prefix_miss_blocks = 3;
    mm[0].stats.preemptions = 5;
    mm[0].stats.threads = 12;
    mm[0].stats.thread_cuts = 2;
    mm[0].stats.spec_drafted = 40;
    mm[0].stats.spec_accepted = 30;
    mm[0].stats.spec_source[TS_SPEC_SOURCE_NGRAM] = (ts_spec_source_stats){32, 28};
    mm[0].stats.spec_source[TS_SPEC_SOURCE_DRAFT_MODEL] = (ts_spec_source_stats){8, 2};
    mm[0].stats.spec_draft_model_seconds = 0.5;
    mm[0].stats.decode_steps.seconds[TS_PHASE_GEMM] = 1.5;
    mm[0].stats.prompt_steps.seconds[TS_PHASE_ATTENTION] = 0.25;
    char *t = metrics_render(m, mm, 2);
    assert_non_null(t);
    assert_true(sample(t, "tessera_queue_depth{model=\"stories\",priority=\"low\"}") == 3);
    assert_true(sample(t, "tessera_queue_depth{model=\"stories\",priority=\"high\"}") == 0);
    assert_true(sample(t, "tessera_running_sequences{model=\"stories\"}") == 2);
    assert_true(sample(t, "tessera_kv_blocks{model=\"stories\",state=\"free\"}") == 90);
    assert_true(sample(t, "tessera_kv_blocks{model=\"stories\",state=\"used\"}") == 7);
    assert_true(sample(t, "tessera_kv_blocks{model=\"stories\",state=\"cached\"}") == 3);
    assert_true(sample(t, "tessera_kv_pool_blocks{model=\"stories\"}") == 100);
    assert_prometheus_names(t);
    assert_true(sample(t, "tessera_prefix_cache_hit_ratio{model=\"stories\"}") == 0.25);
    assert_true(sample(t, "tessera_preemptions_total{model=\"stories\"}") == 5);
    assert_true(sample(t, "tessera_engine_threads{model=\"stories\"}") == 12);
    assert_true(sample(t, "tessera_engine_thread_cuts_total{model=\"stories\"}") == 2);
    assert_true(sample(t, "tessera_spec_drafted_tokens_total{model=\"stories\"}") == 40);
    assert_true(sample(t, "tessera_spec_accepted_tokens_total{model=\"stories\"}") == 30);
    assert_true(sample(t, "tessera_spec_acceptance_ratio{model=\"stories\"}") == 0.75);
    assert_true(sample(t, "tessera_spec_acceptance_ratio{model=\"we_ird\"}") == 0);
    /* by draft source */
    assert_true(sample(t, "tessera_spec_draft_tokens_total{model=\"stories\",source=\"ngram\"}") ==
                32);
    assert_true(sample(t, "tessera_spec_draft_tokens_total{model=\"stories\","
                          "source=\"draft_model\"}") == 8);
    assert_true(sample(t, "tessera_spec_draft_accepted_tokens_total{model=\"stories\","
                          "source=\"ngram\"}") == 28);
    assert_true(sample(t, "tessera_spec_draft_accepted_tokens_total{model=\"stories\","
                          "source=\"draft_model\"}") == 2);
    assert_true(sample(t, "tessera_spec_draft_acceptance_ratio{model=\"stories\","
                          "source=\"ngram\"}") == 0.875);
    assert_true(sample(t, "tessera_spec_draft_acceptance_ratio{model=\"stories\","
                          "source=\"draft_model\"}") == 0.25);
    assert_true(sample(t, "tessera_spec_draft_acceptance_ratio{model=\"we_ird\","
                          "source=\"draft_model\"}") == 0);
    assert_true(sample(t, "tessera_spec_draft_model_seconds_total{model=\"stories\"}") == 0.5);
    assert_true(sample(t, "tessera_engine_step_seconds_total{model=\"stories\",kind=\"decode\","
                          "phase=\"gemm\"}") == 1.5);
    assert_true(sample(t, "tessera_engine_step_seconds_total{model=\"stories\",kind=\"prompt\","
                          "phase=\"attention\"}") == 0.25);
    assert_true(sample(t, "tessera_engine_step_seconds_total{model=\"stories\",kind=\"prompt\","
                          "phase=\"gemm\"}") == 0);
    /* A quote in a model name cannot break the label. */
    assert_true(sample(t, "tessera_running_sequences{model=\"we_ird\"}") == 0);
    free(t);
    metrics_free(m);
    metrics_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_counters),
        cmocka_unit_test(test_histogram_cumulative),
        cmocka_unit_test(test_model_gauges),
    };
    return cmocka_run_group_tests_name("server_metrics", tests, NULL, NULL);
}
