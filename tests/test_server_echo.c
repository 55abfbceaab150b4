/* test_server_echo.c: /v1/completions with echo over HTTP: the prompt's tokens and their
 * logprobs before the completion's (the first null), max_tokens 0 scoring without
 * generating, the refusals; and llama.cpp's sampling fields used, not ignored. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine_util.h"
#include "server_util.h"

#define PROMPT "Once upon a time, there was a little girl"

static const cJSON *path(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

static const cJSON *choice0(const sv_answer *a)
{
    return cJSON_GetArrayItem(path(a->json, "choices", NULL), 0);
}

static void post_ok(const char *body, sv_answer *a)
{
    sv_post(sv_group.url, "/v1/completions", body, a);
    if (a->status != 200)
        fail_msg("status %ld: %s", a->status, a->body.s);
    assert_true(a->json || strstr(a->body.s, "data: "));
}

static void test_echo_scores_prompt(void **state)
{
    (void)state;
    int n_p = 0;
    int32_t *ids = eu_tokenize(eu_model, PROMPT, &n_p);
    free(ids);
    sv_answer a;
    post_ok("{\"prompt\":\"" PROMPT "\",\"echo\":true,\"logprobs\":1,\"max_tokens\":0}", &a);
    const cJSON *c = choice0(&a);
    assert_string_equal(path(c, "text", NULL)->valuestring, PROMPT);
    assert_string_equal(path(c, "finish_reason", NULL)->valuestring, "length");
    assert_int_equal(path(a.json, "usage", "completion_tokens")->valueint, 0);
    assert_int_equal(path(a.json, "usage", "prompt_tokens")->valueint, n_p);
    const cJSON *lp = path(c, "logprobs", NULL);
    const cJSON *toks = path(lp, "tokens", NULL), *vals = path(lp, "token_logprobs", NULL);
    const cJSON *tops = path(lp, "top_logprobs", NULL), *offs = path(lp, "text_offset", NULL);
    assert_int_equal(cJSON_GetArraySize(toks), n_p);
    assert_int_equal(cJSON_GetArraySize(vals), n_p);
    assert_int_equal(cJSON_GetArraySize(offs), n_p);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(vals, 0)));
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(tops, 0)));
    /* the last prompt token ends the prompt's text */
    const cJSON *last_tok = cJSON_GetArrayItem(toks, n_p - 1);
    assert_int_equal((size_t)cJSON_GetArrayItem(offs, n_p - 1)->valuedouble +
                         strlen(last_tok->valuestring), strlen(PROMPT));
    assert_true(cJSON_GetArrayItem(offs, 1)->valuedouble == 0.0); /* BOS first, no text */
    double prev_off = -1;
    for (int i = 1; i < n_p; i++) {
        const cJSON *v = cJSON_GetArrayItem(vals, i);
        assert_true(cJSON_IsNumber(v) && v->valuedouble <= 0.0 && v->valuedouble > -50.0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(tops, i)), 1);
        double off = cJSON_GetArrayItem(offs, i)->valuedouble;
        assert_true(off >= prev_off && off <= strlen(PROMPT));
        prev_off = off;
    }

    /* with tokens generated: the same prompt logprobs, then the completion's, which are
     * those of the same request without echo */
    sv_answer g, plain;
    post_ok("{\"prompt\":\"" PROMPT "\",\"echo\":true,\"logprobs\":1,\"max_tokens\":4,"
            "\"temperature\":0}", &g);
    post_ok("{\"prompt\":\"" PROMPT "\",\"logprobs\":1,\"max_tokens\":4,\"temperature\":0}",
            &plain);
    const cJSON *gc = choice0(&g), *pc = choice0(&plain);
    const cJSON *gvals = path(path(gc, "logprobs", NULL), "token_logprobs", NULL);
    const cJSON *pvals = path(path(pc, "logprobs", NULL), "token_logprobs", NULL);
    const cJSON *goffs = path(path(gc, "logprobs", NULL), "text_offset", NULL);
    int n_gen = cJSON_GetArraySize(pvals);
    assert_true(n_gen >= 1);
    assert_int_equal(cJSON_GetArraySize(gvals), n_p + n_gen);
    for (int i = 1; i < n_p; i++)
        assert_true(fabs(cJSON_GetArrayItem(gvals, i)->valuedouble -
                         cJSON_GetArrayItem(vals, i)->valuedouble) < 1e-5);
    for (int k = 0; k < n_gen; k++)
        assert_true(fabs(cJSON_GetArrayItem(gvals, n_p + k)->valuedouble -
                         cJSON_GetArrayItem(pvals, k)->valuedouble) < 1e-5);
    assert_true(cJSON_GetArrayItem(goffs, n_p)->valuedouble == (double)strlen(PROMPT));
    const char *gt = path(gc, "text", NULL)->valuestring;
    assert_memory_equal(gt, PROMPT, strlen(PROMPT));
    assert_string_equal(gt + strlen(PROMPT), path(pc, "text", NULL)->valuestring);
    sv_answer_free(&a);
    sv_answer_free(&g);
    sv_answer_free(&plain);

    /* echo without logprobs: the text only */
    post_ok("{\"prompt\":\"" PROMPT "\",\"echo\":true,\"max_tokens\":0}", &a);
    assert_string_equal(path(choice0(&a), "text", NULL)->valuestring, PROMPT);
    assert_true(cJSON_IsNull(path(choice0(&a), "logprobs", NULL)));
    sv_answer_free(&a);
}

/* The chunks of a completions stream (SSE body): their texts joined into text (cap
 * bytes), their logprob entries counted, the first entry's logprob null or not. */
static void read_stream(const char *body, char *text, size_t cap, int *n_lps, bool *first_null,
                        double *last_lp)
{
    size_t len = 0;
    *n_lps = 0;
    *first_null = false;
    for (const char *p = strstr(body, "data: "); p; p = strstr(p + 1, "data: ")) {
        if (!strncmp(p + 6, "[DONE]", 6))
            break;
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        cJSON *o = cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6));
        assert_non_null(o);
        const cJSON *c = cJSON_GetArrayItem(path(o, "choices", NULL), 0);
        const char *t = path(c, "text", NULL)->valuestring;
        assert_true(len + strlen(t) < cap);
        memcpy(text + len, t, strlen(t));
        len += strlen(t);
        const cJSON *vals = path(path(c, "logprobs", NULL), "token_logprobs", NULL);
        const cJSON *v;
        cJSON_ArrayForEach(v, vals) {
            if (*n_lps == 0)
                *first_null = cJSON_IsNull(v);
            else
                *last_lp = v->valuedouble;
            (*n_lps)++;
        }
        cJSON_Delete(o);
    }
    text[len] = '\0';
}

/* Streamed, the same: the prompt's text first, then a chunk per prompt token's logprobs,
 * then the completion's. */
static void test_echo_streamed(void **state)
{
    (void)state;
    int n_p = 0;
    free(eu_tokenize(eu_model, PROMPT, &n_p));
    sv_answer whole, s;
    post_ok("{\"prompt\":\"" PROMPT "\",\"echo\":true,\"logprobs\":1,\"max_tokens\":3,"
            "\"temperature\":0}", &whole);
    post_ok("{\"prompt\":\"" PROMPT "\",\"echo\":true,\"logprobs\":1,\"max_tokens\":3,"
            "\"temperature\":0,\"stream\":true}", &s);
    char text[1024];
    int n_lps = 0;
    bool first_null = false;
    double last = 0.0;
    read_stream(s.body.s, text, sizeof text, &n_lps, &first_null, &last);
    const cJSON *wc = choice0(&whole);
    const cJSON *wvals = path(path(wc, "logprobs", NULL), "token_logprobs", NULL);
    assert_string_equal(text, path(wc, "text", NULL)->valuestring);
    assert_int_equal(n_lps, cJSON_GetArraySize(wvals));
    assert_true(n_lps > n_p);
    assert_true(first_null);
    assert_true(fabs(last - cJSON_GetArrayItem(wvals, n_lps - 1)->valuedouble) < 1e-5);
    sv_answer_free(&whole);
    sv_answer_free(&s);

    /* scoring only, streamed */
    sv_post(sv_group.url, "/v1/completions",
            "{\"prompt\":\"" PROMPT "\",\"echo\":true,\"logprobs\":0,\"max_tokens\":0,"
            "\"stream\":true}", &s);
    assert_int_equal(s.status, 200);
    read_stream(s.body.s, text, sizeof text, &n_lps, &first_null, &last);
    assert_string_equal(text, PROMPT);
    assert_int_equal(n_lps, n_p);
    assert_non_null(strstr(s.body.s, "\"finish_reason\":\"length\""));
    sv_answer_free(&s);
}

static void expect_400(const char *route, const char *body, const char *param)
{
    sv_answer a;
    sv_post(sv_group.url, route, body, &a);
    assert_int_equal(a.status, 400);
    assert_non_null(a.json);
    assert_string_equal(path(a.json, "error", "param")->valuestring, param);
    sv_answer_free(&a);
}

static void test_echo_refusals(void **state)
{
    (void)state;
    expect_400("/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":0}", "max_tokens");
    expect_400("/v1/completions", "{\"prompt\":\"a\",\"echo\":true,\"n\":2}", "echo");
    expect_400("/v1/completions", "{\"prompt\":\"a\",\"echo\":1}", "echo");
    expect_400("/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":0}",
               "max_tokens");
    expect_400("/v1/completions", "{\"prompt\":\"a\",\"mirostat\":7}", "mirostat");
}

/* llama.cpp's fields are used: the ignored-fields header names only the unknown one. */
static void test_llama_fields_not_ignored(void **state)
{
    (void)state;
    sv_answer a;
    post_ok("{\"prompt\":\"Once\",\"max_tokens\":3,\"repeat_penalty\":1.1,\"typical_p\":0.9,"
            "\"mirostat\":2,\"dry_multiplier\":0.8,\"xtc_probability\":0.5,\"top_n_sigma\":2,"
            "\"min_keep\":1,\"n_probs\":2,\"no_such_field\":1}", &a);
    char *h = sv_header(&a, "X-Tessera-Ignored-Fields");
    assert_non_null(h);
    assert_string_equal(h, "no_such_field");
    free(h);
    /* n_probs asked for two alternatives of each token */
    const cJSON *tops = path(path(choice0(&a), "logprobs", NULL), "top_logprobs", NULL);
    assert_true(cJSON_GetArraySize(tops) >= 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(tops, 0)), 2);
    sv_answer_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_scores_prompt),
        cmocka_unit_test(test_echo_streamed),
        cmocka_unit_test(test_echo_refusals),
        cmocka_unit_test(test_llama_fields_not_ignored),
    };
    return cmocka_run_group_tests_name("server_echo", tests, sv_setup_group,
                                       sv_teardown_group);
}
