/* test_grammar_budget.c: budget-aware closing in the engine (stories260K, whose answers
 * run on forever unless steered): with max_tokens at or just above the fewest tokens that
 * complete the constrained text, every answer of a JSON object, a GBNF grammar and a
 * regex is complete and parses, with finish_reason stop; a budget below that minimum
 * ends with length. */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "engine_util.h"
#include "tessera/grammar.h"
#include "tessera/tokenizer.h"

static const char JSON_GBNF[] =
    "root   ::= \"{\" ws ( pair (\",\" ws pair)* )? \"}\"\n"
    "pair   ::= string \":\" ws value\n"
    "value  ::= \"{\" ws ( pair (\",\" ws pair)* )? \"}\" ws | \"[\" ws ( value (\",\" ws value)* )? \"]\" ws |\n"
    "           string | [0-9]+ ws | (\"true\" | \"false\" | \"null\") ws\n"
    "string ::= \"\\\"\" [a-zA-Z ]* \"\\\"\" ws\n"
    "ws     ::= \" \"?\n";

/* Runs one request of constraint (grammar for TS_CONSTRAINT_GRAMMAR) and returns its
 * result in res. */
static void run(ts_engine *e, ts_constraint_kind kind, ts_grammar *g, int max_tokens,
                float temperature, uint64_t seed, eu_result *res)
{
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n);
    ts_request_params p = eu_seeded(ids, n, max_tokens, temperature, seed);
    p.constraint = kind;
    p.grammar = g;
    ts_request *r = eu_submit_params(e, &p);
    eu_collect(r, res);
    ts_request_release(r);
    free(ids);
    assert_false(res->error);
    assert_int_equal(res->n_done, 1);
    assert_true(res->tokens[0] <= max_tokens);
}

static bool is_object(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    bool ok = s[0] == '{' && cJSON_IsObject(j);
    cJSON_Delete(j);
    return ok;
}

/* json_object and a JSON grammar: from 2 tokens ("{}") up, every answer parses. */
static void test_json_closes_within_budget(void **state)
{
    (void)state;
    ts_engine *e = eu_start(eu_model, NULL);
    ts_grammar *g = NULL;
    ts_error err = {0};
    assert_int_equal(ts_grammar_compile_gbnf(JSON_GBNF, strlen(JSON_GBNF), &g, &err), TS_OK);
    static const float temps[] = {0.8f, 1.5f};
    int longer = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int max_tokens = 2; max_tokens <= 9; max_tokens++)
            for (size_t t = 0; t < 2; t++)
                for (uint64_t seed = 1; seed <= 2; seed++) {
                    eu_result res;
                    run(e, kind ? TS_CONSTRAINT_GRAMMAR : TS_CONSTRAINT_JSON_OBJECT, g,
                        max_tokens, temps[t], seed + (uint64_t)max_tokens * 7, &res);
                    if (!is_object(res.text[0]) || res.finish[0] != TS_FINISH_STOP)
                        fail_msg("%s, max_tokens %d: finish %d, \"%s\"",
                                 kind ? "grammar" : "json_object", max_tokens, res.finish[0],
                                 res.text[0]);
                    longer += strlen(res.text[0]) > 2;
                    eu_result_free(&res);
                }
    assert_true(longer > 10); /* not only "{}": the budget was used */
    ts_grammar_release(g);
    ts_engine_destroy(e);
}

/* A regex whose shortest match is 6 bytes: with 6 tokens and more the answer matches;
 * with fewer it may still fit in longer tokens, and ends with length exactly when it does
 * not match. */
static void test_regex_closes_or_reports_length(void **state)
{
    (void)state;
    ts_engine *e = eu_start(eu_model, NULL);
    const char *re = "[a-z]{3,30}-[0-9]{2,4}";
    ts_grammar *g = NULL;
    ts_error err = {0};
    assert_int_equal(ts_grammar_compile_regex(re, strlen(re), &g, &err), TS_OK);
    regex_t posix;
    assert_int_equal(regcomp(&posix, "^[a-z]{3,30}-[0-9]{2,4}$", REG_EXTENDED | REG_NOSUB), 0);
    int lengths = 0;
    for (int max_tokens = 1; max_tokens <= 10; max_tokens++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            eu_result res;
            run(e, TS_CONSTRAINT_GRAMMAR, g, max_tokens, 1.0f, seed, &res);
            bool match = regexec(&posix, res.text[0], 0, NULL, 0) == 0;
            if (match != (res.finish[0] == TS_FINISH_STOP))
                fail_msg("max_tokens %d: finish %d, \"%s\"", max_tokens, res.finish[0],
                         res.text[0]);
            if (max_tokens >= 6)
                assert_true(match);
            lengths += res.finish[0] == TS_FINISH_LENGTH;
            eu_result_free(&res);
        }
    assert_true(lengths > 0); /* one token cannot hold six bytes here */
    regfree(&posix);
    ts_grammar_release(g);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_closes_within_budget),
        cmocka_unit_test(test_regex_closes_or_reports_length),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
