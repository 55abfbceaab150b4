/* bench_constraint.c: what constrained decoding costs: the decode step time of S streams
 * under the JSON-object constraint and under a JSON schema against S free streams (the
 * engine's own step profile), and the time of one mask (a token-trie walk) in typical
 * states of both automata.
 * Usage: bench_constraint MODEL.gguf [streams 16] [tokens 64, 0: masks only]
 *        [threads 0 = all] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "grammar/constraint.h"
#include "tessera/engine.h"
#include "tessera/model.h"
#include "tessera/tokenizer.h"

typedef struct run_result {
    double step_ms, emit_ms;
    uint64_t steps, tokens;
} run_result;

/* S streams of tokens each (8 random ordinary prompt tokens, temperature 1, own seed),
 * constrained or free, on a fresh engine; the decode steps' mean time and emit share. */
/* The schema of the JSON-schema runs and masks: an object of a string, a bounded
 * integer, a patterned string, tags of an enum, and a union of two shapes. */
static const char bench_schema[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": "
    "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150}, \"code\": {\"type\": "
    "\"string\", \"pattern\": \"^[A-Z]{2}-\\\\d{4}$\"}, \"tags\": {\"type\": \"array\", "
    "\"items\": {\"enum\": [\"red\", \"green\", \"blue\"]}}, \"shape\": {\"anyOf\": [{\"type\": "
    "\"object\", \"properties\": {\"kind\": {\"const\": \"circle\"}, \"r\": {\"type\": "
    "\"number\"}}, \"required\": [\"kind\", \"r\"]}, {\"type\": \"object\", \"properties\": "
    "{\"kind\": {\"const\": \"square\"}, \"side\": {\"type\": \"number\"}}, \"required\": "
    "[\"kind\", \"side\"]}]}}, \"required\": [\"name\", \"age\", \"code\", \"tags\", "
    "\"shape\"]}";

static int run(const ts_model *m, int S, int tokens, int threads, ts_constraint_kind kind,
               ts_schema *schema, run_result *out)
{
    ts_engine_options eo;
    ts_engine_options_default(&eo);
    eo.max_seqs = S;
    eo.n_threads = threads;
    ts_engine *e = NULL;
    ts_error err = {0};
    if (ts_engine_create(m, &eo, &e, &err) != TS_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return 1;
    }
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    int V = ts_tokenizer_vocab_size(tok);
    ts_request **reqs = calloc((size_t)S, sizeof *reqs);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < S; i++) {
        int32_t prompt[9];
        int n = 0;
        if (ts_tokenizer_add_bos(tok) && ts_tokenizer_bos(tok) >= 0)
            prompt[n++] = ts_tokenizer_bos(tok);
        while (n < 9) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int32_t id = (int32_t)(x % (uint64_t)V);
            if (ts_token_is_plain(tok, id))
                prompt[n++] = id;
        }
        ts_request_params p;
        ts_request_params_default(&p);
        p.prompt = prompt;
        p.n_prompt = (size_t)n;
        p.max_tokens = tokens;
        p.ignore_eos = true;
        p.sampling.temperature = 1.0f;
        p.sampling.seed = (uint64_t)i + 1;
        p.sampling.has_seed = true;
        p.constraint = kind;
        p.schema = schema;
        if (ts_engine_submit(e, &p, &reqs[i], &err) != TS_OK) {
            fprintf(stderr, "submit: %s\n", err.msg);
            return 1;
        }
    }
    out->tokens = 0;
    for (int i = 0; i < S; i++) {
        ts_event ev;
        while (ts_request_next_event(reqs[i], &ev, -1) == TS_OK) {
            ts_event_kind k = ev.kind;
            out->tokens += k == TS_EVENT_TOKEN;
            ts_event_clear(&ev);
            if (k != TS_EVENT_TOKEN)
                break;
        }
        ts_request_release(reqs[i]);
    }
    ts_engine_wait_idle(e, -1);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    const ts_step_profile *d = &st.decode_steps;
    double total = 0;
    for (int p = 0; p < TS_PHASE_COUNT; p++)
        total += d->seconds[p];
    out->steps = d->steps;
    out->step_ms = d->steps ? total / (double)d->steps * 1e3 : 0;
    out->emit_ms = d->steps ? d->seconds[TS_PHASE_EMIT] / (double)d->steps * 1e3 : 0;
    free(reqs);
    ts_engine_destroy(e);
    return 0;
}

/* Mean microseconds of one mask in the state after text (schema NULL: json_object),
 * within a budget of limit bytes (UINT32_MAX: none; otherwise each token's closing cost
 * is computed too). */
static double mask_us(const token_trie *t, const ts_schema *schema, const char *text,
                      uint32_t limit, uint8_t *allowed, int *n_allowed)
{
    static constraint c; /* static: a schema state is a few KiB */
    constraint_init(&c, schema ? TS_CONSTRAINT_JSON_SCHEMA : TS_CONSTRAINT_JSON_OBJECT, schema,
                    NULL);
    if (!constraint_advance(&c, text, strlen(text)))
        return -1;
    int iters = 50;
    double t0 = clock_now_s();
    uint32_t max_cost;
    for (int i = 0; i < iters; i++)
        *n_allowed = limit == UINT32_MAX ? constraint_allowed(&c, t, allowed)
                     : constraint_allowed_within(&c, t, limit, allowed, &max_cost);
    return (clock_now_s() - t0) / iters * 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_constraint MODEL.gguf [streams] [tokens] [threads]\n");
        return 1;
    }
    int S = argc > 2 ? atoi(argv[2]) : 16, tokens = argc > 3 ? atoi(argv[3]) : 64; /* 0: masks */
    int threads = argc > 4 ? atoi(argv[4]) : 0;
    ts_model *m = NULL;
    ts_error err = {0};
    if (S < 1 || tokens < 0 || ts_model_load(argv[1], NULL, &m, &err) != TS_OK) {
        fprintf(stderr, "bench_constraint: %s\n", S < 1 || tokens < 0 ? "bad counts" : err.msg);
        return 1;
    }
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    token_trie t;
    double t0 = clock_now_s();
    if (token_trie_build(&t, tok, &err) != TS_OK) {
        fprintf(stderr, "trie: %s\n", err.msg);
        return 1;
    }
    printf("vocabulary %d tokens, trie of %d tokens / %d nodes built in %.1f ms\n",
           t.vocab_size, t.n_tokens, t.n_nodes, (clock_now_s() - t0) * 1e3);
    uint8_t *allowed = malloc((size_t)t.vocab_size);
    static const char *const states[][2] = {
        {"", "start (only '{')"},
        {"{\"name\"", "after a key (':')"},
        {"{\"name\": ", "a value"},
        {"{\"name\": \"Ti", "inside a string"},
        {"{\"n\": 12", "inside a number"},
    };
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        int n = 0;
        double us = mask_us(&t, NULL, states[i][0], UINT32_MAX, allowed, &n);
        printf("json_object mask %-26s %8.1f us, %6d tokens allowed\n", states[i][1], us, n);
    }
    ts_schema *schema = NULL;
    if (ts_schema_compile(bench_schema, strlen(bench_schema), &schema, NULL, 0, &err) != TS_OK) {
        fprintf(stderr, "schema: %s\n", err.msg);
        return 1;
    }
    static const char *const schema_states[][2] = {
        {"", "start (only '{')"},
        {"{", "a name (only '\"')"},
        {"{\"na", "inside a name"},
        {"{\"name\": ", "a value (a string)"},
        {"{\"name\": \"Ti", "inside a free string"},
        {"{\"name\": \"Tim\", \"age\": 4", "inside a bounded integer"},
        {"{\"name\": \"Tim\", \"age\": 4, \"code\": \"AB-1", "inside a pattern"},
        {"{\"name\": \"Tim\", \"age\": 4, \"code\": \"AB-1234\", \"tags\": [", "an enum item or ']'"},
        {"{\"name\": \"Tim\", \"age\": 4, \"code\": \"AB-1234\", \"tags\": [], \"shape\": "
         "{\"kind\": \"", "two anyOf paths"},
    };
    for (size_t i = 0; i < sizeof schema_states / sizeof schema_states[0]; i++) {
        int n = 0;
        double us = mask_us(&t, schema, schema_states[i][0], UINT32_MAX, allowed, &n);
        int n_within = 0;
        double within = mask_us(&t, schema, schema_states[i][0], 1000, allowed, &n_within);
        printf("json_schema mask %-26s %8.1f us, %6d tokens allowed; within a budget "
               "%8.1f us, %6d\n", schema_states[i][1], us, n, within, n_within);
    }
    free(allowed);
    token_trie_free(&t);
    if (tokens == 0) { /* masks only */
        ts_schema_release(schema);
        ts_model_free(m);
        return 0;
    }

    run_result free_r, json_r, schema_r; /* a short run first warms the caches and pages */
    if (run(m, S, 4, threads, TS_CONSTRAINT_NONE, NULL, &free_r) ||
        run(m, S, tokens, threads, TS_CONSTRAINT_NONE, NULL, &free_r) ||
        run(m, S, tokens, threads, TS_CONSTRAINT_JSON_OBJECT, NULL, &json_r) ||
        run(m, S, tokens, threads, TS_CONSTRAINT_JSON_SCHEMA, schema, &schema_r))
        return 1;
    ts_schema_release(schema);
    printf("%d streams x %d tokens   decode steps   step ms   emit ms   tokens\n", S, tokens);
    printf("free                     %12llu  %8.3f  %8.3f  %7llu\n",
           (unsigned long long)free_r.steps, free_r.step_ms, free_r.emit_ms,
           (unsigned long long)free_r.tokens);
    printf("json_object              %12llu  %8.3f  %8.3f  %7llu\n",
           (unsigned long long)json_r.steps, json_r.step_ms, json_r.emit_ms,
           (unsigned long long)json_r.tokens);
    printf("json_schema              %12llu  %8.3f  %8.3f  %7llu\n",
           (unsigned long long)schema_r.steps, schema_r.step_ms, schema_r.emit_ms,
           (unsigned long long)schema_r.tokens);
    printf("constrained / free step time: json_object %.2fx, json_schema %.2fx\n",
           free_r.step_ms > 0 ? json_r.step_ms / free_r.step_ms : 0.0,
           free_r.step_ms > 0 ? schema_r.step_ms / free_r.step_ms : 0.0);
    ts_model_free(m);
    return 0;
}
