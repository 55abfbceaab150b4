/* test_cli_embed.c: `tessera embed` and `tessera bench --embed` run as the user runs them
 * (the built binary through popen) on a tiny qwen3 embedding model that `tessera synth
 * --pooling` writes: one JSON line per input line, in order, the same vectors whatever the
 * batch, errors for empty and over-long lines, and refusals for a model that does not
 * pool. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "util.h"

static char model[4096];

/* Runs `sh -c CMD` with the binary as $T; returns its exit status and its stdout in *out
 * (malloc'd). */
static int run(char **out, const char *fmt, ...)
{
    char cmd[8192], full[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "T=%s/tessera; %s 2>/dev/null", TS_BUILD_DIR, cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t cap = 1 << 20, len = 0, got;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    while ((got = fread(buf + len, 1, cap - len, p)) > 0)
        if ((len += got) == cap) {
            buf = realloc(buf, (cap *= 2) + 1);
            assert_non_null(buf);
        }
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **state)
{
    (void)state;
    snprintf(model, sizeof model, "%s", tu_tmp_path("cli-embed.gguf"));
    char *out = NULL;
    int rc = run(&out, "$T synth --shape qwen3-4b --tiny --pooling mean --vocab %s -o %s",
                 tu_shared("models/stories260K/stories260K.gguf"), model);
    free(out);
    assert_int_equal(rc, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(model);
    return 0;
}

/* The n JSON lines of text into lines[] (parsed; the caller deletes them). */
static void parse_lines(char *text, cJSON **lines, int n)
{
    int i = 0;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        assert_true(i < n);
        lines[i] = cJSON_Parse(l);
        assert_non_null(lines[i]);
        assert_int_equal(cJSON_GetObjectItem(lines[i], "index")->valueint, i);
        i++;
    }
    assert_int_equal(i, n);
}

static void test_lines_in_json_out(void **state)
{
    (void)state;
    char *out = NULL;
    /* line 1 empty, line 3 a repeat of line 0: the same vector */
    int rc = run(&out, "printf 'a cat sat\\n\\nthe dog ran far\\na cat sat\\n' | $T embed -m %s "
                       "--threads 1", model);
    assert_int_equal(rc, 1); /* the empty line */
    cJSON *l[4];
    parse_lines(out, l, 4);
    free(out);
    assert_non_null(cJSON_GetObjectItem(l[1], "error"));
    const cJSON *a = cJSON_GetObjectItem(l[0], "embedding"), *b = cJSON_GetObjectItem(l[2], "embedding"),
                *c = cJSON_GetObjectItem(l[3], "embedding");
    assert_int_equal(cJSON_GetArraySize(a), 64);
    double sq = 0, diff_ab = 0, diff_ac = 0;
    for (int k = 0; k < 64; k++) {
        double x = cJSON_GetArrayItem(a, k)->valuedouble;
        sq += x * x;
        diff_ab += fabs(x - cJSON_GetArrayItem(b, k)->valuedouble);
        diff_ac += fabs(x - cJSON_GetArrayItem(c, k)->valuedouble);
    }
    assert_true(fabs(sq - 1) < 1e-5);
    assert_true(diff_ab > 1e-3);
    assert_true(diff_ac < 1e-5);
    assert_true(cJSON_GetObjectItem(l[0], "tokens")->valueint >= 3);
    for (int i = 0; i < 4; i++)
        cJSON_Delete(l[i]);
}

/* 70 lines in batches of 3 and of 64: the same vectors; a line over the context (256) is an
 * error unless --truncate. */
static void test_batches_and_truncate(void **state)
{
    (void)state;
    char *x = NULL, *y = NULL;
    const char *lines = "for i in $(seq 70); do echo \"line $i of words $((i * 7))\"; done";
    assert_int_equal(run(&x, "%s | $T embed -m %s --batch 3 --threads 1", lines, model), 0);
    assert_int_equal(run(&y, "%s | $T embed -m %s --threads 1", lines, model), 0);
    cJSON *a[70], *b[70];
    parse_lines(x, a, 70);
    parse_lines(y, b, 70);
    for (int i = 0; i < 70; i++) {
        const cJSON *va = cJSON_GetObjectItem(a[i], "embedding"), *vb = cJSON_GetObjectItem(b[i], "embedding");
        for (int k = 0; k < 64; k++)
            assert_true(fabs(cJSON_GetArrayItem(va, k)->valuedouble -
                             cJSON_GetArrayItem(vb, k)->valuedouble) < 1e-5);
        cJSON_Delete(a[i]);
        cJSON_Delete(b[i]);
    }
    free(x);
    free(y);
    const char *longline = "{ for i in $(seq 400); do printf 'w%d ' $i; done; echo; }";
    assert_int_equal(run(&x, "%s | $T embed -m %s --threads 1", longline, model), 1);
    assert_non_null(strstr(x, "limit of 256 tokens"));
    free(x);
    assert_int_equal(run(&x, "%s | $T embed -m %s --threads 1 --truncate", longline, model), 0);
    assert_non_null(strstr(x, "\"tokens\":256,"));
    free(x);
}

static void test_bench_embed_and_refusals(void **state)
{
    (void)state;
    char *out = NULL;
    assert_int_equal(run(&out, "$T bench --embed -m %s --threads 1 --prompt-len 20 "
                               "--concurrency 1,4", model), 0);
    assert_non_null(strstr(out, "docs/s"));
    assert_non_null(strstr(out, "documents of 20 tokens"));
    /* a row per batch size, each with a positive rate */
    int batch = 0;
    double docs = 0;
    char *row = strstr(out, "batch ms");
    assert_non_null(row);
    assert_int_equal(sscanf(strchr(row, '\n'), "%d %lf", &batch, &docs), 2);
    assert_int_equal(batch, 1);
    assert_true(docs > 0);
    free(out);
    const char *stories = tu_shared("models/stories260K/stories260K.gguf");
    assert_int_equal(run(&out, "echo hi | $T embed -m %s", stories), 1);
    free(out);
    assert_int_equal(run(&out, "$T bench --embed -m %s --concurrency 1", stories), 1);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_in_json_out),
        cmocka_unit_test(test_batches_and_truncate),
        cmocka_unit_test(test_bench_embed_and_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
