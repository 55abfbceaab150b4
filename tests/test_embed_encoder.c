/* test_embed_encoder.c: encoder models (bert, nomic-bert) in the engine: vectors of tiny
 * random-weight models (made with model_synth_write) against the llama.cpp peer's
 * (tests/embed/encoder_ref.txt, made by `tests/embed/make_ref.py ... encoders`), for
 * mean and CLS pooling in F32, Q8_0 and F16, alone and batched; a document's vector alone
 * and in a batch of 64; sequences kept whole whatever the step budget; no KV kept;
 * refusals. */
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
#include "model/model.h"
#include "model/synth.h"
#include "tokenizer/vocab.h"
#include "ref_util.h"
#include "util.h"

/* make_ref.py's ENCODERS: name, synth shape, pooling, type. */
enum { MODELS = 7, REF_INPUTS = 4, DIM = 32 };

static const struct {
    const char *name, *shape;
    ts_pooling pooling;
    const char *type;
} specs[MODELS] = {
    {"bert-mean", "bge-small", TS_POOLING_MEAN, "F32"},
    {"bert-cls", "bge-small", TS_POOLING_CLS, "F32"},
    {"bert-cls-q8_0", "bge-small", TS_POOLING_CLS, "Q8_0"},
    {"bert-mean-f16", "bge-small", TS_POOLING_MEAN, "F16"},
    {"nomic-mean", "nomic-embed-text", TS_POOLING_MEAN, "F32"},
    {"nomic-mean-q8_0", "nomic-embed-text", TS_POOLING_MEAN, "Q8_0"},
    {"nomic-cls-f16", "nomic-embed-text", TS_POOLING_CLS, "F16"},
};

typedef struct ref_input {
    int32_t ids[128];
    int n_ids;
    float vec[DIM];
} ref_input;

static ref_input refs[MODELS][REF_INPUTS];
static ts_model *models[MODELS];

/* The tiny model of spec i at a temporary path, loaded (the file removed after). */
static ts_model *make_model(int i)
{
    ts_model_config c;
    assert_true(model_synth_shape(&c, specs[i].shape));
    model_synth_shrink(&c);
    c.pooling = specs[i].pooling;
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    char name[64];
    snprintf(name, sizeof name, "encoder-%s.gguf", specs[i].name);
    ts_model *m = tu_synth_model(&c, specs[i].type, &v, name);
    vocab_clear(&v);
    const ts_model_config *mc = ts_model_get_config(m);
    assert_true(mc->encoder);
    assert_int_equal(mc->pooling, specs[i].pooling);
    assert_int_equal(mc->dim, DIM);
    return m;
}

static void read_refs(void)
{
    char *text = ref_read(TS_SOURCE_DIR "/tests/embed/encoder_ref.txt", NULL), *cursor = text;
    int p = -1, i = 0, vectors = 0;
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        char *rest = NULL;
        if (!strncmp(line, "model ", 6)) {
            p = -1;
            for (int k = 0; k < MODELS; k++)
                if (!strcmp(line + 6, specs[k].name))
                    p = k;
            assert_true(p >= 0);
            i = 0;
        } else if (!strncmp(line, "input ", 6)) {
            assert_true(p >= 0 && i < REF_INPUTS);
            ref_input *r = &refs[p][i];
            r->n_ids = (int)ref_ids(line + 6, r->ids, 128);
            assert_true(r->n_ids > 0);
        } else if (!strncmp(line, "vector ", 7)) {
            assert_true(p >= 0 && i < REF_INPUTS);
            ref_input *r = &refs[p][i++];
            assert_int_equal((int)strtol(line + 7, &rest, 10), DIM);
            for (int k = 0; k < DIM; k++)
                r->vec[k] = strtof(rest, &rest);
            vectors++;
        }
    }
    free(text);
    assert_int_equal(vectors, MODELS * REF_INPUTS);
}

static int setup(void **state)
{
    (void)state;
    read_refs();
    for (int i = 0; i < MODELS; i++)
        models[i] = make_model(i);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < MODELS; i++)
        ts_model_free(models[i]);
    return 0;
}

/* Each reference input alone, then all at once, within cosine 0.9999 of the peer's (F32,
 * F16: they agree to 1e-6), or 0.9995 for Q8_0 (the issue asks 0.999): both passes
 * quantize the activations to int8 too, and an activation a rounding step away rounds to
 * another integer now and then; these tiny models' sharp weights (std 0.15) carry that
 * through both layers. */
static void test_matches_peer(void **state)
{
    (void)state;
    for (int p = 0; p < MODELS; p++) {
        double want = strcmp(specs[p].type, "Q8_0") ? 0.9999 : 0.9995;
        ts_engine *e = eu_start(models[p], NULL);
        float v[DIM];
        for (int i = 0; i < REF_INPUTS; i++) {
            eu_read_vector(eu_submit_embed(e, refs[p][i].ids, refs[p][i].n_ids), v, DIM);
            double c = tu_cosine(v, refs[p][i].vec, DIM);
            if (c < want)
                fail_msg("%s, input %d alone: cosine %.6f with llama.cpp's", specs[p].name, i, c);
        }
        ts_request *reqs[REF_INPUTS];
        for (int i = 0; i < REF_INPUTS; i++)
            reqs[i] = eu_submit_embed(e, refs[p][i].ids, refs[p][i].n_ids);
        for (int i = 0; i < REF_INPUTS; i++) {
            eu_read_vector(reqs[i], v, DIM);
            double c = tu_cosine(v, refs[p][i].vec, DIM);
            if (c < want)
                fail_msg("%s, input %d batched: cosine %.6f with llama.cpp's", specs[p].name, i,
                         c);
        }
        ts_engine_destroy(e);
    }
}

/* The reference tells the features apart: mean and CLS pooling, bert and nomic-bert. */
static void test_references_differ(void **state)
{
    (void)state;
    const int last = REF_INPUTS - 1;
    assert_true(tu_cosine(refs[0][last].vec, refs[1][last].vec, DIM) < 0.99);
    assert_true(tu_cosine(refs[0][last].vec, refs[4][last].vec, DIM) < 0.99);
    /* a token's vector depends on the tokens after it: attention is bidirectional */
    assert_true(tu_cosine(refs[1][1].vec, refs[1][2].vec, DIM) < 0.99);
}

static void document(int32_t *ids, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((seed >> 8) % 509);
    }
}

/* Documents' vectors alone equal those in a batch of 64, and in an engine whose step
 * budget (16 tokens) is shorter than most documents: each still runs whole. No KV block
 * is reserved or left behind. */
static void test_batch_invariance(void **state)
{
    (void)state;
    enum { DOCS = 64, MAX_LEN = 90 };
    static int32_t ids[DOCS][MAX_LEN];
    static float alone[DOCS][DIM], batched[DOCS][DIM], small[DOCS][DIM];
    int lens[DOCS];
    for (int d = 0; d < DOCS; d++) {
        lens[d] = 1 + (d * 37) % MAX_LEN;
        document(ids[d], lens[d], (unsigned)d + 1);
    }
    const int which[] = {0, 1, 4}; /* bert mean and CLS, nomic-bert */
    for (int w = 0; w < 3; w++) {
        int p = which[w];
        ts_engine *e = eu_start(models[p], NULL);
        for (int d = 0; d < DOCS; d += 7)
            eu_read_vector(eu_submit_embed(e, ids[d], lens[d]), alone[d], DIM);
        ts_request *reqs[DOCS];
        for (int d = 0; d < DOCS; d++)
            reqs[d] = eu_submit_embed(e, ids[d], lens[d]);
        for (int d = 0; d < DOCS; d++)
            eu_read_vector(reqs[d], batched[d], DIM);
        eu_wait_idle(e);
        ts_engine_stats st;
        ts_engine_get_stats(e, &st);
        assert_int_equal(st.kv_blocks_used, 0);
        assert_int_equal(st.kv_blocks_cached, 0);
        assert_true(st.kv_blocks_total <= 1); /* an encoder reserves no KV: a token pool */
        ts_engine_destroy(e);

        ts_engine_options o;
        ts_engine_options_default(&o);
        o.step_tokens = 16;
        e = eu_start(models[p], &o);
        for (int d = 0; d < DOCS; d++)
            reqs[d] = eu_submit_embed(e, ids[d], lens[d]);
        for (int d = 0; d < DOCS; d++)
            eu_read_vector(reqs[d], small[d], DIM);
        ts_engine_destroy(e);

        for (int d = 0; d < DOCS; d++)
            for (int k = 0; k < DIM; k++) {
                if (fabsf(small[d][k] - batched[d][k]) > 1e-5f)
                    fail_msg("%s, document %d (%d tokens): 16-token steps [%d] %g vs %g",
                             specs[p].name, d, lens[d], k, small[d][k], batched[d][k]);
                if (d % 7 == 0 && fabsf(alone[d][k] - batched[d][k]) > 1e-5f)
                    fail_msg("%s, document %d (%d tokens): alone [%d] %g vs batched %g",
                             specs[p].name, d, lens[d], k, alone[d][k], batched[d][k]);
            }
        assert_true(tu_cosine(batched[0], batched[1], DIM) < 0.999);
    }
}

/* An input over the context (256) is refused at submit; one of exactly 256 runs, also in
 * an engine whose step budget is smaller. A completion (no LM head) is refused. */
static void test_refusals(void **state)
{
    (void)state;
    int32_t ids[300];
    document(ids, 300, 3);
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = ids;
    p.embed = true;
    ts_request *req = NULL;
    ts_error err = {0};
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.step_tokens = 64;
    ts_engine *e = eu_start(models[0], &o);
    p.n_prompt = 257;
    assert_int_equal(ts_engine_submit(e, &p, &req, &err), TS_ERR_TOO_LONG);
    assert_non_null(strstr(err.msg, "256"));
    p.n_prompt = 256;
    float v[DIM];
    eu_read_vector(eu_submit_params(e, &p), v, DIM);
    assert_true(fabs(tu_cosine(v, v, DIM) - 1.0) < 1e-9);
    ts_request_params g = eu_greedy(ids, 5, 4);
    assert_int_equal(ts_engine_submit(e, &g, &req, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "encoder"));
    ts_engine_destroy(e);
}

/* The default step budget is 4096 rows for an encoder (16 documents of 256 tokens a step)
 * and 512 for a generative model; a budget that is set is kept for both. */
static void test_step_budget(void **state)
{
    (void)state;
    ts_engine_options o;
    ts_engine_options_default(&o);
    ts_model *generative = eu_load_stories();
    assert_int_equal(ts_engine_step_tokens(&o, models[0]), 4096);
    assert_int_equal(ts_engine_step_tokens(&o, generative), 512);
    o.step_tokens = 64;
    assert_int_equal(ts_engine_step_tokens(&o, models[0]), 64);
    assert_int_equal(ts_engine_step_tokens(&o, generative), 64);
    ts_model_free(generative);
}

/* A bert model with a WordPiece vocabulary (tokenizer.ggml.model = bert) loads, and a text
 * is embedded as llama.cpp does: [CLS], its pieces, [SEP]. The vocabulary: the specials,
 * a few words (word-initial pieces carry U+2581) and a continuation. */
static void test_wordpiece_vocabulary(void **state)
{
    (void)state;
#define WORD "\xe2\x96\x81" /* U+2581, a word's first piece */
    static const char *const texts[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", WORD "the",
                                        WORD "dog", WORD "ran", "s", WORD "home"};
#undef WORD
    enum { N = sizeof texts / sizeof *texts };
    tokenizer_vocab v;
    memset(&v, 0, sizeof v);
    v.kind = VOCAB_KIND_WPM;
    v.n_tokens = N;
    v.tokens = calloc(N, sizeof *v.tokens);
    assert_non_null(v.tokens);
    for (int i = 0; i < N; i++) {
        v.tokens[i].text = strdup(texts[i]);
        v.tokens[i].len = (uint32_t)strlen(texts[i]);
        v.tokens[i].type = i < 4 ? VOCAB_TOKEN_CONTROL : VOCAB_TOKEN_NORMAL;
    }
    v.pad_id = 0;
    v.unk_id = 1;
    v.bos_id = 2;
    v.sep_id = 3;
    v.eos_id = v.eot_id = -1;
    v.add_bos = v.add_sep = v.lowercase = v.strip_accents = true;
    ts_model_config c;
    assert_true(model_synth_shape(&c, "bge-small"));
    model_synth_shrink(&c);
    ts_model *m = tu_synth_model(&c, "F32", &v, "encoder-wpm.gguf");
    vocab_clear(&v);
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    ts_tokenize_opts o = {.add_special = true};
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_tokenize_alloc(tok, "The dogs ran", 12, &o, &ids, &n), TS_OK);
    const int32_t want[] = {2, 4, 5, 7, 6, 3}; /* [CLS] the dog ##s ran [SEP] */
    assert_int_equal(n, 6);
    assert_memory_equal(ids, want, sizeof want);
    ts_engine *e = eu_start(m, NULL);
    float a[DIM], b2[DIM];
    eu_read_vector(eu_submit_embed(e, ids, (int)n), a, DIM);
    const int32_t other[] = {2, 4, 8, 3};
    eu_read_vector(eu_submit_embed(e, other, 4), b2, DIM);
    assert_true(tu_cosine(a, b2, DIM) < 0.999);
    ts_engine_destroy(e);
    free(ids);
    ts_model_free(m);
}

/* The attention on bf16 packs of the keys and values (model_encoder.att_bf16: where the
 * pack policy packs F16 matrices, here forced, on the plain-C twin where no AMX runs)
 * against f32: a bert of 32-wide heads, F32 matrices (never packed, so only the attention
 * differs), documents of 1 to 200 tokens (several runs of 64 query rows, lengths off the
 * 16- and 32-row grids). The vectors agree to 2e-5 and are not all the same bits (the
 * packs ran); alone and batched they are the same bits. A model off packing keeps f32. */
static void test_attention_on_bf16_packs(void **state)
{
    (void)state;
    enum { DOCS = 6, WIDE = 64 };
    static const int lens[DOCS] = {1, 17, 33, 64, 100, 200};
    static int32_t ids[DOCS][200];
    ts_model_config c;
    assert_true(model_synth_shape(&c, "bge-small"));
    model_synth_shrink(&c);
    c.head_dim = 32;
    c.dim = c.n_heads * c.head_dim;
    assert_int_equal(c.dim, WIDE);
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    const char *path = tu_tmp_path("encoder-bf16-attention.gguf");
    ts_error err = {0};
    if (model_synth_write(path, &c, "F32", &v, 7, &err) != TS_OK)
        fail_msg("synth: %s", err.msg);
    vocab_clear(&v);
    static float vec[2][DOCS][WIDE], batched[DOCS][WIDE];
    for (int d = 0; d < DOCS; d++)
        document(ids[d], lens[d], (unsigned)d + 11);
    for (int f = 0; f < 2; f++) { /* 0: f32, 1: bf16 packs */
        ts_model_load_opts o = {.pack = f ? TS_PACK_FORCE : TS_PACK_OFF};
        ts_model *m = NULL;
        if (ts_model_load_with(path, &o, &m, &err) != TS_OK)
            fail_msg("load: %s", err.msg);
        assert_int_equal(m->w.enc->att_bf16, f == 1);
        ts_engine *e = eu_start(m, NULL);
        for (int d = 0; d < DOCS; d++)
            eu_read_vector(eu_submit_embed(e, ids[d], lens[d]), vec[f][d], WIDE);
        ts_request *reqs[DOCS];
        for (int d = 0; d < DOCS; d++)
            reqs[d] = eu_submit_embed(e, ids[d], lens[d]);
        for (int d = 0; d < DOCS; d++) {
            eu_read_vector(reqs[d], batched[d], WIDE);
            if (memcmp(batched[d], vec[f][d], sizeof batched[d]) != 0)
                fail_msg("%s, document %d: batched differs from alone", f ? "bf16" : "f32", d);
        }
        ts_engine_destroy(e);
        ts_model_free(m);
    }
    unlink(path);
    int same = 0;
    for (int d = 0; d < DOCS; d++) {
        same += memcmp(vec[0][d], vec[1][d], sizeof vec[0][d]) == 0;
        for (int k = 0; k < WIDE; k++)
            if (fabsf(vec[0][d][k] - vec[1][d][k]) > 2e-5f)
                fail_msg("document %d (%d tokens) [%d]: bf16 packs %g, f32 %g", d, lens[d], k,
                         vec[1][d][k], vec[0][d][k]);
    }
    assert_true(same < DOCS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_peer),
        cmocka_unit_test(test_references_differ),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_step_budget),
        cmocka_unit_test(test_wordpiece_vocabulary),
        cmocka_unit_test(test_attention_on_bf16_packs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
