/* test_embed.c: embed requests in the engine: vectors of tiny random-weight embedding models
 * of qwen3 and the other families (made with model_synth_write) against the llama.cpp peer's
 * (tests/embed/tiny_ref.txt, made by tests/embed/make_ref.py), for each pooling;
 * batch and chunk invariance; no KV blocks kept or cached after; refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine_util.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "tokenizer/vocab.h"
#include "ref_util.h"
#include "util.h"

/* The reference models (make_ref.py's MODELS): three poolings of the tiny qwen3 model
 * (dim 64), the last-token one in Q8_0, and mean pooling on the other families' tiny
 * shapes (Gemma 3's windows, Gemma 2's soft-caps, Qwen2's biases, Llama). */
enum { POOLINGS = 8, REF_INPUTS = 4, MAX_DIM = 64, REF_MAX_DIM = 256 };

static const char *const pooling_names[POOLINGS] = {"last", "mean", "cls", "last-q8_0",
                                                    "gemma3-mean", "gemma2-mean", "qwen2-mean",
                                                    "llama-mean"};
static const char *const shapes[POOLINGS] = {"qwen3-4b", "qwen3-4b", "qwen3-4b", "qwen3-4b",
                                             "gemma3-4b", "gemma2-9b", "qwen2.5-7b",
                                             "tinyllama-1.1b"};
static const ts_pooling poolings[POOLINGS] = {TS_POOLING_LAST, TS_POOLING_MEAN, TS_POOLING_CLS,
                                              TS_POOLING_LAST, TS_POOLING_MEAN, TS_POOLING_MEAN,
                                              TS_POOLING_MEAN, TS_POOLING_MEAN};
static const char *const types[POOLINGS] = {"F32", "F32", "F32", "Q8_0", "F32", "F32", "F32",
                                            "F32"};

/* The peer's vectors: per pooling, per input, its ids and its vector. */
typedef struct ref_input {
    int32_t ids[128];
    int n_ids;
    float vec[REF_MAX_DIM];
    int dim;
} ref_input;

static ref_input refs[POOLINGS][REF_INPUTS];
static ts_model *models[POOLINGS];

/* The tiny model of shape with pooling p and type at path; the loader's status (err set). */
static ts_status write_and_load(const char *shape, ts_pooling p, const char *type,
                                const char *path, ts_model **out, ts_error *err)
{
    ts_model_config c;
    assert_true(model_synth_shape(&c, shape));
    model_synth_shrink(&c);
    c.pooling = p;
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    if (model_synth_write(path, &c, type, &v, 1, err) != TS_OK)
        fail_msg("synth: %s", err->msg);
    vocab_clear(&v);
    *out = NULL;
    ts_status st = ts_model_load(path, NULL, out, err);
    unlink(path);
    return st;
}

/* The tiny model of shape, pooling p and type, as make_ref.py makes it with `tessera synth`. */
static ts_model *make_model(const char *shape, ts_pooling p, const char *type, const char *name)
{
    ts_model *m = NULL;
    ts_error err = {0};
    if (write_and_load(shape, p, type, tu_tmp_path(name), &m, &err) != TS_OK)
        fail_msg("load: %s", err.msg);
    assert_int_equal(ts_model_get_config(m)->pooling, p);
    return m;
}

/* Reads the reference file into refs. */
static void read_refs(void)
{
    char *text = ref_read(TS_SOURCE_DIR "/tests/embed/tiny_ref.txt", NULL), *cursor = text;
    int p = -1, i = 0;
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        char *rest = NULL;
        if (!strncmp(line, "model ", 6)) {
            p = -1;
            for (int k = 0; k < POOLINGS; k++)
                if (!strcmp(line + 6, pooling_names[k]))
                    p = k;
            assert_true(p >= 0);
            i = 0;
        } else if (!strncmp(line, "input ", 6)) {
            ref_input *r = &refs[p][i];
            r->n_ids = (int)ref_ids(line + 6, r->ids, 128);
            assert_true(r->n_ids > 0);
        } else if (!strncmp(line, "vector ", 7)) {
            ref_input *r = &refs[p][i++];
            r->dim = (int)strtol(line + 7, &rest, 10);
            assert_true(r->dim > 0 && r->dim <= REF_MAX_DIM);
            for (int k = 0; k < r->dim; k++)
                r->vec[k] = strtof(rest, &rest);
        }
    }
    free(text);
    for (int k = 0; k < POOLINGS; k++)
        assert_int_equal(refs[k][REF_INPUTS - 1].dim, k < 4 ? MAX_DIM : refs[k][0].dim);
}

static int setup(void **state)
{
    (void)state;
    read_refs();
    for (int p = 0; p < POOLINGS; p++) {
        char name[32];
        snprintf(name, sizeof name, "embed-%s.gguf", pooling_names[p]);
        models[p] = make_model(shapes[p], poolings[p], types[p], name);
        assert_int_equal(ts_model_get_config(models[p])->dim, refs[p][0].dim);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int p = 0; p < POOLINGS; p++)
        ts_model_free(models[p]);
    return 0;
}

static double norm(const float *a, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)a[i] * a[i];
    return sqrt(s);
}

/* Every reference input, alone and then all at once, within cosine 0.9999 of the peer's
 * vector (the issue asks 0.999), each of unit norm. */
static void test_matches_peer(void **state)
{
    (void)state;
    for (int p = 0; p < POOLINGS; p++) {
        ts_engine *e = eu_start(models[p], NULL);
        ts_request *reqs[REF_INPUTS];
        float v[REF_MAX_DIM];
        int dim = refs[p][0].dim;
        for (int i = 0; i < REF_INPUTS; i++) {
            eu_read_vector(eu_submit_embed(e, refs[p][i].ids, refs[p][i].n_ids), v, dim);
            double c = tu_cosine(v, refs[p][i].vec, dim);
            if (c < 0.9999)
                fail_msg("%s, input %d alone: cosine %.6f with llama.cpp's", pooling_names[p],
                         i, c);
            assert_true(fabs(norm(v, dim) - 1.0) < 1e-5);
        }
        for (int i = 0; i < REF_INPUTS; i++)
            reqs[i] = eu_submit_embed(e, refs[p][i].ids, refs[p][i].n_ids);
        for (int i = 0; i < REF_INPUTS; i++) {
            eu_read_vector(reqs[i], v, dim);
            double c = tu_cosine(v, refs[p][i].vec, dim);
            if (c < 0.9999)
                fail_msg("%s, input %d batched: cosine %.6f with llama.cpp's", pooling_names[p],
                         i, c);
        }
        ts_engine_destroy(e);
    }
}

/* The poolings give different vectors of the same input: the reference tells them apart. */
static void test_poolings_differ(void **state)
{
    (void)state;
    const ref_input *last = &refs[0][REF_INPUTS - 1], *mean = &refs[1][REF_INPUTS - 1];
    assert_memory_equal(last->ids, mean->ids, (size_t)last->n_ids * sizeof(int32_t));
    assert_true(tu_cosine(last->vec, mean->vec, MAX_DIM) < 0.99);
}

/* A document of n tokens from seed: ids in 3..511. */
static void document(int32_t *ids, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((seed >> 8) % 509);
    }
}

/* Documents' vectors alone equal those of the same documents in a batch of 64, and in
 * steps of 16 tokens (each document pooled over several chunks). */
static void test_batch_invariance(void **state)
{
    (void)state;
    enum { DOCS = 64, MAX_LEN = 70 };
    static int32_t ids[DOCS][MAX_LEN];
    static float alone[DOCS][MAX_DIM], batched[DOCS][MAX_DIM];
    int lens[DOCS];
    for (int p = 0; p < 2; p++) { /* last and mean */
        for (int d = 0; d < DOCS; d++) {
            lens[d] = 1 + (d * 37) % MAX_LEN;
            document(ids[d], lens[d], (unsigned)d + 1);
        }
        ts_engine *e = eu_start(models[p], NULL);
        for (int d = 0; d < DOCS; d += 9) /* a sample alone: enough to compare */
            eu_read_vector(eu_submit_embed(e, ids[d], lens[d]), alone[d], MAX_DIM);
        ts_request *reqs[DOCS];
        for (int d = 0; d < DOCS; d++)
            reqs[d] = eu_submit_embed(e, ids[d], lens[d]);
        for (int d = 0; d < DOCS; d++)
            eu_read_vector(reqs[d], batched[d], MAX_DIM);
        ts_engine_destroy(e);

        ts_engine_options o;
        ts_engine_options_default(&o);
        o.step_tokens = 16;
        e = eu_start(models[p], &o);
        static float chunked[DOCS][MAX_DIM];
        for (int d = 0; d < DOCS; d++)
            reqs[d] = eu_submit_embed(e, ids[d], lens[d]);
        for (int d = 0; d < DOCS; d++)
            eu_read_vector(reqs[d], chunked[d], MAX_DIM);
        ts_engine_destroy(e);

        for (int d = 0; d < DOCS; d++) {
            for (int k = 0; k < MAX_DIM; k++)
                if (fabsf(chunked[d][k] - batched[d][k]) > 1e-5f)
                    fail_msg("%s pooling, document %d (%d tokens): chunked [%d] %g vs %g",
                             pooling_names[p], d, lens[d], k, chunked[d][k], batched[d][k]);
            if (d % 9)
                continue;
            for (int k = 0; k < MAX_DIM; k++)
                if (fabsf(alone[d][k] - batched[d][k]) > 1e-5f)
                    fail_msg("%s pooling, document %d (%d tokens): alone [%d] %g vs batched %g",
                             pooling_names[p], d, lens[d], k, alone[d][k], batched[d][k]);
        }
        /* and the documents differ from each other */
        assert_true(tu_cosine(batched[0], batched[1], MAX_DIM) < 0.999);
    }
}

/* Embeddings keep no KV block and put none in the prefix cache; generation beside them is
 * unchanged (the same text as alone). */
static void test_blocks_and_cache(void **state)
{
    (void)state;
    ts_engine *e = eu_start(models[1], NULL);
    int32_t ids[100];
    document(ids, 100, 7);
    ts_request *gen = eu_submit(e, ids, 40, 12, TS_PRIORITY_NORMAL);
    eu_result alone = {0};
    eu_collect(gen, &alone);
    ts_request_release(gen);

    ts_engine_stats before;
    eu_wait_idle(e);
    ts_engine_get_stats(e, &before);
    gen = eu_submit(e, ids, 40, 12, TS_PRIORITY_NORMAL);
    ts_request *reqs[8];
    for (int i = 0; i < 8; i++)
        reqs[i] = eu_submit_embed(e, ids, 64 + i); /* the same leading blocks each time */
    float v[MAX_DIM];
    for (int i = 0; i < 8; i++)
        eu_read_vector(reqs[i], v, MAX_DIM);
    eu_result mixed = {0};
    eu_collect(gen, &mixed);
    ts_request_release(gen);
    assert_false(mixed.error);
    assert_string_equal(mixed.text[0], alone.text[0]);
    eu_wait_idle(e);
    ts_engine_stats after;
    ts_engine_get_stats(e, &after);
    assert_int_equal(after.kv_blocks_used, 0);
    assert_int_equal(after.kv_blocks_cached, before.kv_blocks_cached);
    assert_int_equal(after.prefix_lookups, before.prefix_lookups + 1); /* the generation's */
    assert_int_equal(after.requests_failed, 0);
    eu_result_free(&alone);
    eu_result_free(&mixed);
    ts_engine_destroy(e);
}

/* An embedding preempted half-way (a generation of higher priority needs its blocks)
 * starts again from its first token and gives the vector it gives alone. */
static void test_preempted_embedding(void **state)
{
    (void)state;
    int32_t gen_ids[30], doc[60];
    document(gen_ids, 30, 11);
    document(doc, 60, 12);
    float alone[MAX_DIM], v[MAX_DIM];
    ts_engine *e = eu_start(models[1], NULL);
    eu_read_vector(eu_submit_embed(e, doc, 60), alone, MAX_DIM);
    ts_engine_destroy(e);

    ts_engine_options o;
    ts_engine_options_default(&o);
    o.kv_blocks = 3;   /* the generation's 30 + 30 tokens fill 2 blocks, the document 2 */
    o.step_tokens = 8; /* the document takes 8 steps: the generation crosses a block meanwhile */
    o.prefill_cap = 8;
    o.prefix_cache = false;
    e = eu_start(models[1], &o);
    ts_request_params g = eu_greedy(gen_ids, 30, 30);
    g.ignore_eos = true;
    ts_request *gen = eu_submit_params(e, &g);
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = doc;
    p.n_prompt = 60;
    p.embed = true;
    p.priority = TS_PRIORITY_LOW;
    ts_request *emb = eu_submit_params(e, &p);
    eu_read_vector(emb, v, MAX_DIM);
    eu_result r = {0};
    eu_collect(gen, &r);
    ts_request_release(gen);
    assert_false(r.error);
    eu_result_free(&r);
    ts_engine_stats st;
    eu_wait_idle(e);
    ts_engine_get_stats(e, &st);
    assert_true(st.preemptions > 0);
    assert_int_equal(st.kv_blocks_used, 0);
    ts_engine_destroy(e);
    for (int k = 0; k < MAX_DIM; k++)
        if (fabsf(v[k] - alone[k]) > 1e-5f)
            fail_msg("preempted embedding [%d] %g vs %g alone", k, v[k], alone[k]);
}

/* A model that does not pool, and an input over the context, are refused at submit. */
static void test_refusals(void **state)
{
    (void)state;
    ts_model *stories = eu_load_stories();
    ts_engine *e = eu_start(stories, NULL);
    int32_t ids[300];
    document(ids, 300, 3);
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = ids;
    p.n_prompt = 5;
    p.embed = true;
    ts_request *req = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "pooling_type"));
    ts_engine_destroy(e);
    ts_model_free(stories);

    e = eu_start(models[0], NULL);
    p.n_prompt = 257; /* the tiny model's context is 256 */
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "256"));
    p.n_prompt = 256;
    float v[MAX_DIM];
    eu_read_vector(eu_submit_params(e, &p), v, MAX_DIM);
    ids[0] = 100000;
    p.n_prompt = 3;
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_INVALID_ARG);
    ts_engine_destroy(e);

    /* a pool of 4 blocks: 96 tokens fit (with admission's one slot more), 128 never would */
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.kv_blocks = 4;
    e = eu_start(models[0], &o);
    document(ids, 128, 5);
    p.n_prompt = 128;
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "KV blocks"));
    p.n_prompt = 96;
    eu_read_vector(eu_submit_params(e, &p), v, MAX_DIM);
    ts_engine_destroy(e);
}

/* ARCH.pooling_type 4 (rank) loads a reranker, whose engine refuses embed requests; a
 * value past it is malformed. */
static void test_pooling_key(void **state)
{
    (void)state;
    ts_model *m = make_model("qwen3-4b", TS_POOLING_RANK, "F32", "rank.gguf");
    ts_engine *e = eu_start(m, NULL);
    int32_t ids[3] = {1, 2, 3};
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = ids;
    p.n_prompt = 3;
    p.embed = true;
    ts_request *req = NULL;
    ts_error err = {0};
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "pooling_type is rank"));
    ts_engine_destroy(e);
    ts_model_free(m);
    m = NULL;
    assert_int_equal(write_and_load("qwen3-4b", (ts_pooling)9, "F32", tu_tmp_path("bad.gguf"),
                                    &m, &err),
                     TS_ERR_FORMAT);
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_peer),
        cmocka_unit_test(test_poolings_differ),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_blocks_and_cache),
        cmocka_unit_test(test_preempted_embedding),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pooling_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
