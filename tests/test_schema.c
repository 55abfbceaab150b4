/* test_schema.c: JSON Schemas compiled into automata (src/grammar/schema_*.c): keywords
 * outside the subset refused by name and place; fixed documents accepted and refused byte
 * by byte; random schemas of the subset walked at random to their end, every text parsed
 * and checked by the independent validator of schema_check.c (so no prefix is a dead end
 * and no finished text is invalid); numeric edge bounds; and the token-trie mask of
 * schema states against a brute force over the whole vocabulary (SentencePiece with byte
 * fallback, byte-level BPE). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "grammar/constraint.h"
#include "grammar/schema.h"
#include "common/clock.h"
#include "common/strbuf.h"
#include "grammar/token_trie.h"
#include "schema_check.h"
#include "tessera/tokenizer.h"
#include "util.h"

static ts_schema *compile_ok(const char *json)
{
    ts_schema *s = NULL;
    ts_error err = {0};
    char path[TS_SCHEMA_PATH_LEN];
    if (ts_schema_compile(json, strlen(json), &s, path, sizeof path, &err) != TS_OK)
        fail_msg("%s: %s (at '%s')", json, err.msg, path);
    return s;
}

/* ---- refusals */

static void test_compile_errors(void **state)
{
    (void)state;
    static const struct {
        const char *schema;
        ts_status status;
        const char *path;   /* where the error points */
        const char *in_msg; /* a part of the message */
    } cases[] = {
        {"{\"type\": \"array\", \"uniqueItems\": true}", TS_ERR_UNSUPPORTED, "uniqueItems", "uniqueItems"},
        {"{\"properties\": {\"tags\": {\"type\": \"array\", \"contains\": {}}}}", TS_ERR_UNSUPPORTED,
         "properties.tags.contains", "'contains'"},
        {"{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"string\", \"minLength\": 1, \"if\": {}}]}",
         TS_ERR_UNSUPPORTED, "anyOf[1].if", "'if'"},
        {"{\"$defs\": {\"a\": {\"not\": {}}}, \"$ref\": \"#/$defs/a\"}", TS_ERR_UNSUPPORTED, "$defs.a.not", "'not'"},
        {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"number\"}, \"minProperties\": 20}",
         TS_ERR_TOO_LONG, "minProperties", "minProperties"},
        {"{\"type\": \"array\", \"items\": {\"type\": \"object\"}, \"uniqueItems\": true}", TS_ERR_UNSUPPORTED,
         "uniqueItems", "uniqueItems"},
        {"{\"type\": \"array\", \"items\": {\"enum\": [1, 2]}, \"uniqueItems\": true, \"minItems\": 17}",
         TS_ERR_TOO_LONG, "uniqueItems", "minItems"},
        {"{\"type\": \"array\", \"items\": {\"enum\": [1, 2]}, \"uniqueItems\": true, \"minItems\": 3}",
         TS_ERR_INVALID_ARG, "", "no JSON value"},
        {"{\"type\": \"string\", \"not\": {\"pattern\": \"a\"}}", TS_ERR_UNSUPPORTED, "not", "const"},
        {"{\"not\": {\"const\": 1}}", TS_ERR_UNSUPPORTED, "not", "'type'"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {}}, \"maxProperties\": 0, \"required\": [\"a\"]}",
         TS_ERR_INVALID_ARG, "", "no JSON value"},
        {"{\"type\": \"array\", \"items\": {}, \"prefixItems\": {}}", TS_ERR_INVALID_ARG, "prefixItems",
         "array"},
        {"{\"type\": \"string\", \"format\": \"idn-email\"}", TS_ERR_UNSUPPORTED, "format", "idn-email"},
        {"{\"type\": \"string\", \"pattern\": \"(?=a)b\"}", TS_ERR_UNSUPPORTED, "pattern", "lookaround"},
        {"{\"type\": \"string\", \"pattern\": \"\\\\bword\"}", TS_ERR_UNSUPPORTED, "pattern", "\\b"},
        {"{\"type\": \"string\", \"pattern\": \"a^b\"}", TS_ERR_UNSUPPORTED, "pattern", "'^'"},
        {"{\"type\": \"string\", \"pattern\": \"(ab\"}", TS_ERR_INVALID_ARG, "pattern", "unclosed"},
        {"{\"type\": \"string\", \"pattern\": \"a{3,2}\"}", TS_ERR_INVALID_ARG, "pattern", "n < m"},
        {"{\"type\": \"string\", \"pattern\": \"[a-z]{5}\", \"maxLength\": 3}", TS_ERR_INVALID_ARG, "pattern",
         "matches the pattern"},
        {"{\"type\": \"integer\", \"exclusiveMinimum\": true}", TS_ERR_UNSUPPORTED, "exclusiveMinimum", "draft 4"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", TS_ERR_INVALID_ARG, "", "no JSON value"},
        {"{\"type\": \"integer\", \"minimum\": 1.2, \"maximum\": 1.8}", TS_ERR_INVALID_ARG, "", "no JSON value"},
        {"{\"type\": \"strin\"}", TS_ERR_INVALID_ARG, "type", "'type'"},
        {"{\"$ref\": \"#/$defs/missing\"}", TS_ERR_INVALID_ARG, "$ref", "points nowhere"},
        {"{\"$ref\": \"http://example.com/s.json\"}", TS_ERR_UNSUPPORTED, "$ref", "inside the schema"},
        {"{\"$ref\": \"#\"}", TS_ERR_INVALID_ARG, "", "cycle"},
        {"{\"type\": \"string\", \"$ref\": \"#/$defs/a\", \"$defs\": {\"a\": {}}}", TS_ERR_UNSUPPORTED,
         "type", "beside '$ref'"},
        {"{\"enum\": [\"a\"], \"minLength\": 2}", TS_ERR_UNSUPPORTED, "minLength", "beside enum"},
        {"{\"allOf\": [{\"pattern\": \"a\"}, {\"pattern\": \"b\"}]}", TS_ERR_UNSUPPORTED, "allOf", "different 'pattern'"},
        {"{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"string\", \"maxLength\": 3}]}",
         TS_ERR_UNSUPPORTED, "oneOf", "anyOf"},
        {"{\"oneOf\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}", TS_ERR_UNSUPPORTED, "oneOf", "overlap"},
        /* 1e17 is an integer to a validator, though tessera writes none that large */
        {"{\"oneOf\": [{\"type\": \"integer\"}, {\"const\": 1e17}]}", TS_ERR_UNSUPPORTED, "oneOf", "overlap"},
        {"{\"type\": \"array\", \"minItems\": 70000}", TS_ERR_TOO_LONG, "minItems", "minItems"},
        {"{\"type\": \"object\", \"required\": [\"x\"], \"additionalProperties\": false}", TS_ERR_INVALID_ARG,
         "required", "'x'"},
        {"{\"type\": \"object\", \"properties\": {\"a\": false}, \"required\": [\"a\"]}", TS_ERR_INVALID_ARG, "",
         "no JSON value"},
        {"{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"n\": {\"$ref\": \"#/$defs/n\"}}, "
         "\"required\": [\"n\"]}}, \"$ref\": \"#/$defs/n\"}", TS_ERR_INVALID_ARG, "", "no JSON value"},
        {"{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
         "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
         "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
         "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
         "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
         "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
         "{\"type\": \"array\", \"minItems\": 1}}}}}}}}}}}}}", TS_ERR_TOO_LONG, "", "deeper"},
        {"{\"type\": \"string\",", TS_ERR_INVALID_ARG, "", "not valid JSON"},
        {"[1]", TS_ERR_INVALID_ARG, "", "object or a boolean"},
        {"{\"type\": \"string\", \"minLength\": -1}", TS_ERR_INVALID_ARG, "minLength", "non-negative"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_schema *s = (ts_schema *)1;
        ts_error err = {0};
        char path[TS_SCHEMA_PATH_LEN] = "unset";
        ts_status st = ts_schema_compile(cases[i].schema, strlen(cases[i].schema), &s, path,
                                         sizeof path, &err);
        if (st != cases[i].status || strcmp(path, cases[i].path) || !strstr(err.msg, cases[i].in_msg))
            fail_msg("case %zu %s: got %s '%s' at '%s'", i, cases[i].schema, ts_status_str(st),
                     err.msg, path);
        assert_null(s);
    }
    /* oneOf of alternatives no value matches together is taken. */
    static const char *const disjoint[] = {
        "{\"oneOf\": [{\"type\": \"integer\", \"maximum\": 0}, {\"type\": \"integer\", \"minimum\": 1}]}",
        "{\"oneOf\": [{\"type\": \"number\", \"exclusiveMaximum\": 1}, {\"type\": \"number\", \"minimum\": 1}]}",
        "{\"oneOf\": [{\"enum\": [1, \"a\"]}, {\"type\": \"integer\", \"minimum\": 2}, {\"type\": \"boolean\"}]}",
        "{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"k\": {\"const\": 1}}, \"required\": [\"k\"]}, "
        "{\"type\": \"object\", \"properties\": {\"k\": {\"enum\": [2, 3]}}, \"required\": [\"k\"]}]}",
    };
    for (size_t i = 0; i < sizeof disjoint / sizeof disjoint[0]; i++)
        ts_schema_release(compile_ok(disjoint[i]));
    /* Annotations are accepted and ignored; a null path is fine. */
    const char *ok = "{\"title\": \"t\", \"description\": \"d\", \"examples\": [1], \"default\": 2, "
                     "\"$schema\": \"https://json-schema.org/draft/2020-12/schema\", \"$id\": \"x\", "
                     "\"$comment\": \"c\", \"type\": \"integer\"}";
    ts_schema *s = NULL;
    assert_int_equal(ts_schema_compile(ok, strlen(ok), &s, NULL, 0, NULL), TS_OK);
    assert_ptr_equal(ts_schema_retain(s), s);
    ts_schema_release(s);
    ts_schema_release(s);
    ts_schema_release(NULL);
}

/* ---- fixed documents */

static bool feed(const ts_schema *s, sch_state *st, const char *text, size_t n)
{
    sch_state next;
    for (size_t i = 0; i < n; i++) {
        if (!sch_step(s, st, (uint8_t)text[i], &next))
            return false;
        memcpy(st, &next, sch_state_size(&next));
        st->n = next.n;
    }
    return true;
}

static void expect_docs(const char *schema, const char *const *good, const char *const *bad)
{
    ts_schema *s = compile_ok(schema);
    for (; good && *good; good++) {
        sch_state st;
        sch_init(&st, s);
        if (!feed(s, &st, *good, strlen(*good)) || !sch_can_end(s, &st))
            fail_msg("%s: refused %s", schema, *good);
    }
    for (; bad && *bad; bad++) { /* refused somewhere, or not complete at the end */
        sch_state st;
        sch_init(&st, s);
        if (feed(s, &st, *bad, strlen(*bad)) && sch_can_end(s, &st))
            fail_msg("%s: accepted %s", schema, *bad);
    }
    ts_schema_release(s);
}

static void test_documents(void **state)
{
    (void)state;
    expect_docs("{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 4}, "
                "\"nickname\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\", \"minimum\": 0, "
                "\"maximum\": 150}}, \"required\": [\"name\", \"age\"], \"additionalProperties\": false}",
                (const char *const[]){"{\"name\":\"Zoë\",\"age\":7}", "{ \"name\" : \"a\\n\" , \"nickname\": \"\", \"age\": 150 }",
                                      "{\"name\":\"\",\"age\":0}",
                                      "{\n  \"name\": \"a\",\n\t\t\"age\": 1\n}", NULL},
                (const char *const[]){"{\"age\":7,\"name\":\"a\"}", "{\"name\":\"abcde\",\"age\":1}",
                                      "{\"name\":\"a\",\"age\":151}", "{\"name\":\"a\",\"age\":-1}",
                                      "{\"name\":\"a\"}", "{\"name\":\"a\",\"age\":1,\"x\":1}",
                                      "{\"name\":\"a\",\"age\":01}", "{\"name\":\"a\",\"age\":1.0}",
                                      " {\"name\":\"a\",\"age\":1}", "{\"name\":\"a\",\"age\":1} ",
                                      "{\"name\":\"a\\u0041\",\"age\":1}",
                                      "{\"name\":\"a\",  \"age\":1}", "{\"name\":\"a\",\n\n\"age\":1}",
                                      "{\"name\":\"a\",\t\"age\":1}", "{\"name\":\"a\",\r\n\"age\":1}",
                                      "{\"name\":\"a\",\n                     \"age\":1}", NULL});
    expect_docs("{\"type\": \"array\", \"items\": {\"enum\": [\"red\", 1, 12, null, {\"k\": [true]}]}, "
                "\"minItems\": 1, \"maxItems\": 3}",
                (const char *const[]){"[\"red\"]", "[1,12,null]", "[{\"k\":[true]}]", "[ 12 , 1 ]", NULL},
                (const char *const[]){"[]", "[1,1,1,1]", "[\"blue\"]", "[2]", "[123]", "[{\"k\": [true]}]", NULL});
    expect_docs("{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"number\", \"minimum\": 0.5}, "
                "{\"type\": \"string\", \"pattern\": \"^\\\\d{3}$\"}]}",
                (const char *const[]){"-17", "0.5", "3.25", "12", "\"123\"", NULL},
                (const char *const[]){"0.25", "-0.5", "\"12\"", "\"abc\"", "1e3", "-", NULL});
    expect_docs("{\"type\": \"string\", \"format\": \"date\"}",
                (const char *const[]){"\"2024-02-28\"", "\"1999-12-31\"", NULL},
                (const char *const[]){"\"2024-02-30\"", "\"2024-13-01\"", "\"24-01-01\"", NULL});
    expect_docs("{\"type\": \"number\", \"exclusiveMinimum\": 0.1, \"maximum\": 0.3}",
                (const char *const[]){"0.3", "0.100001", "0.2", "0.30", NULL},
                (const char *const[]){"0.1", "0.300001", "0", "-0.2", "0.1000001", NULL});
    /* Bounds and enum values exactly as written, though cJSON would print them as 3.7. */
    expect_docs("{\"type\": \"number\", \"maximum\": 3.6999999999999997}",
                (const char *const[]){"3.699999", "-1", NULL}, (const char *const[]){"3.7", NULL});
    expect_docs("{\"enum\": [3.6999999999999997, 0.1]}",
                (const char *const[]){"3.6999999999999997", "0.1", NULL},
                (const char *const[]){"3.7", "0.10000000000000001", NULL});
    expect_docs("{\"type\": [\"string\", \"null\"], \"minLength\": 2}",
                (const char *const[]){"null", "\"ab\"", NULL}, (const char *const[]){"\"a\"", "nul", NULL});
    expect_docs("true", (const char *const[]){"{\"a\":[1,{}]}", "\"x\"", "-0.5e3", "null", NULL},
                (const char *const[]){"{", "tru", NULL});
}

/* ---- random schemas, random walks */

static void test_random_walks(void **state)
{
    (void)state;
    sc_init();
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    int compiled = 0, texts = 0, unsat = 0;
    for (int i = 0; i < 400; i++) {
        cJSON *sch = sc_random_schema(&rng, 1 + i % 4);
        char *json = cJSON_PrintUnformatted(sch);
        ts_schema *s = NULL;
        ts_error err = {0};
        char path[TS_SCHEMA_PATH_LEN];
        ts_status st = ts_schema_compile(json, strlen(json), &s, path, sizeof path, &err);
        if (st == TS_ERR_INVALID_ARG && (strstr(err.msg, "no JSON value") || strstr(err.msg, "matches the pattern"))) {
            unsat++; /* e.g. bounds no value of the type meets */
        } else if (st != TS_OK) {
            fail_msg("schema %d: %s (at '%s'): %s", i, err.msg, path, json);
        } else {
            compiled++;
            /* Validate against the text the compiler read: cJSON prints some doubles a
             * unit in the last place away from the values it built. */
            cJSON_Delete(sch);
            sch = cJSON_Parse(json);
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
        }
        free(json);
        cJSON_Delete(sch);
    }
    fprintf(stderr, "%d schemas compiled (%d unsatisfiable), %d random texts valid\n", compiled,
            unsat, texts);
    assert_true(compiled >= 360);
}

/* ---- the mask against brute force */

static bool schema_next(const void *ctx, const void *from, uint8_t c, void *to)
{
    return sch_step(ctx, from, c, to);
}

static void check_schema_masks(const ts_tokenizer *tok, const char *name, const char *schema,
                               const char *text, int *states, int *reused, int *multi,
                               int *high)
{
    ts_schema *s = compile_ok(schema);
    token_trie t;
    ts_error err = {0};
    assert_int_equal(token_trie_build(&t, tok, &err), TS_OK);
    int V = ts_tokenizer_vocab_size(tok);
    uint8_t *got = malloc((size_t)V), *prev_mask = malloc((size_t)V);
    sch_state *st = malloc(sizeof *st), *q = malloc(sizeof *q), *prev = malloc(sizeof *prev);
    sch_state *tmp = malloc(sizeof *tmp);
    assert_true(got && prev_mask && st && q && prev && tmp);
    sch_init(st, s);
    bool have_prev = false;
    for (size_t i = 0;; i++) {
        int n_allowed = token_trie_walk(&t, schema_next, s, st, sizeof *st, got);
        int n_brute = 0;
        for (int id = 0; id < V; id++) {
            size_t len = 0;
            const char *b = ts_token_bytes(tok, id, &len);
            memcpy(q, st, sch_state_size(st));
            bool want = token_trie_usable(tok, id);
            for (size_t k = 0; want && k < len; k++) {
                want = sch_step(s, q, (uint8_t)b[k], tmp);
                memcpy(q, tmp, sch_state_size(tmp));
            }
            if (want != (bool)got[id])
                fail_msg("%s: %s at byte %zu (%.*s) token %d '%.*s': trie %d, brute force %d",
                         name, schema, i, (int)i, text, id, (int)len, b, got[id], want);
            n_brute += want;
            if (want && len > 1) {
                int kinds = 0;
                for (const char *c = "\"{}[]:,"; *c; c++)
                    kinds += memchr(b, *c, len) != NULL;
                *multi += kinds >= 2;
            }
            *high += want && len == 1 && (uint8_t)b[0] >= 0x80;
        }
        assert_int_equal(n_allowed, n_brute);
        if (have_prev && sch_same(s, prev, st)) {
            assert_memory_equal(prev_mask, got, (size_t)V);
            (*reused)++;
        }
        memcpy(prev_mask, got, (size_t)V);
        memcpy(prev, st, sizeof *st);
        have_prev = true;
        (*states)++;
        if (!text[i])
            break;
        if (!sch_step(s, st, (uint8_t)text[i], tmp))
            fail_msg("%s: the text is refused at byte %zu", schema, i);
        memcpy(st, tmp, sizeof *st);
    }
    free(got);
    free(prev_mask);
    free(st);
    free(q);
    free(prev);
    free(tmp);
    token_trie_free(&t);
    ts_schema_release(s);
}

static void test_mask_matches_brute_force(void **state)
{
    (void)state;
    static const char *const vocabs[] = {
        "vocab/ggml-vocab-llama-spm.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
    };
    static const char *const cases[][2] = {
        {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, "
         "\"nickname\": {\"type\": \"string\", \"pattern\": \"^[a-z]+\\\\d?$\"}, \"n\": {\"type\": "
         "\"integer\", \"minimum\": -20, \"maximum\": 300}, \"tags\": {\"type\": \"array\", \"items\": "
         "{\"enum\": [\"red\", \"green\", 1]}, \"maxItems\": 3}, \"bio\": {\"type\": \"string\"}}, "
         "\"required\": [\"name\", \"n\"]}",
         "{\"name\": \"Zoë \\\"Z\\\"\", \"nickname\": \"zo3\", \"n\": -17, \"tags\": [\"red\", 1], "
         "\"bio\": \"Once upon a time, in a land far away\"}"},
        {"{\"anyOf\": [{\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"circle\"}, \"r\": "
         "{\"type\": \"number\", \"exclusiveMinimum\": 0}}, \"required\": [\"kind\", \"r\"]}, {\"type\": "
         "\"object\", \"properties\": {\"kind\": {\"const\": \"square\"}, \"side\": {\"type\": \"number\"}}, "
         "\"required\": [\"kind\"]}, {\"type\": \"string\", \"format\": \"date\"}]}",
         "{\"kind\":\"circle\",\"r\":0.25}"},
        {"{\"type\": \"array\", \"items\": {\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}}",
         "[\"ab\",\"é€😀\",\"xyz\"]"},
        /* keys beyond properties and unique items: states that remember values */
        {"{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}}, \"required\": "
         "[\"id\"], \"additionalProperties\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, "
         "\"uniqueItems\": true}, \"maxProperties\": 3}",
         "{\"id\": 7, \"colours\": [\"red\", \"green\", \"r\"], \"sizes\": [\"s\", \"m\"]}"},
    };
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        ts_tokenizer *tok = NULL;
        ts_error err = {0};
        if (ts_tokenizer_load_gguf(tu_shared(vocabs[v]), &tok, &err) != TS_OK)
            fail_msg("%s: %s", vocabs[v], err.msg);
        int states = 0, reused = 0, multi = 0, high = 0;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            check_schema_masks(tok, vocabs[v], cases[c][0], cases[c][1], &states, &reused, &multi,
                               &high);
        fprintf(stderr, "%s: %d schema states checked, %d reused, %d multi-syntax tokens, "
                "%d byte tokens allowed\n", vocabs[v], states, reused, multi, high);
        assert_true(states > 100);
        assert_true(reused > 10);
        if (strstr(vocabs[v], "gpt-2"))
            assert_true(multi > 0);
        else
            assert_true(high > 0); /* byte-fallback tokens inside strings */
        ts_tokenizer_free(tok);
    }
}

/* A 100k-entry enum (a 0.7 MB schema, under the 1 MiB body) compiles in near-linear time:
 * its values share one trie, read in order (cJSON_GetArrayItem per value made it
 * quadratic: 21 CPU seconds). The bound leaves room for sanitizer builds. */
static void test_large_enum(void **state)
{
    (void)state;
    enum { N = 100000 };
    strbuf b = {0};
    strbuf_addf(&b, "{\"enum\": [");
    for (int i = 0; i < N; i++)
        strbuf_addf(&b, "%s\"v%05d\"", i ? "," : "", i);
    strbuf_addf(&b, "]}");
    assert_false(b.failed);
    double t0 = clock_now_s();
    ts_schema *s = compile_ok(b.s);
    double took = clock_now_s() - t0;
    if (took > 3.0)
        fail_msg("a %d-entry enum took %.1f s to compile", N, took);
    const char *ends[] = {"\"v00000\"", "\"v54321\"", "\"v99999\""};
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        sch_state st;
        sch_init(&st, s);
        assert_true(feed(s, &st, ends[i], strlen(ends[i])) && sch_can_end(s, &st));
    }
    sch_state st;
    sch_init(&st, s);
    assert_false(feed(s, &st, "\"v100000\"", 9) && sch_can_end(s, &st));
    ts_schema_release(s);
    strbuf_free(&b);
}

/* A oneOf of two 50k-entry enums: checked disjoint by merging sorted values (comparing
 * each with each took 17 s for two of 20k); one shared value, even spelt 1 and 1.0, is
 * found and refused. */
static void test_large_one_of(void **state)
{
    (void)state;
    enum { N = 50000 };
    for (int overlap = 0; overlap < 3; overlap++) {
        strbuf b = {0};
        strbuf_addf(&b, "{\"oneOf\": [{\"enum\": [");
        for (int i = 0; i < N; i++)
            strbuf_addf(&b, "\"a%05d\",", i);
        strbuf_addf(&b, "%s, {\"k\": 1}]}, {\"enum\": [", overlap == 2 ? "1" : "0.5");
        for (int i = 0; i < N; i++)
            strbuf_addf(&b, "\"%c%05d\",", overlap == 1 && i == N - 1 ? 'a' : 'b', i);
        strbuf_addf(&b, "%s, {\"k\": 2}]}]}", overlap == 2 ? "1.0" : "2");
        assert_false(b.failed);
        ts_schema *s = NULL;
        char path[TS_SCHEMA_PATH_LEN];
        ts_error err = {0};
        double t0 = clock_now_s();
        ts_status st = ts_schema_compile(b.s, b.len, &s, path, sizeof path, &err);
        double took = clock_now_s() - t0;
        if (took > 3.0)
            fail_msg("a oneOf of two %d-entry enums took %.1f s to compile", N, took);
        if (overlap) {
            assert_int_equal(st, TS_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.msg, "use anyOf"));
        } else if (st != TS_OK)
            fail_msg("disjoint enums refused: %s", err.msg);
        ts_schema_release(s);
        strbuf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_random_walks),
        cmocka_unit_test(test_mask_matches_brute_force),
        cmocka_unit_test(test_large_enum),
        cmocka_unit_test(test_large_one_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
