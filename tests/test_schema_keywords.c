/* test_schema_keywords.c: the JSON Schema keywords Pydantic and zod write (allOf of
 * several schemas, additionalProperties as a schema, minProperties and maxProperties,
 * prefixItems, uniqueItems, formats, not of const or enum): each compiled schema accepts
 * and refuses fixed texts byte by byte; random Pydantic-style schemas are walked at random
 * to their end and every text checked by the independent validator of schema_check.c; and
 * the same schemas constrain stories260K at 3 seeds and 2 temperatures, every answer
 * validated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "engine_util.h"
#include "grammar/schema.h"
#include "schema_check.h"

static ts_schema *compile_ok(const char *json)
{
    ts_schema *s = NULL;
    ts_error err = {0};
    char path[TS_SCHEMA_PATH_LEN];
    if (ts_schema_compile(json, strlen(json), &s, path, sizeof path, &err) != TS_OK)
        fail_msg("%s: %s (at '%s')", json, err.msg, path);
    return s;
}

/* Whether the automaton of s takes text whole and may end there. */
static bool takes(const ts_schema *s, const char *text)
{
    sch_state *st = malloc(sizeof *st), *next = malloc(sizeof *next);
    assert_non_null(st);
    assert_non_null(next);
    sch_init(st, s);
    bool ok = true;
    for (const char *c = text; *c && ok; c++) {
        ok = sch_step(s, st, (uint8_t)*c, next);
        if (ok)
            memcpy(st, next, sch_state_size(next));
    }
    ok = ok && sch_can_end(s, st);
    free(st);
    free(next);
    return ok;
}

typedef struct doc_case {
    const char *schema;
    const char *yes[6]; /* texts accepted (NULL ends) */
    const char *no[6];  /* texts refused */
} doc_case;

/* Each case's texts against the compiled schema and, independently, the validator. */
static void run_cases(const doc_case *cases, size_t n)
{
    sc_init();
    for (size_t i = 0; i < n; i++) {
        ts_schema *s = compile_ok(cases[i].schema);
        cJSON *sch = cJSON_Parse(cases[i].schema);
        assert_non_null(sch);
        char why[300];
        for (int k = 0; k < 6 && cases[i].yes[k]; k++) {
            if (!takes(s, cases[i].yes[k]))
                fail_msg("%s refuses %s", cases[i].schema, cases[i].yes[k]);
            cJSON *v = cJSON_Parse(cases[i].yes[k]);
            if (!v || !sc_validate(sch, v, why, sizeof why))
                fail_msg("validator refuses %s under %s: %s", cases[i].yes[k], cases[i].schema, why);
            cJSON_Delete(v);
        }
        for (int k = 0; k < 6 && cases[i].no[k]; k++) {
            if (takes(s, cases[i].no[k]))
                fail_msg("%s takes %s", cases[i].schema, cases[i].no[k]);
            cJSON *v = cJSON_Parse(cases[i].no[k]);
            if (v && sc_validate(sch, v, why, sizeof why))
                fail_msg("validator takes %s under %s", cases[i].no[k], cases[i].schema);
            cJSON_Delete(v);
        }
        cJSON_Delete(sch);
        ts_schema_release(s);
    }
}

static void test_formats(void **state)
{
    (void)state;
    static const doc_case cases[] = {
        {"{\"type\": \"string\", \"format\": \"email\"}",
         {"\"ann@example.com\"", "\"ann.lee@mail.ex.org\"", NULL},
         {"\"ann\"", "\"@example.com\"", "\"ann@example\"", "\"a@b@c.d\"", NULL}},
        {"{\"type\": \"string\", \"format\": \"hostname\"}",
         {"\"example\"", "\"www.example.com\"", NULL},
         {"\"\"", "\"-a\"", "\"a..b\"", "\"a b\"", NULL}},
        {"{\"type\": \"string\", \"format\": \"ipv6\"}",
         {"\"::1\"", "\"::\"", "\"fe80::1\"", "\"1:2:3:4:5:6:7:8\"", NULL},
         {"\"1:2\"", "\":::\"", "\"12345::\"", "\"1:2:3:4:5:6:7:8:9\"", NULL}},
        {"{\"type\": \"string\", \"format\": \"uri\"}",
         {"\"https://example.com\"", "\"http://a.b:8080/x/y?q=1\"", NULL},
         {"\"example.com\"", "\"https://\"", "\"https://a b\"", NULL}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_all_of(void **state)
{
    (void)state;
    static const doc_case cases[] = {
        /* zod's .and(): two objects meet */
        {"{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
         "\"required\": [\"a\"]}, {\"type\": \"object\", \"properties\": {\"b\": {\"type\": "
         "\"string\"}}, \"required\": [\"b\"]}]}",
         {"{\"a\":1,\"b\":\"x\"}", NULL},
         {"{\"a\":1}", "{\"b\":\"x\"}", "{}", NULL}},
        /* bounds tighten; a $ref part is followed */
        {"{\"$defs\": {\"pos\": {\"type\": \"integer\", \"minimum\": 1}}, \"allOf\": "
         "[{\"$ref\": \"#/$defs/pos\"}, {\"maximum\": 5}]}",
         {"1", "5", NULL},
         {"0", "6", "2.5", NULL}},
        /* additionalProperties: false of one part forbids the other's names */
        {"{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
         "\"additionalProperties\": false}, {\"properties\": {\"b\": {\"type\": \"integer\"}}}]}",
         {"{\"a\":1}", "{}", NULL},
         {"{\"a\":1,\"b\":2}", "{\"b\":2}", NULL}},
        /* enums intersect; a part with anyOf is distributed */
        {"{\"allOf\": [{\"enum\": [\"x\", \"y\", \"z\"]}, {\"anyOf\": [{\"const\": \"y\"}, "
         "{\"const\": \"z\"}, {\"const\": \"w\"}]}]}",
         {"\"y\"", "\"z\"", NULL},
         {"\"x\"", "\"w\"", NULL}},
        /* the same property in both parts gets both schemas */
        {"{\"allOf\": [{\"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 0}}, "
         "\"required\": [\"n\"]}, {\"properties\": {\"n\": {\"maximum\": 3}}}], \"title\": \"t\"}",
         {"{\"n\":0}", "{\"n\":3}", NULL},
         {"{\"n\":4}", "{\"n\":-1}", NULL}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_prefix_items(void **state)
{
    (void)state;
    static const doc_case cases[] = {
        /* Pydantic's Tuple[int, str] */
        {"{\"type\": \"array\", \"prefixItems\": [{\"type\": \"integer\"}, {\"type\": "
         "\"string\"}], \"minItems\": 2, \"maxItems\": 2}",
         {"[1,\"a\"]", "[ -3, \"\" ]", NULL},
         {"[1]", "[\"a\",1]", "[1,\"a\",2]", "[]", NULL}},
        /* Tuple[int, ...]-like: a prefix, then items */
        {"{\"type\": \"array\", \"prefixItems\": [{\"const\": \"head\"}], \"items\": "
         "{\"type\": \"boolean\"}}",
         {"[]", "[\"head\"]", "[\"head\",true,false]", NULL},
         {"[true]", "[\"head\",\"head\"]", NULL}},
        /* the draft 7 spelling: items as an array, then anything */
        {"{\"type\": \"array\", \"items\": [{\"type\": \"null\"}], \"minItems\": 1}",
         {"[null]", "[null,1,\"x\"]", NULL},
         {"[]", "[1]", NULL}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_additional_properties(void **state)
{
    (void)state;
    static const doc_case cases[] = {
        /* Pydantic's Dict[str, int] */
        {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
         {"{}", "{\"a\":1}", "{\"a\":1,\"b\":2}", "{\"x y\": -4, \"\\/\": 0}", NULL},
         {"{\"a\":\"x\"}", "{\"a\":1,\"a\":2}", "{\"a\":1,\"\\/\":2,\"/\":3}", NULL}},
        /* declared properties first, then keys under the schema; a declared name is not
         * a free key */
        {"{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}}, \"required\": "
         "[\"id\"], \"additionalProperties\": {\"type\": \"string\"}}",
         {"{\"id\":1}", "{\"id\":1,\"k\":\"v\"}", NULL},
         {"{\"k\":\"v\"}", "{\"id\":1,\"k\":2}", "{\"id\":1,\"id\":\"v\"}", NULL}},
        /* minProperties and maxProperties over a map */
        {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"boolean\"}, "
         "\"minProperties\": 1, \"maxProperties\": 2}",
         {"{\"a\":true}", "{\"a\":true,\"b\":false}", NULL},
         {"{}", "{\"a\":true,\"b\":false,\"c\":true}", NULL}},
        /* minProperties over declared optional properties */
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"null\"}, \"b\": {\"type\": "
         "\"null\"}, \"c\": {\"type\": \"null\"}}, \"additionalProperties\": false, "
         "\"minProperties\": 2, \"maxProperties\": 2}",
         {"{\"a\":null,\"b\":null}", "{\"a\":null,\"c\":null}", "{\"b\":null,\"c\":null}", NULL},
         {"{\"a\":null}", "{\"a\":null,\"b\":null,\"c\":null}", "{}", NULL}},
        /* maps of maps of sets: the remembered values of a path are shared, and a value
         * begins only with room for what it must remember */
        {"{\"type\": \"object\", \"minProperties\": 2, \"additionalProperties\": {\"type\": "
         "\"object\", \"minProperties\": 1, \"additionalProperties\": {\"type\": \"array\", "
         "\"items\": {\"type\": \"integer\"}, \"uniqueItems\": true, \"minItems\": 5}}}",
         {"{\"a\":{\"b\":[1,2,3,4,5]},\"c\":{\"d\":[5,4,3,2,1]}}", NULL},
         {"{\"a\":{\"b\":[1,2,3,4,5]}}", "{\"a\":{\"b\":[1,2,3,4,4]},\"c\":{\"d\":[1,2,3,4,5]}}", NULL}},
        /* minProperties without properties: keys with any value */
        {"{\"type\": \"object\", \"minProperties\": 1}",
         {"{\"k\":[1,{\"x\":null}]}", NULL},
         {"{}", NULL}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_unique_items(void **state)
{
    (void)state;
    static const doc_case cases[] = {
        /* Set[str]: one spelling or another of the same string is a repeat */
        {"{\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"uniqueItems\": true}",
         {"[]", "[\"a\",\"b\"]", "[\"a\",\"ab\",\"b\"]", NULL},
         {"[\"a\",\"a\"]", "[\"/\",\"\\/\"]", "[\"x\",\"y\",\"x\"]", NULL}},
        /* Set[float]: equal values however written */
        {"{\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"uniqueItems\": true}",
         {"[1,2,1.5]", "[0.5,5]", NULL},
         {"[1,1.0]", "[2.50,2.5]", "[3,3]", NULL}},
        /* a small enum: exactly its subsets */
        {"{\"type\": \"array\", \"items\": {\"enum\": [\"red\", \"green\", 1, 12]}, "
         "\"uniqueItems\": true, \"minItems\": 2}",
         {"[\"red\",\"green\"]", "[1,12,\"red\",\"green\"]", "[12,1]", NULL},
         {"[\"red\",\"red\"]", "[1,1]", "[12,12]", "[1]", NULL}},
        /* Set[bool] */
        {"{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"uniqueItems\": true}",
         {"[true,false]", "[false]", NULL},
         {"[true,true]", "[true,false,true]", NULL}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_not(void **state)
{
    (void)state;
    static const doc_case cases[] = {
        {"{\"type\": \"string\", \"not\": {\"enum\": [\"\", \"none\"]}}",
         {"\"a\"", "\"non\"", "\"nonex\"", NULL},
         {"\"\"", "\"none\"", "\"n\\u006fne\"", NULL}},
        {"{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 3, \"not\": {\"const\": 2}}",
         {"0", "1", "3", NULL},
         {"2", "4", NULL}},
        {"{\"type\": \"number\", \"not\": {\"enum\": [0, 1.5]}}",
         {"0.5", "1.25", "-1", "2", NULL},
         {"0", "1.5", "1.50", NULL}},
        {"{\"enum\": [\"a\", \"b\", \"c\"], \"not\": {\"const\": \"b\"}}",
         {"\"a\"", "\"c\"", NULL},
         {"\"b\"", NULL}},
        {"{\"type\": [\"boolean\", \"string\"], \"maxLength\": 1, \"not\": {\"enum\": [false, \"x\"]}}",
         {"true", "\"y\"", NULL},
         {"false", "\"x\"", NULL}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* What stays refused names its keyword; hostile allOf (anyOf inside multiplying, parts
 * of the wrong shape) fails quickly with a clear error. */
static void test_refusals(void **state)
{
    (void)state;
    char big[8192];
    size_t o = (size_t)snprintf(big, sizeof big, "{\"allOf\": [");
    for (int i = 0; i < 8; i++) {
        o += (size_t)snprintf(big + o, sizeof big - o, "%s{\"anyOf\": [", i ? ", " : "");
        for (int k = 0; k < 12; k++)
            o += (size_t)snprintf(big + o, sizeof big - o, "%s{\"type\": \"integer\", "
                                  "\"minimum\": %d}", k ? ", " : "", i * 12 + k);
        o += (size_t)snprintf(big + o, sizeof big - o, "]}");
    }
    snprintf(big + o, sizeof big - o, "]}");
    static const struct {
        const char *schema, *path, *in_msg;
    } cases[] = {
        {NULL, "allOf", "'allOf' expands"}, /* 12^8 alternatives, stopped by a bound */
        {"{\"allOf\": [{\"properties\": [1]}, {\"type\": \"object\"}]}", "allOf", "properties"},
        {"{\"allOf\": [{\"format\": \"date\"}, {\"format\": \"uuid\"}]}", "allOf", "'format'"},
        {"{\"allOf\": [{\"not\": {\"type\": \"string\"}}, {\"not\": {\"const\": 1}}]}", "allOf", "'not'"},
        {"{\"allOf\": [{\"$ref\": \"#/nowhere\"}, {}]}", "allOf", "points nowhere"},
        {"{\"type\": \"array\", \"items\": {\"type\": \"array\"}, \"uniqueItems\": true}", "uniqueItems",
         "uniqueItems"},
        {"{\"type\": \"array\", \"uniqueItems\": 1}", "uniqueItems", "boolean"},
        {"{\"type\": \"object\", \"minProperties\": 9}", "minProperties", "minProperties"},
        {"{\"type\": \"object\", \"maxProperties\": -1}", "maxProperties", "non-negative"},
        {"{\"type\": \"string\", \"format\": \"iri\"}", "format", "iri"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *json = cases[i].schema ? cases[i].schema : big;
        ts_schema *s = NULL;
        ts_error err = {0};
        char path[TS_SCHEMA_PATH_LEN];
        double t0 = clock_now_s();
        ts_status st = ts_schema_compile(json, strlen(json), &s, path, sizeof path, &err);
        if (st == TS_OK)
            fail_msg("case %zu compiled: %.200s", i, json);
        assert_null(s);
        if ((cases[i].path && strcmp(path, cases[i].path)) || !strstr(err.msg, cases[i].in_msg))
            fail_msg("case %zu: '%s' at '%s'", i, err.msg, path);
        assert_true(clock_now_s() - t0 < 5.0); /* a clear error, not a long expansion */
    }
}

/* Pydantic-style schemas walked at random: no prefix is a dead end and every finished
 * text is valid. */
static void test_random_walks(void **state)
{
    (void)state;
    sc_init();
    uint64_t rng = 0x2545F4914F6CDD1DULL;
    int texts = 0, unsat = 0;
    /* Edges where a value could run out of allowed endings: nested maps at the bound of
     * remembered values, small languages under uniqueItems and not. */
    static const char *const edges[] = {
        "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"object\", "
        "\"additionalProperties\": {\"type\": \"array\", \"items\": {\"type\": \"string\", "
        "\"maxLength\": 1}, \"uniqueItems\": true, \"minItems\": 3}, \"minProperties\": 2}, "
        "\"minProperties\": 3}",
        "{\"type\": \"array\", \"items\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 12}, "
        "\"uniqueItems\": true}",
        "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"pattern\": \"^(a|ab|ac|b)$\"}, "
        "\"uniqueItems\": true}",
        "{\"type\": \"array\", \"items\": {\"anyOf\": [{\"enum\": [1, 2, 10]}, {\"type\": \"integer\", "
        "\"minimum\": 1, \"maximum\": 3}, {\"type\": \"boolean\"}]}, \"uniqueItems\": true}",
        "{\"type\": \"array\", \"items\": {\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}, "
        "\"uniqueItems\": true, \"minItems\": 12}",
        "{\"type\": \"string\", \"pattern\": \"^a(b|c)?$\", \"not\": {\"enum\": [\"a\", \"ab\"]}}",
        "{\"type\": \"string\", \"maxLength\": 1, \"not\": {\"enum\": [\"\", \"a\"]}}",
    };
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        ts_schema *es = compile_ok(edges[e]);
        cJSON *sch = cJSON_Parse(edges[e]);
        for (int w = 0; w < 150; w++) {
            char why[400];
            char *text = sc_random_walk(es, &rng, 20000, why, sizeof why);
            if (!text)
                fail_msg("%s: %s", edges[e], why);
            cJSON *v = cJSON_Parse(text);
            if (!v || !sc_validate(sch, v, why, sizeof why))
                fail_msg("%s: %s: %s", edges[e], why, text);
            cJSON_Delete(v);
            free(text);
        }
        cJSON_Delete(sch);
        ts_schema_release(es);
    }
    for (int i = 0; i < 150; i++) {
        cJSON *made = sc_pydantic_schema(&rng, 1 + i % 3);
        char *json = cJSON_PrintUnformatted(made);
        cJSON_Delete(made);
        cJSON *sch = cJSON_Parse(json);
        ts_schema *s = NULL;
        ts_error err = {0};
        char path[TS_SCHEMA_PATH_LEN];
        ts_status st = ts_schema_compile(json, strlen(json), &s, path, sizeof path, &err);
        if (st == TS_ERR_INVALID_ARG && strstr(err.msg, "no JSON value")) {
            unsat++; /* two models of an intersection that disagree on a required field */
            cJSON_Delete(sch);
            free(json);
            continue;
        }
        if (st != TS_OK)
            fail_msg("schema %d: %s (at '%s'): %s", i, err.msg, path, json);
        for (int w = 0; w < 6; w++) {
            char why[400];
            char *text = sc_random_walk(s, &rng, 20000, why, sizeof why);
            if (!text)
                fail_msg("schema %d: %s\n%s", i, why, json);
            cJSON *v = cJSON_Parse(text);
            if (!v)
                fail_msg("schema %d: not JSON: %s\n%s", i, text, json);
            if (!sc_validate(sch, v, why, sizeof why))
                fail_msg("schema %d: %s\ntext %s\nschema %s", i, why, text, json);
            cJSON_Delete(v);
            free(text);
            texts++;
        }
        ts_schema_release(s);
        cJSON_Delete(sch);
        free(json);
    }
    fprintf(stderr, "%d Pydantic-style schemas walked (%d unsatisfiable), %d texts valid\n",
            150 - unsat, unsat, texts);
    assert_true(unsat < 15);
    assert_int_equal(texts, 6 * (150 - unsat));
}

/* Completion i of res under s: when it stopped, JSON the validator accepts; when cut by
 * max_tokens, a prefix the automaton takes. Returns whether it stopped. */
static bool check_answer(const ts_schema *s, const cJSON *schema, const eu_result *res, int i)
{
    const char *text = res->text[i];
    if (res->error)
        fail_msg("request failed: %s", res->error_message);
    sch_state *st = malloc(sizeof *st), *next = malloc(sizeof *next);
    assert_non_null(st);
    assert_non_null(next);
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

/* Pydantic-style schemas constrain stories260K: 3 seeds x 2 temperatures each, sampled
 * side by side, every answer validated. */
static void test_engine_pydantic(void **state)
{
    (void)state;
    sc_init();
    ts_engine *e = eu_start(eu_model, NULL);
    static const float temps[] = {0.6f, 1.4f};
    static const uint64_t seeds[] = {1, 7, 42};
    uint64_t rng = 0x8CB92BA72F3D8DD7ULL;
    int runs = 0, stops = 0;
    for (int i = 0; i < 12; i++) {
        cJSON *made = sc_pydantic_schema(&rng, 1 + i % 2);
        char *json = cJSON_PrintUnformatted(made);
        cJSON_Delete(made);
        cJSON *sch = cJSON_Parse(json);
        ts_schema *s = compile_ok(json);
        int n_ids = 0;
        int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n_ids);
        ts_request *r[6];
        for (int k = 0; k < 6; k++) {
            ts_request_params p = eu_seeded(ids, n_ids, 200, temps[k % 2], seeds[k / 2]);
            p.constraint = TS_CONSTRAINT_JSON_SCHEMA;
            p.schema = s;
            r[k] = eu_submit_params(e, &p);
        }
        for (int k = 0; k < 6; k++) {
            eu_result res;
            eu_collect(r[k], &res);
            stops += check_answer(s, sch, &res, 0);
            runs++;
            eu_result_free(&res);
            ts_request_release(r[k]);
        }
        free(ids);
        ts_schema_release(s);
        cJSON_Delete(sch);
        free(json);
    }
    fprintf(stderr, "%d of %d Pydantic-style answers ended within 200 tokens, all valid\n",
            stops, runs);
    assert_int_equal(runs, 72);
    assert_true(stops >= runs / 3);
    ts_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_all_of),
        cmocka_unit_test(test_prefix_items),
        cmocka_unit_test(test_additional_properties),
        cmocka_unit_test(test_unique_items),
        cmocka_unit_test(test_not),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_walks),
        cmocka_unit_test(test_engine_pydantic),
    };
    return cmocka_run_group_tests(tests, eu_setup_stories, eu_teardown_stories);
}
