/* test_schema_close.c: budget-aware closing of JSON Schema answers. The closing cost of
 * every state met on random walks over generated schemas is 0 exactly where the value may
 * end, and otherwise some byte leads to a state costing at least one less (so the cost is
 * a completion's length, never below the shortest one); and in the engine (stories260K,
 * whose answers run on forever unless steered) every answer with max_tokens from that
 * cost up is complete, valid and ends with stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "engine_util.h"
#include "grammar/schema.h"
#include "schema_check.h"

/* A generated schema as text (the caller frees), or NULL when it does not compile
 * (*s then NULL). pydantic picks the generator. */
static char *generated(uint64_t *rng, bool pydantic, int depth, ts_schema **s)
{
    cJSON *made = pydantic ? sc_pydantic_schema(rng, depth) : sc_random_schema(rng, depth);
    char *json = cJSON_PrintUnformatted(made);
    cJSON_Delete(made);
    *s = NULL;
    if (ts_schema_compile(json, strlen(json), s, NULL, 0, NULL) != TS_OK) {
        free(json);
        return NULL;
    }
    return json;
}

/* Checks the cost at st: zero exactly when the value may end, and otherwise one byte on
 * the way to a completion of that length. */
static void check_cost(const ts_schema *s, const sch_state *st, sch_state *next,
                       const char *text, const char *json)
{
    uint32_t cost = sch_close_cost(s, st);
    if (cost >= SCH_COST_NEVER)
        fail_msg("no closing cost after '%s'\nschema %s", text, json);
    if ((cost == 0) != sch_can_end(s, st))
        fail_msg("cost %u but can_end %d after '%s'\nschema %s", cost, sch_can_end(s, st),
                 text, json);
    if (cost == 0)
        return;
    for (int c = 0; c < 256; c++)
        if (sch_step(s, st, (uint8_t)c, next) && sch_close_cost(s, next) < cost)
            return;
    fail_msg("cost %u after '%s' but no byte lowers it\nschema %s", cost, text, json);
}

/* Walks each schema at random, checking the cost at every state, then follows the cost
 * down from the start and checks that text is valid and as long as the start's cost. */
static void check_schemas(bool pydantic, uint64_t seed, int n_schemas)
{
    sc_init();
    uint64_t rng = seed;
    sch_state *st = malloc(sizeof *st), *next = malloc(sizeof *next);
    assert_non_null(st);
    assert_non_null(next);
    int checked = 0;
    for (int i = 0; i < n_schemas; i++) {
        ts_schema *s;
        char *json = generated(&rng, pydantic, 1 + i % 3, &s);
        if (!json)
            continue;
        cJSON *sch = cJSON_Parse(json);
        for (int w = 0; w < 4; w++) {
            char why[400];
            char *text = sc_random_walk(s, &rng, 4000, why, sizeof why);
            if (!text)
                fail_msg("schema %d: %s\n%s", i, why, json);
            sch_init(st, s);
            for (size_t k = 0;; k++) {
                char saved = text[k];
                text[k] = '\0';
                check_cost(s, st, next, text, json);
                text[k] = saved;
                if (!saved)
                    break;
                assert_true(sch_step(s, st, (uint8_t)saved, next));
                memcpy(st, next, sch_state_size(next));
                checked++;
            }
            free(text);
        }
        /* the shortest completion from the start, byte by byte */
        sch_init(st, s);
        uint32_t cost = sch_close_cost(s, st), n = 0;
        char out[4096];
        while (cost > 0 && n < sizeof out - 1) {
            uint32_t want = cost;
            for (int c = 0; c < 256 && cost == want; c++)
                if (sch_step(s, st, (uint8_t)c, next) && sch_close_cost(s, next) < want) {
                    out[n++] = (char)c;
                    cost = sch_close_cost(s, next);
                    memcpy(st, next, sch_state_size(next));
                }
            out[n] = '\0';
            if (cost == want)
                fail_msg("cost %u after '%s' but no byte lowers it\nschema %s", cost, out, json);
        }
        out[n] = '\0';
        assert_true(sch_can_end(s, st));
        cJSON *v = cJSON_Parse(out);
        char why[400];
        if (!v || !sc_validate(sch, v, why, sizeof why))
            fail_msg("shortest completion '%s' is invalid\nschema %s", out, json);
        cJSON_Delete(v);
        cJSON_Delete(sch);
        ts_schema_release(s);
        free(json);
    }
    assert_true(checked > 1000);
    free(st);
    free(next);
}

static void test_cost_descends_random(void **state)
{
    (void)state;
    check_schemas(false, 0x9E3779B97F4A7C15ULL, 400);
}

static void test_cost_descends_pydantic(void **state)
{
    (void)state;
    check_schemas(true, 0xD1B54A32D192ED03ULL, 400);
}

/* The closing cost of s's start (its shortest value in bytes). */
static uint32_t start_cost(const ts_schema *s)
{
    sch_state *st = malloc(sizeof *st);
    assert_non_null(st);
    sch_init(st, s);
    uint32_t cost = sch_close_cost(s, st);
    free(st);
    return cost;
}

/* Each answer: stop, accepted by the automaton, parsed and valid. */
static void check_answer(const cJSON *sch, const eu_result *res, int max_tokens,
                         const char *json)
{
    if (res->error)
        fail_msg("request failed: %s", res->error_message);
    assert_int_equal(res->n_done, 1);
    assert_true(res->tokens[0] <= max_tokens);
    cJSON *v = cJSON_Parse(res->text[0]);
    char why[400] = "";
    if (res->finish[0] != TS_FINISH_STOP || !v || !sc_validate(sch, v, why, sizeof why))
        fail_msg("max_tokens %d: finish %d, '%s' %s\nschema %s", max_tokens, res->finish[0],
                 res->text[0], why, json);
    cJSON_Delete(v);
}

static void test_engine_closes_within_budget(void **state)
{
    (void)state;
    sc_init();
    ts_engine *e = eu_start(eu_model, NULL);
    uint64_t rng = 0x2545F4914F6CDD1DULL;
    int n_ids = 0, runs = 0, longer = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n_ids);
    static const float temps[] = {0.8f, 1.5f};
    for (int i = 0; i < 16; i++) {
        ts_schema *s;
        char *json = generated(&rng, i % 2 == 0, 1 + i % 2, &s);
        if (!json)
            continue;
        uint32_t least = start_cost(s);
        if (least > 60) { /* keep the test quick */
            ts_schema_release(s);
            free(json);
            continue;
        }
        cJSON *sch = cJSON_Parse(json);
        static const int extra[] = {0, 1, 4, 12};
        for (int k = 0; k < 4; k++) {
            int max_tokens = (int)least + extra[k];
            ts_request_params p = eu_seeded(ids, n_ids, max_tokens, temps[k % 2],
                                            (uint64_t)(i * 4 + k + 1));
            p.constraint = TS_CONSTRAINT_JSON_SCHEMA;
            p.schema = s;
            ts_request *r = eu_submit_params(e, &p);
            eu_result res;
            eu_collect(r, &res);
            check_answer(sch, &res, max_tokens, json);
            longer += strlen(res.text[0]) > least;
            runs++;
            eu_result_free(&res);
            ts_request_release(r);
        }
        cJSON_Delete(sch);
        ts_schema_release(s);
        free(json);
    }
    assert_true(runs >= 24);
    assert_true(longer > 0); /* not only the shortest values: the budget was used */
    free(ids);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_descends_random),
        cmocka_unit_test(test_cost_descends_pydantic),
        cmocka_unit_test(test_engine_closes_within_budget),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
