/* test_openai_sampling.c: llama.cpp's and vLLM's sampling fields in OpenAI request bodies:
 * read into the sampling parameters, refused by name out of range, never listed as
 * ignored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "server/openai.h"

static ts_status parse(oai_kind kind, const char *body, oai_request *r, oai_error *e)
{
    return oai_parse_request(kind, body, strlen(body), r, e);
}

static void expect_reject(oai_kind kind, const char *body, const char *param)
{
    oai_request r;
    oai_error e;
    assert_int_equal(parse(kind, body, &r, &e), TS_ERR_INVALID_ARG);
    assert_int_equal(e.http_status, 400);
    assert_string_equal(e.param, param);
    assert_non_null(strstr(e.message, param));
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_fields_read(void **state)
{
    (void)state;
    const char *body =
        "{" MSG ",\"repeat_penalty\":1.3,\"repeat_last_n\":-1,\"typical_p\":0.9,"
        "\"top_n_sigma\":1.5,\"min_keep\":2,\"xtc_probability\":0.4,\"xtc_threshold\":0.2,"
        "\"mirostat\":2,\"mirostat_tau\":4,\"mirostat_eta\":0.2,\"dry_multiplier\":0.8,"
        "\"dry_base\":2,\"dry_allowed_length\":3,\"dry_penalty_last_n\":128,"
        "\"dry_sequence_breakers\":[\"\\n\",\"###\"],\"n_probs\":3,\"unknown_x\":1}";
    oai_request r;
    oai_error e;
    assert_int_equal(parse(OAI_CHAT, body, &r, &e), TS_OK);
    const ts_sampling_params *p = &r.sampling;
    assert_true(p->repetition_penalty == 1.3f);
    assert_int_equal(p->repeat_last_n, -1);
    assert_true(p->typical_p == 0.9f);
    assert_true(p->top_n_sigma == 1.5f);
    assert_int_equal(p->min_keep, 2);
    assert_true(p->xtc_probability == 0.4f && p->xtc_threshold == 0.2f);
    assert_int_equal(p->mirostat, 2);
    assert_true(p->mirostat_tau == 4.0f && p->mirostat_eta == 0.2f);
    assert_true(p->dry_multiplier == 0.8f && p->dry_base == 2.0f);
    assert_int_equal(p->dry_allowed_length, 3);
    assert_int_equal(p->dry_penalty_last_n, 128);
    assert_int_equal(p->n_dry_breakers, 2);
    assert_string_equal(p->dry_breakers[0], "\n");
    assert_string_equal(p->dry_breakers[1], "###");
    assert_true(p->logprobs);
    assert_int_equal(p->top_logprobs, 3);
    assert_string_equal(r.ignored, "unknown_x"); /* only the unknown field */
    oai_request_clear(&r);

    /* defaults: off, with llama.cpp's parameters; [] turns the breakers off */
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":\"a\",\"dry_sequence_breakers\":[]}",
                           &r, &e), TS_OK);
    assert_true(r.sampling.typical_p == 1.0f && r.sampling.mirostat == 0);
    assert_true(r.sampling.dry_multiplier == 0.0f && r.sampling.xtc_probability == 0.0f);
    assert_int_equal(r.sampling.n_dry_breakers, 0);
    assert_false(r.sampling.logprobs);
    assert_string_equal(r.ignored, "");
    oai_request_clear(&r);

    /* n_probs agreeing with a completion's logprobs */
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":2,\"n_probs\":2}",
                           &r, &e), TS_OK);
    assert_int_equal(r.sampling.top_logprobs, 2);
    oai_request_clear(&r);
}

static void test_fields_refused(void **state)
{
    (void)state;
    expect_reject(OAI_CHAT, "{" MSG ",\"typical_p\":0}", "typical_p");
    expect_reject(OAI_CHAT, "{" MSG ",\"mirostat\":3}", "mirostat");
    expect_reject(OAI_CHAT, "{" MSG ",\"mirostat\":1.5}", "mirostat");
    expect_reject(OAI_CHAT, "{" MSG ",\"mirostat_eta\":\"x\"}", "mirostat_eta");
    expect_reject(OAI_CHAT, "{" MSG ",\"xtc_probability\":2}", "xtc_probability");
    expect_reject(OAI_CHAT, "{" MSG ",\"min_keep\":-1}", "min_keep");
    expect_reject(OAI_CHAT, "{" MSG ",\"min_keep\":1e12}", "min_keep");
    expect_reject(OAI_CHAT, "{" MSG ",\"top_n_sigma\":1000}", "top_n_sigma");
    expect_reject(OAI_CHAT, "{" MSG ",\"dry_base\":-1}", "dry_base");
    expect_reject(OAI_CHAT, "{" MSG ",\"dry_penalty_last_n\":-5}", "dry_penalty_last_n");
    expect_reject(OAI_CHAT, "{" MSG ",\"dry_sequence_breakers\":\"\\n\"}",
                  "dry_sequence_breakers");
    expect_reject(OAI_CHAT, "{" MSG ",\"dry_sequence_breakers\":[\"\"]}",
                  "dry_sequence_breakers");
    expect_reject(OAI_CHAT, "{" MSG ",\"dry_sequence_breakers\":[1]}", "dry_sequence_breakers");
    expect_reject(OAI_CHAT,
                  "{" MSG ",\"dry_sequence_breakers\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\","
                  "\"g\",\"h\",\"i\"]}",
                  "dry_sequence_breakers");
    expect_reject(OAI_CHAT,
                  "{" MSG ",\"dry_sequence_breakers\":[\"0123456789012345678901234567890123\"]}",
                  "dry_sequence_breakers");
    expect_reject(OAI_CHAT, "{" MSG ",\"repeat_penalty\":1.2,\"repetition_penalty\":1.1}",
                  "repeat_penalty");
    expect_reject(OAI_CHAT, "{" MSG ",\"repeat_penalty\":0}", "repetition_penalty");
    expect_reject(OAI_CHAT, "{" MSG ",\"repeat_last_n\":-2}", "repeat_last_n");
    expect_reject(OAI_CHAT, "{" MSG ",\"n_probs\":21}", "n_probs");
    expect_reject(OAI_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":1,\"n_probs\":3}", "n_probs");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_read),
        cmocka_unit_test(test_fields_refused),
    };
    return cmocka_run_group_tests_name("openai_sampling", tests, NULL, NULL);
}
