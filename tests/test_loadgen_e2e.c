/* test_loadgen_e2e.c: the load generator against a real tessera server (stories260K,
 * loopback, a free port, bounded in time): streaming and not, completions and chat,
 * levels, a priority mix through api keys, and the JSON report; /v1/embeddings against a
 * tiny embedding model's server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine_util.h"
#include "gguf/gguf.h"
#include "loadgen/loadgen.h"
#include "model/synth.h"
#include "tokenizer/vocab.h"
#include "tessera/server.h"
#include "util.h"

typedef struct fixture {
    ts_model *model;
    ts_engine *engine;
    ts_server *server;
    char url[64];
    char keys_path[4096];
} fixture;

static int setup(void **state)
{
    static fixture f;
    ts_error err = {0};
    f.model = eu_load_stories();
    snprintf(f.keys_path, sizeof f.keys_path, "%s", tu_tmp_path("loadgen_e2e_keys.json"));
    FILE *kf = fopen(f.keys_path, "w");
    assert_non_null(kf);
    fputs("{\"sk-e2e-high\": {\"tier\": \"high\"}, \"sk-e2e-normal\": {\"tier\": \"normal\"},"
          " \"sk-e2e-low\": {\"tier\": \"low\"}}", kf);
    assert_int_equal(fclose(kf), 0);

    ts_engine_options eo;
    ts_engine_options_default(&eo);
    eo.max_seqs = 8;
    eo.spec = TS_SPEC_NGRAM; /* the same text; loadgen reads its counters */
    eo.spec_eager = true;    /* drafts whatever this machine's step times say */
    if (ts_engine_create(f.model, &eo, &f.engine, &err) != TS_OK)
        fail_msg("engine: %s", err.msg);
    ts_server_options so;
    ts_server_options_default(&so);
    so.port = 0;
    so.api_keys_path = f.keys_path;
    so.grace_ms = 1000;
    if (ts_server_create(&so, &f.server, &err) != TS_OK ||
        ts_server_add_model(f.server, "stories", f.engine, &err) != TS_OK ||
        ts_server_start(f.server, &err) != TS_OK)
        fail_msg("server: %s", err.msg);
    snprintf(f.url, sizeof f.url, "http://127.0.0.1:%d", ts_server_port(f.server));
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ts_server_stop(f->server);
    ts_engine_destroy(f->engine);
    ts_server_destroy(f->server);
    ts_model_free(f->model);
    return 0;
}

static void base_config(loadgen_config *cfg, const fixture *f, const int *levels, int n_levels,
                        int requests)
{
    loadgen_config_default(cfg);
    cfg->url = f->url;
    cfg->levels = levels;
    cfg->n_levels = n_levels;
    cfg->requests = requests;
    cfg->prompt_len = 12;
    cfg->max_tokens = 10;
    cfg->timeout_s = 30;
    cfg->deadline_s = 60;
}

static void test_stream_levels(void **state)
{
    fixture *f = *state;
    loadgen_keys keys;
    assert_int_equal(loadgen_keys_load(&keys, f->keys_path, NULL), TS_OK);
    static const int levels[] = {1, 4};
    loadgen_config cfg;
    base_config(&cfg, f, levels, 2, 8);
    cfg.stream = true;
    cfg.shared_prefix = 8;
    cfg.keys = &keys;
    cfg.scrape_metrics = true;
    loadgen_result r;
    ts_error err = {0};
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_OK);
    assert_int_equal(r.n_levels, 2);
    uint64_t drafted = 0;
    for (int i = 0; i < 2; i++) {
        const loadgen_level *l = &r.levels[i];
        assert_true(l->spec_seen); /* tessera's /metrics, read with the key */
        assert_true(l->spec_drafted >= l->spec_accepted);
        drafted += l->spec_drafted;
        /* by source: all prompt lookup's, none a draft model's */
        assert_true(l->spec_by_source);
        assert_int_equal(l->spec_source_drafted[LOADGEN_SPEC_NGRAM], l->spec_drafted);
        assert_int_equal(l->spec_source_accepted[LOADGEN_SPEC_NGRAM], l->spec_accepted);
        assert_int_equal(l->spec_source_drafted[LOADGEN_SPEC_DRAFT_MODEL], 0);
        if (l->all.ok != 8)
            fail_msg("level %d: %d of 8 ok (%d error kinds, first %d)", l->concurrency, l->all.ok,
                     l->n_err_kinds, l->n_err_kinds ? l->err_code[0] : 0);
        assert_int_equal(l->all.output_tokens, 8 * 10); /* ignore_eos: exactly max_tokens */
        assert_true(l->all.prompt_tokens >= 8 * 20);     /* about one token per word, BOS */
        assert_true(l->all.ttft_ms.p50 > 0 && l->all.ttft_ms.p50 <= l->all.ttft_ms.p99);
        assert_true(l->all.itl_ms.p50 >= 0 && l->all.itl_ms.p90 <= l->all.itl_ms.p99);
        assert_true(l->all.latency_ms.p50 >= l->all.ttft_ms.p50);
        assert_true(l->output_tok_s > 0 && l->req_s > 0);
    }
    assert_true(drafted > 0); /* word prompts repeat words: prompt lookup finds drafts */
    loadgen_keys_free(&keys);
}

static void test_chat_non_stream(void **state)
{
    fixture *f = *state;
    loadgen_keys keys;
    assert_int_equal(loadgen_keys_load(&keys, f->keys_path, NULL), TS_OK);
    static const int levels[] = {3};
    loadgen_config cfg;
    base_config(&cfg, f, levels, 1, 6);
    cfg.chat = true;
    cfg.model = "stories";
    cfg.keys = &keys;
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    assert_int_equal(r.levels[0].all.ok, 6);
    assert_int_equal(r.levels[0].all.output_tokens, 60);
    assert_true(r.levels[0].all.ttft_ms.p50 == r.levels[0].all.latency_ms.p50);

    /* Without a key the server answers 401; an unknown model 404. */
    cfg.keys = NULL;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    assert_int_equal(r.levels[0].all.ok, 0);
    assert_int_equal(r.levels[0].err_code[0], 401);
    assert_int_equal(r.levels[0].err_count[0], 6);
    cfg.keys = &keys;
    cfg.model = "no-such-model";
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    assert_int_equal(r.levels[0].err_code[0], 404);
    loadgen_keys_free(&keys);
}

static void test_priority_mix(void **state)
{
    fixture *f = *state;
    loadgen_keys keys;
    loadgen_mix mix;
    assert_int_equal(loadgen_keys_load(&keys, f->keys_path, NULL), TS_OK);
    assert_int_equal(loadgen_mix_parse(&mix, "high:0.3,normal:0.4,low:0.3", NULL), TS_OK);
    static const int levels[] = {16}; /* twice the engine's 8 sequences: a queue forms */
    loadgen_config cfg;
    base_config(&cfg, f, levels, 1, 32);
    cfg.stream = true;
    cfg.mix = &mix;
    cfg.keys = &keys;
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    const loadgen_level *l = &r.levels[0];
    assert_int_equal(l->all.ok, 32);
    int sent = 0;
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++) {
        assert_true(l->cls[c].sent > 0);
        assert_int_equal(l->cls[c].ok, l->cls[c].sent); /* every class completes, LOW too */
        sent += l->cls[c].sent;
    }
    assert_int_equal(sent, 32);
    cJSON *j = loadgen_result_json(&r, &cfg);
    assert_non_null(j);
    cJSON *low = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "levels"), 0), "classes"),
        "low");
    assert_int_equal(cJSON_GetObjectItem(low, "ok")->valueint, l->cls[LOADGEN_CLASS_LOW].ok);
    cJSON_Delete(j);
    loadgen_keys_free(&keys);
}

/* A tiny qwen3 embedding model (last-token pooling, stories260K's vocabulary). */
static ts_model *embedding_model(void)
{
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen3-4b"));
    model_synth_shrink(&c);
    c.pooling = TS_POOLING_LAST;
    gguf_file *g = NULL;
    tokenizer_vocab v;
    ts_error err = {0};
    if (gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &g, &err) != TS_OK ||
        vocab_read_gguf(&v, g, &err) != TS_OK)
        fail_msg("vocabulary: %s", err.msg);
    gguf_close(g);
    const char *path = tu_tmp_path("loadgen-embed.gguf");
    if (model_synth_write(path, &c, "F32", &v, 1, &err) != TS_OK)
        fail_msg("synth: %s", err.msg);
    vocab_clear(&v);
    ts_model *m = NULL;
    if (ts_model_load(path, NULL, &m, &err) != TS_OK)
        fail_msg("load: %s", err.msg);
    unlink(path);
    return m;
}

static void test_embeddings(void **state)
{
    fixture *f = *state;
    ts_model *m = embedding_model();
    ts_engine *e = eu_start(m, NULL);
    ts_server_options so;
    ts_server_options_default(&so);
    so.port = 0;
    so.grace_ms = 1000;
    ts_server *srv = NULL;
    ts_error err = {0};
    if (ts_server_create(&so, &srv, &err) != TS_OK ||
        ts_server_add_model(srv, "embed", e, &err) != TS_OK || ts_server_start(srv, &err) != TS_OK)
        fail_msg("server: %s", err.msg);
    fixture ef = {0};
    snprintf(ef.url, sizeof ef.url, "http://127.0.0.1:%d", ts_server_port(srv));

    static const int levels[] = {1, 3};
    loadgen_config cfg;
    base_config(&cfg, &ef, levels, 2, 6);
    cfg.embed = true;
    cfg.batch = 4;
    loadgen_result r;
    assert_int_equal(loadgen_run(&r, &cfg, &err), TS_OK);
    for (int i = 0; i < 2; i++) {
        const loadgen_level *l = &r.levels[i];
        if (l->all.ok != 6)
            fail_msg("level %d: %d of 6 ok (first error %d)", l->concurrency, l->all.ok,
                     l->n_err_kinds ? l->err_code[0] : 0);
        assert_true(l->all.prompt_tokens >= 6 * 4 * 12); /* a token a word at least */
        assert_int_equal(l->all.output_tokens, 0);
        assert_true(l->req_s > 0);
        assert_float_equal(l->docs_s, 4 * l->req_s, 1e-9);
        assert_float_equal(l->prompt_tok_s, (double)l->all.prompt_tokens / l->wall_s, 1e-6);
    }
    cJSON *j = loadgen_result_json(&r, &cfg);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "endpoint")->valuestring, "embeddings");
    assert_int_equal(cJSON_GetObjectItem(j, "batch")->valueint, 4);
    const cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "levels"), 0);
    assert_float_equal(cJSON_GetObjectItem(l0, "docs_s")->valuedouble, r.levels[0].docs_s, 1e-9);
    cJSON_Delete(j);

    /* a stream or an empty batch is refused before anything is sent */
    cfg.stream = true;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_ERR_INVALID_ARG);
    cfg.stream = false;
    cfg.batch = 0;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_ERR_INVALID_ARG);
    ts_server_stop(srv);
    ts_engine_destroy(e);
    ts_server_destroy(srv);
    ts_model_free(m);

    /* a model that does not pool answers 400: every request fails */
    loadgen_keys keys;
    assert_int_equal(loadgen_keys_load(&keys, f->keys_path, NULL), TS_OK);
    base_config(&cfg, f, levels, 1, 3);
    cfg.embed = true;
    cfg.keys = &keys;
    assert_int_equal(loadgen_run(&r, &cfg, NULL), TS_OK);
    assert_int_equal(r.levels[0].all.ok, 0);
    assert_int_equal(r.levels[0].err_code[0], 400);
    assert_int_equal(r.levels[0].err_count[0], 3);
    loadgen_keys_free(&keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_levels),
        cmocka_unit_test(test_chat_non_stream),
        cmocka_unit_test(test_priority_mix),
        cmocka_unit_test(test_embeddings),
    };
    return cmocka_run_group_tests_name("loadgen_e2e", tests, setup, teardown);
}
