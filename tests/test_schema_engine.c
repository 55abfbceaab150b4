/* test_schema_engine.c: JSON-schema constrained completions through the engine on
 * stories260K: random schemas of the subset at random seeds and temperatures give text
 * that parses and validates (schema_check.c's validator) when it stops, and an accepted
 * prefix when max_tokens cuts it; a top-level number ends; n > 1 completions each follow
 * the schema; and a constrained greedy answer is the same alone and among 15 others. */
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

static ts_schema *compile_ok(const char *json)
{
    ts_schema *s = NULL;
    ts_error err = {0};
    if (ts_schema_compile(json, strlen(json), &s, NULL, 0, &err) != TS_OK)
        fail_msg("%s: %s", json, err.msg);
    return s;
}

static ts_request *submit(ts_engine *e, const char *prompt, ts_schema *s, int max_tokens,
                          float temperature, uint64_t seed, int n)
{
    int n_ids = 0;
    int32_t *ids = eu_tokenize(eu_model, prompt, &n_ids);
    ts_request_params p = eu_seeded(ids, n_ids, max_tokens, temperature, seed);
    p.n = n;
    p.constraint = s ? TS_CONSTRAINT_JSON_SCHEMA : TS_CONSTRAINT_NONE;
    p.schema = s;
    ts_request *r = eu_submit_params(e, &p);
    free(ids);
    return r;
}

/* Completion i of res: a valid instance of schema when it stopped; when cut by length, a
 * prefix the automaton accepts. Returns whether it stopped. */
static bool check_result(const ts_schema *s, const cJSON *schema, const eu_result *res, int i)
{
    const char *text = res->text[i];
    if (res->error)
        fail_msg("request failed: %s", res->error_message);
    sch_state *st = malloc(sizeof *st), *next = malloc(sizeof *next);
    sch_init(st, s);
    for (const char *c = text; *c; c++) {
        if (!sch_step(s, st, (uint8_t)*c, next))
            fail_msg("byte %d of '%s' is outside the automaton", (int)(c - text), text);
        memcpy(st, next, sch_state_size(next));
    }
    bool can_end = sch_can_end(s, st);
    free(st);
    free(next);
    if (res->finish[i] != TS_FINISH_STOP) {
        assert_int_equal(res->finish[i], TS_FINISH_LENGTH);
        return false;
    }
    assert_true(can_end);
    cJSON *v = cJSON_Parse(text);
    if (!v)
        fail_msg("stopped but not JSON: '%s'", text);
    char why[300];
    if (!sc_validate(schema, v, why, sizeof why)) {
        char *js = cJSON_PrintUnformatted(schema);
        fail_msg("%s\ntext %s\nschema %s", why, text, js);
    }
    cJSON_Delete(v);
    return true;
}

static void test_engine_random_schemas(void **state)
{
    (void)state;
    sc_init();
    ts_engine *e = eu_start(eu_model, NULL);
    static const float temps[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f};
    static const char *const prompts[] = {"Once upon a time", "Lily had a ball", "{\"name\":"};
    uint64_t rng = 0xD1B54A32D192ED03ULL;
    int runs = 0, stops = 0;
    for (int i = 0; i < 48; i++) {
        cJSON *made = sc_random_schema(&rng, 1 + i % 3);
        char *json = cJSON_PrintUnformatted(made);
        cJSON_Delete(made);
        cJSON *sch = cJSON_Parse(json); /* the schema as the compiler reads it */
        ts_schema *s = NULL;
        if (ts_schema_compile(json, strlen(json), &s, NULL, 0, NULL) != TS_OK) {
            free(json);
            cJSON_Delete(sch);
            continue; /* an unsatisfiable draw: test_schema covers refusals */
        }
        /* Several requests at once, so constrained sequences share steps. */
        ts_request *r[4];
        for (int k = 0; k < 4; k++)
            r[k] = submit(e, prompts[(i + k) % 3], s, 160, temps[(i + k) % 5],
                          sc_rand(&rng) % 1000, 1);
        ts_schema_release(s); /* the requests hold their own references */
        for (int k = 0; k < 4; k++) {
            eu_result res;
            eu_collect(r[k], &res);
            ts_schema *again = compile_ok(json);
            stops += check_result(again, sch, &res, 0);
            ts_schema_release(again);
            runs++;
            eu_result_free(&res);
            ts_request_release(r[k]);
        }
        free(json);
        cJSON_Delete(sch);
    }
    fprintf(stderr, "%d of %d constrained completions ended their value within 160 tokens\n",
            stops, runs);
    assert_true(runs >= 150);
    assert_true(stops >= runs / 3);
    ts_engine_destroy(e);
}

/* A top-level number ends by itself when no digit may follow, or by end of generation. */
static void test_engine_numbers(void **state)
{
    (void)state;
    ts_engine *e = eu_start(eu_model, NULL);
    static const char *const schemas[] = {
        "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 999}",
        "{\"type\": \"number\", \"exclusiveMinimum\": -0.5, \"exclusiveMaximum\": 0.5}",
        "{\"enum\": [1, 12, 123]}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
        ts_schema *s = compile_ok(schemas[i]);
        cJSON *sch = cJSON_Parse(schemas[i]);
        for (uint64_t seed = 1; seed <= 6; seed++) {
            ts_request *r = submit(e, "The number is", s, 40, seed == 1 ? 0.0f : 1.0f, seed, 1);
            eu_result res;
            eu_collect(r, &res);
            if (!check_result(s, sch, &res, 0))
                fail_msg("%s seed %d: no end in 40 tokens: '%s'", schemas[i], (int)seed, res.text[0]);
            eu_result_free(&res);
            ts_request_release(r);
        }
        cJSON_Delete(sch);
        ts_schema_release(s);
    }
    ts_engine_destroy(e);
}

/* n = 3 completions fork from one prompt; each follows the schema on its own. */
static void test_engine_n(void **state)
{
    (void)state;
    sc_init();
    ts_engine *e = eu_start(eu_model, NULL);
    const char *json = "{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", "
                       "\"sad\"]}, \"age\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}}, "
                       "\"required\": [\"mood\", \"age\"], \"additionalProperties\": false}";
    ts_schema *s = compile_ok(json);
    cJSON *sch = cJSON_Parse(json);
    ts_request *r = submit(e, "Tim was", s, 60, 1.0f, 5, 3);
    eu_result res;
    eu_collect(r, &res);
    assert_int_equal(res.n_done, 3);
    for (int i = 0; i < 3; i++)
        assert_true(check_result(s, sch, &res, i));
    eu_result_free(&res);
    ts_request_release(r);
    cJSON_Delete(sch);
    ts_schema_release(s);
    ts_engine_destroy(e);
}

/* Batch invariance: a schema-constrained greedy answer is the same alone and among 15
 * others (7 under other schemas, 8 free). */
static void test_engine_batch_invariance(void **state)
{
    (void)state;
    sc_init();
    ts_engine *e = eu_start(eu_model, NULL);
    const char *json = "{\"type\": \"object\", \"properties\": {\"story\": {\"type\": \"string\", "
                       "\"maxLength\": 40}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": "
                       "\"string\", \"pattern\": \"^[a-z]+$\"}, \"maxItems\": 3}}, \"required\": "
                       "[\"story\"]}";
    const char *other = "{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"array\", \"items\": "
                        "{\"type\": \"boolean\"}}]}";
    ts_schema *s = compile_ok(json), *o = compile_ok(other);
    eu_result alone;
    ts_request *r = submit(e, "The cat sat", s, 64, 0.0f, 7, 1);
    eu_collect(r, &alone);
    ts_request_release(r);
    static const char *const prompts[] = {"Tim ran", "A big dog", "She said", "Once there",
                                          "The sun", "Mom gave", "They played", "One day"};
    ts_request *others[15];
    for (int i = 0; i < 15; i++) {
        others[i] = submit(e, prompts[i % 8], i % 2 ? NULL : (i % 4 ? o : s), 64, 0.0f, 7, 1);
        if (i == 7) /* the constrained request joins a running batch */
            r = submit(e, "The cat sat", s, 64, 0.0f, 7, 1);
    }
    eu_result among;
    eu_collect(r, &among);
    fprintf(stderr, "alone: %s\n", alone.text[0]);
    assert_string_equal(alone.text[0], among.text[0]);
    assert_int_equal(alone.finish[0], among.finish[0]);
    ts_request_release(r);
    for (int i = 0; i < 15; i++) {
        eu_result x;
        eu_collect(others[i], &x);
        assert_false(x.error);
        eu_result_free(&x);
        ts_request_release(others[i]);
    }
    eu_result_free(&alone);
    eu_result_free(&among);
    ts_schema_release(s);
    ts_schema_release(o);
    ts_engine_destroy(e);
}

/* A JSON_SCHEMA request without a schema is refused. */
static void test_engine_refusal(void **state)
{
    (void)state;
    ts_engine *e = eu_start(eu_model, NULL);
    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Hi", &n);
    ts_request_params p = eu_greedy(ids, n, 4);
    p.constraint = TS_CONSTRAINT_JSON_SCHEMA;
    ts_request *r = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_submit(e, &p, &r, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "schema"));
    assert_null(r);
    free(ids);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_random_schemas),
        cmocka_unit_test(test_engine_numbers),
        cmocka_unit_test(test_engine_n),
        cmocka_unit_test(test_engine_batch_invariance),
        cmocka_unit_test(test_engine_refusal),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
