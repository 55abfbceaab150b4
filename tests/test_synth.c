/* test_synth.c: random-weight models (model_synth_write) in F32, Q8_0 and Q4_K_M's mix,
 * every family's shapes (their headers read back at full size, shrunk files loaded and
 * run), Llama 3.2's and 3.1's RoPE factors, and the GGUF writer's tensors filled by
 * callback at write time. */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "model/forward_ref.h"
#include "gguf/gguf.h"
#include "model/model_gguf.h"
#include "model/synth.h"
#include "quant.h"
#include "quant/quantize.h"
#include "tessera/engine.h"
#include "cli/cli.h"
#include "engine_util.h"
#include "util.h"

static tokenizer_vocab stories_vocab(void)
{
    gguf_file *f = NULL;
    tokenizer_vocab v;
    assert_int_equal(gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &f, NULL), TS_OK);
    assert_int_equal(vocab_read_gguf(&v, f, NULL), TS_OK);
    gguf_close(f);
    return v;
}

static ts_model_config tiny_config(void)
{
    ts_model_config c;
    assert_true(model_synth_shape(&c, "test-tiny"));
    return c;
}

static ts_model *load(const char *path)
{
    ts_model *m = NULL;
    ts_error err = {0};
    if (ts_model_load(path, NULL, &m, &err) != TS_OK)
        fail_msg("loading %s: %s", path, err.msg);
    return m;
}

/* Flat f32 arrays (decoded from the matrices' types, owned) of the embedding and of each
 * kind of layer matrix over all layers (wq|wk|wv, wo, w1|w3, w2 per layer), and of the
 * norms (borrowed). */
typedef struct views {
    float *mat[5];
    size_t mat_n[5];
    const float *norm[3];
    size_t norm_n[3];
} views;

/* Appends matrix m decoded to f32 at *dst and moves *dst past it. */
static void append(float **dst, const simd_qmat *m)
{
    float *f = tu_dequant_matrix(m);
    size_t n = (size_t)m->N * m->K;
    memcpy(*dst, f, n * sizeof(float));
    *dst += n;
    free(f);
}

static views views_of(const ts_model *m)
{
    const ts_model_config *c = &m->cfg;
    size_t dim = (size_t)c->dim, L = (size_t)c->n_layers, ffn = (size_t)c->hidden_dim;
    views v = {
        .mat_n = {(size_t)c->vocab_size * dim, L * (size_t)model_qkv_rows(c) * dim,
                  L * dim * (size_t)c->n_heads * c->head_dim, L * 2 * ffn * dim, L * dim * ffn},
        .norm = {m->w.rms_final, m->w.rms_att, m->w.rms_ffn},
        .norm_n = {dim, L * dim, L * dim},
    };
    float *p[5];
    for (int k = 0; k < 5; k++)
        assert_non_null(p[k] = v.mat[k] = malloc(v.mat_n[k] * sizeof(float)));
    append(&p[0], &m->w.tok_embd);
    for (size_t l = 0; l < L; l++) {
        const model_layer *ly = &m->w.layers[l];
        append(&p[1], &ly->wq);
        append(&p[1], &ly->wk);
        append(&p[1], &ly->wv);
        append(&p[2], &ly->wo);
        append(&p[3], &ly->w1);
        append(&p[3], &ly->w3);
        append(&p[4], &ly->w2);
    }
    for (int k = 0; k < 5; k++)
        assert_true(p[k] == v.mat[k] + v.mat_n[k]);
    return v;
}

static void views_free(views *v)
{
    for (int k = 0; k < 5; k++)
        free(v->mat[k]);
}

/* Every field of two configs, named in the failure. */
static void assert_config_equal(const ts_model_config *got, const ts_model_config *want)
{
    assert_string_equal(got->arch, want->arch);
    assert_string_equal(got->name, want->name);
#define SAME_INT(f)                                                                          \
    if (got->f != want->f)                                                                   \
        fail_msg("%s %s: " #f " is %d, want %d", want->arch, want->name, (int)got->f,        \
                 (int)want->f)
#define SAME_FLOAT(f)                                                                        \
    if (got->f != want->f)                                                                   \
        fail_msg("%s %s: " #f " is %g, want %g", want->arch, want->name, (double)got->f,     \
                 (double)want->f)
    SAME_INT(dim);
    SAME_INT(hidden_dim);
    SAME_INT(n_layers);
    SAME_INT(n_heads);
    SAME_INT(n_kv_heads);
    SAME_INT(head_dim);
    SAME_INT(vocab_size);
    SAME_INT(context_len);
    SAME_FLOAT(rope_freq_base);
    SAME_FLOAT(rope_scale);
    SAME_FLOAT(rms_eps);
    SAME_INT(rope_neox);
    SAME_INT(rope_factors);
    SAME_INT(tied_output);
    SAME_INT(qkv_fused);
    SAME_INT(ffn_fused);
    SAME_INT(qkv_bias);
    SAME_INT(qk_norm);
    SAME_INT(post_norms);
    SAME_INT(embd_scaled);
    SAME_INT(ffn_act);
    SAME_FLOAT(attn_scale);
    SAME_FLOAT(attn_softcap);
    SAME_FLOAT(final_softcap);
    SAME_INT(swa_window);
    SAME_INT(swa_pattern);
    SAME_FLOAT(rope_freq_base_swa);
    SAME_FLOAT(rope_scale_swa);
    SAME_INT(n_experts);
    SAME_INT(n_experts_used);
#undef SAME_INT
#undef SAME_FLOAT
}

/* The published hyper-parameters of each listed shape, in --list's order. */
static const struct shape_want {
    const char *name, *arch;
    int dim, ffn, layers, heads, kv, head_dim, vocab, ctx;
    float rope, eps;
    bool tied, rope_factors, qkv_bias, qkv_fused;
} SHAPES[] = {
    /* name, arch, dim, ffn, layers, heads, kv, head_dim, vocab, context, rope base, eps,
     * tied, rope_factors, qkv_bias, qkv_fused */
    {"stories110m", "llama", 768, 2048, 12, 12, 12, 64, 32000, 1024, 1e4f, 1e-5f,
     true, false, false, false},
    {"smollm2-360m", "llama", 960, 2560, 32, 15, 5, 64, 49152, 8192, 1e5f, 1e-5f,
     true, false, false, false},
    {"tinyllama-1.1b", "llama", 2048, 5632, 22, 32, 4, 64, 32000, 2048, 1e4f, 1e-5f,
     false, false, false, false},
    {"llama3.2-1b", "llama", 2048, 8192, 16, 32, 8, 64, 128256, 131072, 5e5f, 1e-5f,
     true, true, false, false},
    {"llama3.1-8b", "llama", 4096, 14336, 32, 32, 8, 128, 128256, 131072, 5e5f, 1e-5f,
     false, true, false, false},
    {"mistral-7b", "llama", 4096, 14336, 32, 32, 8, 128, 32000, 32768, 1e4f, 1e-5f,
     false, false, false, false},
    {"mistral-7b-v0.3", "llama", 4096, 14336, 32, 32, 8, 128, 32768, 32768, 1e6f, 1e-5f,
     false, false, false, false},
    {"mistral-nemo-12b", "llama", 5120, 14336, 40, 32, 8, 128, 131072, 1024000, 1e6f, 1e-5f,
     false, false, false, false},
    {"qwen2.5-7b", "qwen2", 3584, 18944, 28, 28, 4, 128, 152064, 32768, 1e6f, 1e-6f,
     false, false, true, false},
    {"qwen3-4b", "qwen3", 2560, 9728, 36, 32, 8, 128, 151936, 40960, 1e6f, 1e-6f,
     true, false, false, false},
    {"qwen3-8b", "qwen3", 4096, 12288, 36, 32, 8, 128, 151936, 40960, 1e6f, 1e-6f,
     false, false, false, false},
    {"gemma2-9b", "gemma2", 3584, 14336, 42, 16, 8, 256, 256000, 8192, 1e4f, 1e-6f,
     true, false, false, false},
    {"gemma3-4b", "gemma3", 2560, 10240, 34, 8, 4, 256, 262208, 131072, 1e6f, 1e-6f,
     true, false, false, false},
    {"gemma3-12b", "gemma3", 3840, 15360, 48, 16, 8, 256, 262208, 131072, 1e6f, 1e-6f,
     true, false, false, false},
    {"phi-4-mini", "phi3", 3072, 8192, 32, 24, 8, 128, 200064, 131072, 1e4f, 1e-5f,
     true, false, false, true},
    {"qwen3-30b-a3b", "qwen3moe", 2048, 768, 48, 32, 4, 128, 151936, 40960, 1e6f, 1e-6f,
     false, false, false, false},
    {"qwen2moe-a2.7b", "qwen2moe", 2048, 1408, 24, 16, 16, 128, 151936, 8192, 1e6f, 1e-6f,
     false, false, true, false},
    {"mixtral-8x7b", "llama", 4096, 14336, 32, 32, 8, 128, 32000, 32768, 1e6f, 1e-5f,
     false, false, false, false},
    {"qwen3-embedding-0.6b", "qwen3", 1024, 3072, 28, 16, 8, 128, 151669, 32768, 1e6f, 1e-6f,
     true, false, false, false},
    {"bge-small", "bert", 384, 1536, 12, 12, 12, 32, 30522, 512, 1e4f, 1e-12f,
     false, false, true, false},
    {"all-minilm-l6", "bert", 384, 1536, 6, 12, 12, 32, 30522, 512, 1e4f, 1e-12f,
     false, false, true, false},
    {"nomic-embed-text", "nomic-bert", 768, 3072, 12, 12, 12, 64, 30522, 2048, 1e3f, 1e-12f,
     false, false, false, true},
    {"bge-reranker-base", "bert", 768, 3072, 12, 12, 12, 64, 250002, 512, 1e4f, 1e-5f,
     false, false, true, false},
};

/* The pooling a shape's file names: last token for Qwen3-Embedding, rank for the
 * reranker, CLS for bge, mean for the other encoders, none for the generative models. */
static ts_pooling shape_pooling(const char *name)
{
    if (strstr(name, "embedding"))
        return TS_POOLING_LAST;
    if (strstr(name, "reranker"))
        return TS_POOLING_RANK;
    if (strstr(name, "bge"))
        return TS_POOLING_CLS;
    if (strstr(name, "minilm") || strstr(name, "nomic"))
        return TS_POOLING_MEAN;
    return TS_POOLING_NONE;
}
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

static void test_shapes(void **state)
{
    (void)state;
    for (int i = 0; i < N_SHAPES; i++) {
        const struct shape_want *w = &SHAPES[i];
        ts_model_config c;
        assert_true(model_synth_shape(&c, w->name));
        assert_string_equal(model_synth_shape_name(i), w->name);
        assert_string_equal(c.arch, w->arch);
        assert_int_equal(c.dim, w->dim);
        assert_int_equal(c.hidden_dim, w->ffn);
        assert_int_equal(c.n_layers, w->layers);
        assert_int_equal(c.n_heads, w->heads);
        assert_int_equal(c.n_kv_heads, w->kv);
        assert_int_equal(c.head_dim, w->head_dim);
        assert_int_equal(c.vocab_size, w->vocab);
        assert_int_equal(c.context_len, w->ctx);
        assert_true(c.rope_freq_base == w->rope);
        assert_true(c.rms_eps == w->eps);
        assert_int_equal(c.tied_output, w->tied);
        assert_int_equal(c.rope_factors, w->rope_factors);
        assert_int_equal(c.qkv_bias, w->qkv_bias);
        assert_int_equal(c.qkv_fused, w->qkv_fused);
        assert_int_equal(model_synth_check(&c, NULL), TS_OK);
        assert_int_equal(c.pooling, shape_pooling(w->name));
        assert_int_equal(c.encoder, !strcmp(w->arch, "bert") || !strcmp(w->arch, "nomic-bert"));
    }
    assert_null(model_synth_shape_name(N_SHAPES)); /* test-tiny is not listed */
    ts_model_config c;
    assert_false(model_synth_shape(&c, "gpt-5"));

    /* The family features, from model_arch.c's rows and the published configs. */
    assert_true(model_synth_shape(&c, "mistral-nemo-12b"));
    assert_int_not_equal(c.head_dim, c.dim / c.n_heads); /* 128, not 160 */
    assert_false(c.rope_neox || c.qk_norm || c.swa_window);
    assert_true(model_synth_shape(&c, "qwen2.5-7b"));
    assert_true(c.rope_neox && !c.qk_norm && !c.post_norms && c.ffn_act == TS_FFN_SILU);
    assert_true(model_synth_shape(&c, "qwen3-8b"));
    assert_true(c.rope_neox && c.qk_norm && !c.qkv_bias && !c.post_norms);
    assert_true(model_synth_shape(&c, "gemma2-9b"));
    assert_true(c.post_norms && c.embd_scaled && !c.qk_norm && c.ffn_act == TS_FFN_GELU_TANH);
    assert_true(c.attn_softcap == 50.0f && c.final_softcap == 30.0f);
    assert_int_equal(c.swa_window, 4096);
    assert_int_equal(c.swa_pattern, 2);
    assert_true(c.attn_scale == 0.0f && c.rope_scale == 1.0f);
    assert_true(model_synth_shape(&c, "gemma3-4b"));
    assert_true(c.qk_norm && c.post_norms && c.embd_scaled && c.ffn_act == TS_FFN_GELU_TANH);
    assert_true(c.attn_softcap == 0.0f && c.final_softcap == 0.0f);
    assert_int_equal(c.swa_window, 1024);
    assert_int_equal(c.swa_pattern, 6);
    assert_true(c.rope_freq_base == 1e6f && c.rope_freq_base_swa == 1e4f);
    assert_true(c.rope_scale == 8.0f);
    assert_true(model_synth_shape(&c, "gemma3-12b"));
    assert_int_equal(c.swa_window, 1024);
    assert_true(c.rope_scale == 8.0f);
    assert_true(model_synth_shape(&c, "phi-4-mini"));
    assert_true(c.qkv_fused && c.ffn_fused && c.rope_neox && !c.swa_window);
    assert_true(c.rope_scale == 1.0f && !c.rope_factors);
}

/* c's metadata alone (no tensors, no vocabulary: no gigabytes written) read back by the
 * loader's config reader, which must give c but for what it takes from the tensors. */
static void read_back_header(ts_model_config *out, const ts_model_config *c)
{
    gguf_writer *g = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    gguf_file *f = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_create(0, &g, NULL), TS_OK);
    model_gguf_add_config(g, c, QUANT_FTYPE_Q4_K_M);
    assert_int_equal(gguf_writer_finish(g, &bytes, &len, &err), TS_OK);
    gguf_writer_free(g);
    assert_int_equal(gguf_open_buffer(bytes, len, &f, &err), TS_OK);
    if (model_gguf_read_config(out, f, NULL, &err) != TS_OK)
        fail_msg("%s: %s", c->name, err.msg);
    int64_t ft = 0;
    assert_int_equal(gguf_get_i64(f, "general.file_type", &ft, NULL), TS_OK);
    assert_int_equal(ft, QUANT_FTYPE_Q4_K_M);
    gguf_close(f);
    free(bytes);
}

static void test_full_shapes_headers_read_back(void **state)
{
    (void)state;
    for (int i = 0; model_synth_shape_name(i); i++) {
        ts_model_config c, got;
        assert_true(model_synth_shape(&c, model_synth_shape_name(i)));
        read_back_header(&got, &c);
        /* the tensors tell these: a tied output, fused Q/K/V, biases, Llama 3's factors */
        got.tied_output = c.tied_output;
        got.qkv_fused = c.qkv_fused;
        got.qkv_bias = c.qkv_bias;
        got.rope_factors = c.rope_factors;
        assert_config_equal(&got, &c);
    }
    /* A window pattern and windowed base of its own are written; the family's are not,
     * as converted Gemma 3 files leave them out. */
    ts_model_config c, got;
    assert_true(model_synth_shape(&c, "gemma3-4b"));
    c.swa_pattern = 4;
    c.rope_freq_base_swa = 20000.0f;
    read_back_header(&got, &c);
    assert_int_equal(got.swa_pattern, 4);
    assert_true(got.rope_freq_base_swa == 20000.0f);
    gguf_writer *g = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    gguf_file *f = NULL;
    assert_true(model_synth_shape(&c, "gemma3-4b"));
    assert_int_equal(gguf_writer_create(0, &g, NULL), TS_OK);
    model_gguf_add_config(g, &c, QUANT_FTYPE_F32);
    assert_int_equal(gguf_writer_finish(g, &bytes, &len, NULL), TS_OK);
    gguf_writer_free(g);
    assert_int_equal(gguf_open_buffer(bytes, len, &f, NULL), TS_OK);
    assert_null(gguf_find_kv(f, "gemma3.attention.sliding_window_pattern"));
    assert_null(gguf_find_kv(f, "gemma3.rope.freq_base_swa"));
    assert_null(gguf_find_kv(f, "gemma3.attn_logit_softcapping"));
    assert_non_null(gguf_find_kv(f, "gemma3.attention.sliding_window"));
    assert_non_null(gguf_find_kv(f, "gemma3.rope.scaling.factor"));
    int64_t kl = 0;
    assert_int_equal(gguf_get_i64(f, "gemma3.attention.key_length", &kl, NULL), TS_OK);
    assert_int_equal(kl, 256);
    gguf_close(f);
    free(bytes);
}

/* Synth quantizes through quant_row: ggml's Q8_0 layout, f16 scale then 32 int8. */
static void test_q8_0_matches_ggml_layout(void **state)
{
    (void)state;
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = i < 32 ? (float)(i - 16) * 0.25f : 0.0f;
    uint8_t q[68];
    assert_true(quant_row(q, x, QT_Q8_0, 64));
    uint16_t h;
    memcpy(&h, q, 2);
    /* steps of 1/4 from -4 sit exactly on the grid of scale 1/32, q = -128 .. 120 */
    assert_true(gguf_f16_to_f32(h) == 1.0f / 32.0f);
    assert_int_equal((int8_t)q[2], -128);
    assert_int_equal((int8_t)q[2 + 16], 0);
    assert_int_equal((int8_t)q[2 + 31], 120);
    memcpy(&h, q + 34, 2);
    assert_int_equal(h, 0);                    /* an all-zero block has scale 0 */
    for (int i = 0; i < 32; i++)
        assert_int_equal(q[36 + i], 0);
}

static void test_f32_model_loads_with_the_config_and_distribution(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c = tiny_config();
    const char *path = tu_tmp_path("synth-f32.gguf");
    ts_error err = {0};
    assert_int_equal(model_synth_write(path, &c, "F32", &v, 42, &err), TS_OK);
    ts_model *m = load(path);
    assert_string_equal(m->cfg.name, "synth-test-tiny");
    assert_int_equal(m->cfg.dim, c.dim);
    assert_int_equal(m->cfg.hidden_dim, c.hidden_dim);
    assert_int_equal(m->cfg.n_layers, c.n_layers);
    assert_int_equal(m->cfg.n_heads, c.n_heads);
    assert_int_equal(m->cfg.n_kv_heads, c.n_kv_heads);
    assert_int_equal(m->cfg.vocab_size, c.vocab_size);
    assert_int_equal(m->cfg.context_len, c.context_len);
    assert_true(m->cfg.rope_freq_base == c.rope_freq_base);
    assert_false(m->cfg.tied_output);
    assert_int_equal(ts_tokenizer_vocab_size(ts_model_get_tokenizer(m)), 512);
    views w = views_of(m);
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < w.norm_n[k]; i++)
            assert_true(w.norm[k][i] == 1.0f);
    for (int k = 0; k < 5; k++) {
        double s = 0, s2 = 0;
        for (size_t i = 0; i < w.mat_n[k]; i++) {
            assert_true(isfinite(w.mat[k][i]));
            s += w.mat[k][i];
            s2 += (double)w.mat[k][i] * w.mat[k][i];
        }
        double mean = s / (double)w.mat_n[k], sd = sqrt(s2 / (double)w.mat_n[k] - mean * mean);
        assert_true(fabs(mean) < 0.002);
        assert_true(sd > 0.018 && sd < 0.022);
    }
    views_free(&w);
    /* The untied output matrix is drawn apart from the embedding. */
    assert_memory_not_equal(m->w.output.data, m->w.tok_embd.data, 64 * sizeof(float));
    ts_model_free(m);
    remove(path);
    vocab_clear(&v);
}

/* Llama 3.2's factors (head_dim 64, base 500000; llama3 scaling, factor 32, low 1, high 4,
 * original context 8192), as convert_hf_to_gguf.py works them out (in double here): the
 * 15 fastest pairs kept, 3 blended, the 14 slowest slowed 32 times. */
static void test_llama3_rope_factors(void **state)
{
    (void)state;
    ts_model_config c;
    assert_true(model_synth_shape(&c, "llama3.2-1b"));
    float f[32];
    model_synth_llama3_factors(f, &c);
    static const double blended[3] = {1.6513292457638984, 3.2922621029408843, 9.666728978753293};
    for (int i = 0; i < 32; i++) {
        double want = i < 15 ? 1.0 : i < 18 ? blended[i - 15] : 32.0;
        if (fabs(f[i] - want) > 1e-5 * want)
            fail_msg("factor %d is %.9g, want %.9g", i, (double)f[i], want);
    }
    /* Llama 3.1 8B: factor 8 over head_dim 128 at the same base: the same wavelengths, so
     * pairs 2i of 128 match pairs i of 64 at 1 and blend toward 8 instead of 32 */
    ts_model_config c8;
    assert_true(model_synth_shape(&c8, "llama3.1-8b"));
    float f8[64];
    model_synth_llama3_factors(f8, &c8);
    for (int i = 0; i < 64; i++) {
        assert_true(f8[i] >= 1.0f && f8[i] <= 8.0f && (i == 0 || f8[i] >= f8[i - 1]));
        if (i % 2 == 0 && f[i / 2] == 1.0f)
            assert_true(f8[i] == 1.0f);
    }
    assert_true(f8[63] == 8.0f && f8[0] == 1.0f);

    /* A synthetic file with factors carries them as rope_freqs.weight, which the loader
     * reads back into the model's frequencies: test-tiny's 8 pairs at base 10000 keep 6,
     * blend one (7.7309) and slow the last by 32. */
    tokenizer_vocab v = stories_vocab();
    c = tiny_config();
    c.rope_factors = true;
    const char *path = tu_tmp_path("synth-rope.gguf");
    ts_error err = {0};
    assert_int_equal(model_synth_write(path, &c, "Q8_0", &v, 5, &err), TS_OK);
    gguf_file *g = NULL;
    assert_int_equal(gguf_open(path, &g, &err), TS_OK);
    const gguf_tensor *t = gguf_find_tensor(g, "rope_freqs.weight");
    assert_non_null(t);
    assert_int_equal(t->type, GGUF_TENSOR_F32);
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->ne[0], 8);
    gguf_close(g);
    ts_model *m = load(path);
    assert_true(m->cfg.rope_factors);
    model_synth_llama3_factors(f, &c);
    assert_memory_equal(m->w.rope_factors, f, 8 * sizeof(float));
    assert_true(fabs(f[6] - 7.730890218821194) < 1e-5 && f[5] == 1.0f && f[7] == 32.0f);
    for (int i = 0; i < 8; i++)
        assert_true(m->w.rope_freq[i] == 1.0f / powf(10000.0f, (float)(2 * i) / 16.0f) / f[i]);
    ts_model_free(m);
    remove(path);
    vocab_clear(&v);
}

static void test_q8_0_within_quantisation_error_of_f32(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c = tiny_config();
    char *pf = strdup(tu_tmp_path("synth-a.gguf")), *pq = strdup(tu_tmp_path("synth-q.gguf"));
    assert_int_equal(model_synth_write(pf, &c, "F32", &v, 9, NULL), TS_OK);
    assert_int_equal(model_synth_write(pq, &c, "Q8_0", &v, 9, NULL), TS_OK);
    ts_model *f = load(pf), *q = load(pq);
    assert_int_equal(q->w.layers[0].wq.type, QT_Q8_0); /* computed on as Q8_0, not expanded */
    views wf = views_of(f), wq = views_of(q);
    for (int k = 0; k < 3; k++)
        assert_memory_equal(wf.norm[k], wq.norm[k], wf.norm_n[k] * sizeof(float));
    /* Every row length is a multiple of 32, so blocks of the flat arrays are Q8_0 blocks.
     * With step d = amax/127: no element is off by more than a step (the scale search may
     * clip the largest by up to one), and the RMS error is at most that of rounding to
     * the nearest step (d / sqrt(12) = 0.289 d), as the search keeps the least error. */
    for (int k = 0; k < 5; k++) {
        assert_int_equal(wf.mat_n[k] % 32, 0);
        bool any_diff = false;
        double se = 0.0, sd = 0.0;
        for (size_t b = 0; b < wf.mat_n[k]; b += 32) {
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(wf.mat[k][b + i]));
            float d = amax / 127.0f;
            for (int i = 0; i < 32; i++) {
                float e = fabsf(wf.mat[k][b + i] - wq.mat[k][b + i]);
                assert_true(e <= 1.01f * d + 1e-9f);
                any_diff |= e > 0;
                se += (double)e * e;
                sd += (double)d * d;
            }
        }
        assert_true(se <= 0.3 * 0.3 * sd);
        assert_true(any_diff);
    }
    size_t lf = 0, lq = 0;
    char *bf = tu_read_file(pf, &lf), *bq = tu_read_file(pq, &lq);
    assert_true(lq * 3 < lf); /* 34 bytes per 32 weights instead of 128 */
    views_free(&wf);
    views_free(&wq);
    free(bf);
    free(bq);
    ts_model_free(f);
    ts_model_free(q);
    remove(pf);
    remove(pq);
    free(pf);
    free(pq);
    vocab_clear(&v);
}

/* Whether the files at a and b (of the same length) hold the same bytes. */
static bool same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    char *ba = tu_read_file(a, &la), *bb = tu_read_file(b, &lb);
    assert_non_null(ba);
    assert_non_null(bb);
    assert_int_equal(la, lb);
    bool same = memcmp(ba, bb, la) == 0;
    free(ba);
    free(bb);
    return same;
}

static void test_same_seed_same_bytes(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c = tiny_config();
    char *p[3];
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "synth-seed%d.gguf", i);
        p[i] = strdup(tu_tmp_path(name));
        assert_int_equal(model_synth_write(p[i], &c, "Q8_0", &v, i < 2 ? 5 : 6, NULL),
                         TS_OK);
    }
    assert_true(same_bytes(p[0], p[1]));
    assert_false(same_bytes(p[0], p[2]));
    for (int i = 0; i < 3; i++) {
        remove(p[i]);
        free(p[i]);
    }
    vocab_clear(&v);
}

static void test_vocab_padding_tying_and_refusals(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c = tiny_config();
    const char *path = tu_tmp_path("synth-pad.gguf");
    c.vocab_size = 520;
    c.tied_output = true;
    assert_int_equal(model_synth_write(path, &c, "F32", &v, 1, NULL), TS_OK);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f, NULL), TS_OK);
    assert_null(gguf_find_tensor(f, "output.weight"));
    gguf_close(f);
    ts_model *m = load(path);
    assert_true(m->cfg.tied_output);
    const tokenizer_vocab *mv = tokenizer_get_vocab(ts_model_get_tokenizer(m));
    assert_int_equal(mv->n_tokens, 520);
    assert_string_equal(mv->tokens[511].text, v.tokens[511].text);
    assert_string_equal(mv->tokens[512].text, "<unused_0>");
    assert_string_equal(mv->tokens[519].text, "<unused_7>");
    assert_int_equal(mv->tokens[519].type, VOCAB_TOKEN_UNUSED);
    size_t len = 0;
    ts_token_bytes(ts_model_get_tokenizer(m), 515, &len);
    assert_int_equal(len, 0); /* unused tokens decode to nothing */
    ts_model_free(m);
    remove(path);

    ts_error err = {0};
    c.vocab_size = 500;
    assert_int_equal(model_synth_write(path, &c, "F32", &v, 1, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "512 tokens"));
    assert_int_equal(access(path, F_OK), -1);
    c = tiny_config();
    assert_int_equal(model_synth_write(path, &c, "Q4_2", &v, 1, &err), TS_ERR_UNSUPPORTED);
    c.hidden_dim = 100;
    assert_int_equal(model_synth_write(path, &c, "Q8_0", &v, 1, &err),
                     TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "multiples of 32"));
    c.n_heads = 3;
    assert_int_equal(model_synth_write(path, &c, "F32", &v, 1, &err), TS_ERR_FORMAT);
    assert_int_equal(model_synth_write("/nonexistent-dir/x.gguf", &(ts_model_config){0}, "F32", &v,
                                       1, &err), TS_ERR_FORMAT);
    c = tiny_config();
    assert_int_equal(model_synth_write("/nonexistent-dir/x.gguf", &c, "F32", &v, 1, &err),
                     TS_ERR_IO);
    assert_int_equal(access(path, F_OK), -1);
    vocab_clear(&v);
}

static void test_generation_is_finite(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c = tiny_config();
    const char *path = tu_tmp_path("synth-gen.gguf");
    assert_int_equal(model_synth_write(path, &c, "Q8_0", &v, 3, NULL), TS_OK);
    ts_model *m = load(path);
    /* The reference pass: every logit finite at every position. */
    ref_forward rf = {0};
    assert_int_equal(ref_forward_init(&rf, m, 64, NULL), TS_OK);
    int32_t tok = 1;
    for (int pos = 0; pos < 64; pos++) {
        const float *logits = ref_forward_token(&rf, tok, pos);
        int best = 0;
        for (int i = 0; i < c.vocab_size; i++) {
            assert_true(isfinite(logits[i]));
            best = logits[i] > logits[best] ? i : best;
        }
        tok = best;
    }
    ref_forward_free(&rf);
    /* The engine: tokens come out with finite log-probabilities. */
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.kv_blocks = 16;
    ts_engine *e = NULL;
    assert_int_equal(ts_engine_create(m, &o, &e, NULL), TS_OK);
    int32_t prompt[4] = {1, 400, 401, 402};
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = prompt;
    p.n_prompt = 4;
    p.max_tokens = 24;
    p.ignore_eos = true;
    ts_request *r = NULL;
    assert_int_equal(ts_engine_submit(e, &p, &r, NULL), TS_OK);
    ts_event ev;
    int tokens = 0;
    while (ts_request_next_event(r, &ev, -1) == TS_OK) {
        assert_int_not_equal(ev.kind, TS_EVENT_ERROR);
        if (ev.kind == TS_EVENT_TOKEN) {
            tokens++;
            assert_true(isfinite(ev.logprob));
            assert_true(ev.token >= 0 && ev.token < c.vocab_size);
        }
        ts_event_clear(&ev);
    }
    assert_int_equal(tokens, 24);
    ts_request_release(r);
    ts_engine_destroy(e);
    ts_model_free(m);
    remove(path);
    vocab_clear(&v);
}

/* --type Q4_K_M at a shape whose rows are whole super-blocks (dim 256, 8 layers, 4 query
 * heads per KV head): llama.cpp's mix, tensor by tensor; the weights keep their spread. At
 * test-tiny's dim 64 the K types fall back: Q5_0 for the matrices, Q8_0 for the LM head. */
static void test_q4_k_m_mix(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c = tiny_config();
    c.dim = 256;
    c.hidden_dim = 512;
    c.n_layers = 8;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 32;
    const char *path = tu_tmp_path("synth-q4km.gguf");
    ts_error err = {0};
    if (model_synth_write(path, &c, "Q4_K_M", &v, 11, &err) != TS_OK)
        fail_msg("%s", err.msg);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f, &err), TS_OK);
    int64_t ft = -1;
    assert_int_equal(gguf_get_i64(f, "general.file_type", &ft, NULL), TS_OK);
    assert_int_equal(ft, 15);
    assert_int_equal(gguf_find_tensor(f, "token_embd.weight")->type, QT_Q4_K);
    assert_int_equal(gguf_find_tensor(f, "output.weight")->type, QT_Q6_K);
    assert_int_equal(gguf_find_tensor(f, "output_norm.weight")->type, QT_F32);
    for (int l = 0; l < 8; l++) {
        /* more bits in the first and last eighth (0, 7) and every third after (3, 6) */
        uint32_t more = l == 0 || l == 3 || l == 6 || l == 7 ? QT_Q6_K : QT_Q4_K;
        char name[64];
        static const char *const plain[] = {"attn_q", "attn_k", "attn_output", "ffn_gate",
                                            "ffn_up"};
        for (int k = 0; k < 5; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, plain[k]);
            assert_int_equal(gguf_find_tensor(f, name)->type, QT_Q4_K);
        }
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        assert_int_equal(gguf_find_tensor(f, name)->type, more);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        assert_int_equal(gguf_find_tensor(f, name)->type, more);
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        assert_int_equal(gguf_find_tensor(f, name)->type, QT_F32);
    }
    const gguf_tensor *t = gguf_find_tensor(f, "blk.5.ffn_up.weight");
    float *w = malloc((size_t)t->n_elems * sizeof *w);
    assert_int_equal(gguf_tensor_to_f32(w, t, (size_t)t->n_elems, &err), TS_OK);
    double s2 = 0.0;
    for (uint64_t i = 0; i < t->n_elems; i++)
        s2 += (double)w[i] * w[i];
    double sd = sqrt(s2 / (double)t->n_elems);
    assert_true(sd > 0.018 && sd < 0.022);
    free(w);
    gguf_close(f);

    c = tiny_config();
    assert_int_equal(model_synth_write(path, &c, "Q4_K_M", &v, 11, &err), TS_OK);
    assert_int_equal(gguf_open(path, &f, &err), TS_OK);
    assert_int_equal(gguf_find_tensor(f, "blk.1.attn_q.weight")->type, QT_Q5_0);
    assert_int_equal(gguf_find_tensor(f, "output.weight")->type, QT_Q8_0);
    gguf_close(f);
    remove(path);
    vocab_clear(&v);
}

/* ---- every family, shrunk ---- */

/* Whether the GGUF at path has a tensor called name. */
static bool has_tensor(const char *path, const char *name)
{
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f, NULL), TS_OK);
    bool has = gguf_find_tensor(f, name) != NULL;
    gguf_close(f);
    return has;
}

/* Three greedy requests in one batch, prompts (14 tokens) and completions (16) past a
 * shrunk window of 8: every one completes with its tokens, and the two equal prompts give
 * equal text. */
static void generate_batched(const ts_model *m)
{
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.kv_blocks = 32;
    ts_engine *e = eu_start(m, &o);
    int32_t a[14], b[14];
    for (int i = 0; i < 14; i++) {
        a[i] = i == 0 ? 1 : 300 + 7 * i;
        b[i] = i == 0 ? 1 : 100 + 13 * i;
    }
    const int32_t *prompts[3] = {a, b, a};
    ts_request *r[3];
    for (int k = 0; k < 3; k++) {
        ts_request_params p = eu_greedy(prompts[k], 14, 16);
        p.ignore_eos = true;
        r[k] = eu_submit_params(e, &p);
    }
    eu_result res[3];
    for (int k = 0; k < 3; k++) {
        memset(&res[k], 0, sizeof res[k]);
        eu_collect(r[k], &res[k]);
        if (res[k].error)
            fail_msg("%s: request %d: %s", m->cfg.name, k, res[k].error_message);
        assert_int_equal(res[k].n_done, 1);
        assert_int_equal(res[k].tokens[0], 16);
    }
    assert_string_equal(res[0].text[0], res[2].text[0]);
    for (int k = 0; k < 3; k++) {
        eu_result_free(&res[k]);
        ts_request_release(r[k]);
    }
    ts_engine_destroy(e);
}

/* Each family's shape shrunk, in one of the types quantize takes: the file has the
 * family's tensors, loads with exactly the shrunk config (its features read back from
 * keys and tensors), and generates in a batch. */
static void test_every_family_shrunk_loads_and_generates(void **state)
{
    (void)state;
    static const struct {
        const char *shape, *type;
        const char *has[3], *lacks[2]; /* tensors the family's file has and has not */
    } cases[] = {
        {"llama3.2-1b", "Q8_0", {"rope_freqs.weight", "blk.1.ffn_gate.weight"},
         {"output.weight", "blk.0.attn_q_norm.weight"}},
        {"mistral-nemo-12b", "Q4_K_M", {"blk.0.attn_q.weight", "output.weight"},
         {"blk.0.attn_q.bias"}},
        {"qwen2.5-7b", "Q8_0", {"blk.1.attn_q.bias", "blk.1.attn_v.bias", "output.weight"},
         {"blk.0.attn_q_norm.weight"}},
        {"qwen3-4b", "F16", {"blk.0.attn_q_norm.weight", "blk.1.attn_k_norm.weight"},
         {"output.weight", "blk.0.attn_q.bias"}},
        {"qwen3-8b", "Q4_K_M", {"blk.1.attn_k_norm.weight", "output.weight"},
         {"blk.0.post_ffw_norm.weight"}},
        {"gemma2-9b", "Q8_0", {"blk.1.post_attention_norm.weight", "blk.1.post_ffw_norm.weight"},
         {"blk.0.attn_q_norm.weight", "output.weight"}},
        {"gemma3-4b", "Q4_0", {"blk.5.post_ffw_norm.weight", "blk.5.attn_q_norm.weight"},
         {"blk.6.attn_norm.weight", "output.weight"}},
        {"gemma3-12b", "F32", {"blk.0.post_attention_norm.weight", "blk.0.attn_k_norm.weight"},
         {"output.weight"}},
        {"phi-4-mini", "Q8_0", {"blk.0.attn_qkv.weight", "blk.1.ffn_up.weight"},
         {"blk.0.attn_q.weight", "blk.0.ffn_gate.weight"}},
        {"qwen3-30b-a3b", "Q4_K_M",
         {"blk.1.ffn_gate_inp.weight", "blk.1.ffn_down_exps.weight", "blk.0.attn_q_norm.weight"},
         {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"}},
        {"mixtral-8x7b", "Q8_0", {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight"},
         {"blk.0.ffn_down.weight", "blk.0.attn_q_norm.weight"}},
    };
    tokenizer_vocab v = stories_vocab();
    const char *path = tu_tmp_path("synth-family.gguf");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_model_config c;
        ts_error err = {0};
        assert_true(model_synth_shape(&c, cases[i].shape));
        model_synth_shrink(&c);
        if (model_synth_write(path, &c, cases[i].type, &v, 17, &err) != TS_OK)
            fail_msg("%s %s: %s", cases[i].shape, cases[i].type, err.msg);
        for (int k = 0; k < 3 && cases[i].has[k]; k++)
            if (!has_tensor(path, cases[i].has[k]))
                fail_msg("%s: no %s", cases[i].shape, cases[i].has[k]);
        for (int k = 0; k < 2 && cases[i].lacks[k]; k++)
            if (has_tensor(path, cases[i].lacks[k]))
                fail_msg("%s: %s", cases[i].shape, cases[i].lacks[k]);
        ts_model *m = load(path);
        assert_config_equal(&m->cfg, &c);
        generate_batched(m);
        ts_model_free(m);
    }
    remove(path);
    vocab_clear(&v);
}

/* Distinct rows of tensor `name` of the file at path (its rows compared byte for byte). */
static int distinct_rows(const char *path, const char *name, uint64_t *n_rows)
{
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f, NULL), TS_OK);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    assert_non_null(t);
    uint64_t rows = t->n_elems / t->ne[0], rb = t->nbytes / rows;
    int distinct = 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t q = 0;
        while (q < r && memcmp(t->data + q * rb, t->data + r * rb, rb))
            q++;
        distinct += q == r;
    }
    gguf_close(f);
    *n_rows = rows;
    return distinct;
}

/* model_synth_opts.distinct_rows: a quantized layer matrix (a mixture's experts included)
 * holds that many distinct rows, each one of the rows drawn without the option; the
 * embedding, norms and the router stay fully drawn; the same arguments give the same
 * bytes, and the file loads and generates. */
static void test_distinct_rows(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen3-30b-a3b"));
    model_synth_shrink(&c);
    const char *full = strdup(tu_tmp_path("synth-full.gguf"));
    const char *pooled[2] = {strdup(tu_tmp_path("synth-pool0.gguf")),
                             strdup(tu_tmp_path("synth-pool1.gguf"))};
    model_synth_opts opts = {.distinct_rows = 3};
    assert_int_equal(model_synth_write(full, &c, "Q8_0", &v, 4, NULL), TS_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(model_synth_write_with(pooled[i], &c, "Q8_0", &v, 4, &opts, NULL),
                         TS_OK);
    static const char *const matrices[] = {"blk.0.attn_q.weight", "blk.1.ffn_up_exps.weight",
                                           "blk.1.ffn_down_exps.weight"};
    uint64_t rows;
    int n;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(distinct_rows(pooled[0], matrices[i], &rows), 3);
        assert_true(rows > 3);
        n = distinct_rows(full, matrices[i], &rows);
        assert_int_equal(n, rows);
    }
    n = distinct_rows(pooled[0], "token_embd.weight", &rows);
    assert_int_equal(n, rows);
    n = distinct_rows(pooled[0], "blk.0.ffn_gate_inp.weight", &rows);
    assert_int_equal(n, rows);
    /* the pool is the first rows' draws: a pooled matrix's rows are rows of the full one */
    gguf_file *ff = NULL, *fp = NULL;
    assert_int_equal(gguf_open(full, &ff, NULL), TS_OK);
    assert_int_equal(gguf_open(pooled[0], &fp, NULL), TS_OK);
    const gguf_tensor *tf = gguf_find_tensor(ff, "blk.1.ffn_up_exps.weight"),
                      *tp = gguf_find_tensor(fp, "blk.1.ffn_up_exps.weight");
    uint64_t rb = tf->nbytes / (tf->n_elems / tf->ne[0]);
    for (uint64_t r = 0; r < tp->n_elems / tp->ne[0]; r++) {
        int q = 0;
        while (q < 3 && memcmp(tp->data + r * rb, tf->data + (uint64_t)q * rb, rb))
            q++;
        assert_true(q < 3);
    }
    gguf_close(ff);
    gguf_close(fp);
    assert_true(same_bytes(pooled[0], pooled[1]));
    ts_model *m = load(pooled[0]);
    generate_batched(m);
    ts_model_free(m);
    for (int i = 0; i < 2; i++) {
        remove(pooled[i]);
        free((char *)pooled[i]);
    }
    remove(full);
    free((char *)full);
    vocab_clear(&v);
}

/* The shrunk shapes keep what makes the family: heads per KV head, a head width apart
 * from dim / n_heads where the model has one, a window with a global layer after it, and
 * Llama 3's factor of the shape it came from. */
static void test_shrink(void **state)
{
    (void)state;
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen2.5-7b"));
    model_synth_shrink(&c);
    assert_string_equal(c.name, "synth-qwen2.5-7b-tiny");
    assert_int_equal(c.n_kv_heads, 2);
    assert_int_equal(c.n_heads, 14); /* 7 per KV head */
    assert_int_equal(c.dim, 14 * 16);
    assert_true(c.qkv_bias && c.rope_freq_base == 1e6f && c.rms_eps == 1e-6f);
    assert_true(model_synth_shape(&c, "mistral-nemo-12b"));
    model_synth_shrink(&c);
    assert_int_equal(c.dim, 64);
    assert_int_equal(c.n_heads * c.head_dim, 128);
    assert_true(model_synth_shape(&c, "gemma3-4b"));
    model_synth_shrink(&c);
    assert_int_equal(c.swa_window, 8);
    assert_int_equal(c.n_layers, 6);
    assert_int_equal(ts_model_layer_window(&c, 4), 8);
    assert_int_equal(ts_model_layer_window(&c, 5), 0);
    assert_true(c.qk_norm && c.post_norms && c.rope_scale == 8.0f && c.rope_freq_base_swa == 1e4f);
    assert_true(model_synth_shape(&c, "gemma2-9b"));
    model_synth_shrink(&c);
    assert_int_equal(c.n_layers, 2);
    assert_true(c.attn_softcap == 50.0f && c.final_softcap == 30.0f);
    assert_int_equal(model_synth_check(&c, NULL), TS_OK);
    assert_true(model_synth_shape(&c, "phi-4-mini"));
    model_synth_shrink(&c);
    assert_true(c.qkv_fused && c.ffn_fused && c.tied_output);
    assert_int_equal(c.n_heads, 6);

    /* llama3.1-8b's factor 8 survives the "-tiny" name, and reaches the file */
    assert_true(model_synth_shape(&c, "llama3.1-8b"));
    model_synth_shrink(&c);
    assert_string_equal(c.name, "synth-llama3.1-8b-tiny");
    float f[8];
    model_synth_llama3_factors(f, &c);
    assert_true(f[7] == 8.0f);
    tokenizer_vocab v = stories_vocab();
    const char *path = tu_tmp_path("synth-l31.gguf");
    assert_int_equal(model_synth_write(path, &c, "Q8_0", &v, 2, NULL), TS_OK);
    ts_model *m = load(path);
    assert_memory_equal(m->w.rope_factors, f, sizeof f);
    ts_model_free(m);
    remove(path);
    vocab_clear(&v);
}

/* A feature the family's row would not read back is refused before anything is written. */
static void test_family_mismatch_refused(void **state)
{
    (void)state;
    tokenizer_vocab v = stories_vocab();
    const char *path = tu_tmp_path("synth-bad.gguf");
    ts_error err = {0};
    ts_model_config c = tiny_config();
    c.qk_norm = true; /* a llama file has no q/k norms */
    assert_int_equal(model_synth_write(path, &c, "F32", &v, 1, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "qk_norm"));
    c = tiny_config();
    c.swa_window = 8;
    assert_int_equal(model_synth_check(&c, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "swa_window"));
    c = tiny_config();
    c.attn_softcap = 30.0f;
    assert_int_equal(model_synth_check(&c, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "soft-caps"));
    c = tiny_config();
    snprintf(c.arch, sizeof c.arch, "gpt2");
    assert_int_equal(model_synth_write(path, &c, "F32", &v, 1, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "gemma3"));
    assert_true(model_synth_shape(&c, "phi-4-mini"));
    model_synth_shrink(&c);
    c.ffn_fused = false; /* phi3's ffn_up always holds the gate */
    assert_int_equal(model_synth_write(path, &c, "Q8_0", &v, 1, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "ffn_fused"));
    assert_true(model_synth_shape(&c, "gemma2-9b"));
    model_synth_shrink(&c);
    c.swa_window = 0; /* a window key of 0 is refused, so the default 4096 would come back */
    assert_int_equal(model_synth_check(&c, &err), TS_ERR_INVALID_ARG);
    assert_true(model_synth_shape(&c, "gemma2-9b"));
    c.n_layers = 46; /* the 27B's layer count gives its attention scale */
    assert_int_equal(model_synth_check(&c, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "attn_scale"));
    assert_int_equal(access(path, F_OK), -1);
    vocab_clear(&v);
}

/* `tessera synth --tiny` writes the shrunk family; --list exits 0; a shape the list does
 * not have is a usage error. */
static void test_cli_tiny_and_list(void **state)
{
    (void)state;
    char *path = strdup(tu_tmp_path("synth-cli.gguf"));
    char *vocab = strdup(tu_shared("models/stories260K/stories260K.gguf"));
    char *argv[] = {"synth", "--shape", "gemma3-12b", "--tiny", "--type", "Q8_0",
                    "--vocab", vocab, "-o", path, NULL};
    assert_int_equal(cli_synth(10, argv), 0);
    ts_model *m = load(path);
    ts_model_config c;
    assert_true(model_synth_shape(&c, "gemma3-12b"));
    model_synth_shrink(&c);
    assert_config_equal(&m->cfg, &c);
    ts_model_free(m);
    remove(path);
    /* --list's table, through a file in place of stdout: a line per shape with its
     * family, sizes and features */
    char *out = strdup(tu_tmp_path("synth-list.txt"));
    char *list[] = {"synth", "--list", NULL};
    fflush(stdout);
    int saved = dup(1), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    int rc = cli_synth(2, list);
    fflush(stdout);
    dup2(saved, 1);
    close(fd);
    close(saved);
    assert_int_equal(rc, 0);
    size_t n = 0;
    char *text = tu_read_file(out, &n);
    assert_non_null(text);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    assert_int_equal(lines, 1 + N_SHAPES);
    static const char *const rows[] = {
        "gemma3-4b         gemma3    3.88B  2560 10240     34      8    4    256  262208  131072",
        "qwen2.5-7b        qwen2     7.62B  3584 18944     28     28    4    128  152064   32768",
        "mistral-nemo-12b  llama    12.25B  5120 14336     40     32    8    128  131072 1024000",
    };
    for (int i = 0; i < 3; i++)
        if (!strstr(text, rows[i]))
            fail_msg("--list lacks \"%s\":\n%s", rows[i], text);
    static const char *const feats[] = {"window:1024/6", "softcap:50/30", "fused-qkv fused-gate-up",
                                        "qkv-bias", "qk-norm", "rope-linear:8"};
    for (int i = 0; i < 6; i++)
        if (!strstr(text, feats[i]))
            fail_msg("--list lacks %s:\n%s", feats[i], text);
    free(text);
    remove(out);
    free(out);
    char *bad[] = {"synth", "--shape", "gemma4-1t", "--vocab", vocab, "-o", path, NULL};
    assert_int_equal(cli_synth(7, bad), 2); /* its usage goes to stderr */
    assert_int_equal(access(path, F_OK), -1);
    free(path);
    free(vocab);
}

/* ---- the writer's fill callback ---- */

typedef struct fill_state {
    uint64_t ne0, next_row, fail_at;
} fill_state;

static ts_status fill_counting(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                               ts_error *err)
{
    fill_state *s = user;
    assert_int_equal(row0, s->next_row); /* rows come in order, each once */
    if (s->fail_at && row0 + n_rows > s->fail_at)
        return ts_error_set(err, TS_ERR_INTERNAL, "fill failed at row %llu",
                            (unsigned long long)s->fail_at);
    float *f = (float *)dst;
    for (uint64_t i = 0; i < n_rows * s->ne0; i++)
        f[i] = (float)(row0 * s->ne0 + i);
    s->next_row += n_rows;
    return TS_OK;
}

static void test_writer_fill_matches_data_across_chunks(void **state)
{
    (void)state;
    enum { NE0 = 1000, ROWS = 2500 }; /* 10 MB: three 4 MiB chunks */
    float *data = malloc((size_t)NE0 * ROWS * sizeof *data);
    assert_non_null(data);
    for (size_t i = 0; i < (size_t)NE0 * ROWS; i++)
        data[i] = (float)i;
    const uint64_t ne[2] = {NE0, ROWS}, small[1] = {3};
    const float three[3] = {7, 8, 9};
    uint8_t *bytes[2];
    size_t len[2];
    for (int k = 0; k < 2; k++) {
        gguf_writer *w = NULL;
        assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
        gguf_writer_add_tensor(w, "small", GGUF_TENSOR_F32, 1, small, three, sizeof three);
        fill_state s = {.ne0 = NE0};
        if (k == 0)
            gguf_writer_add_tensor(w, "big", GGUF_TENSOR_F32, 2, ne, data,
                                   (uint64_t)NE0 * ROWS * 4);
        else
            gguf_writer_add_tensor_fill(w, "big", GGUF_TENSOR_F32, 2, ne, fill_counting, &s);
        assert_int_equal(gguf_writer_finish(w, &bytes[k], &len[k], NULL), TS_OK);
        if (k == 1)
            assert_int_equal(s.next_row, ROWS);
        gguf_writer_free(w);
    }
    assert_int_equal(len[0], len[1]);
    assert_memory_equal(bytes[0], bytes[1], len[0]);

    /* To a file, and a failing fill: the error comes back and no file is left. */
    const char *path = tu_tmp_path("fill.gguf");
    for (int k = 0; k < 2; k++) {
        gguf_writer *w = NULL;
        fill_state s = {.ne0 = NE0, .fail_at = k ? 2000 : 0};
        ts_error err = {0};
        assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
        gguf_writer_add_tensor(w, "small", GGUF_TENSOR_F32, 1, small, three, sizeof three);
        gguf_writer_add_tensor_fill(w, "big", GGUF_TENSOR_F32, 2, ne, fill_counting, &s);
        ts_status st = gguf_writer_write_file(w, path, &err);
        gguf_writer_free(w);
        if (k == 0) {
            assert_int_equal(st, TS_OK);
            size_t n = 0;
            char *file = tu_read_file(path, &n);
            assert_int_equal(n, len[0]);
            assert_memory_equal(file, bytes[0], n);
            free(file);
        } else {
            assert_int_equal(st, TS_ERR_INTERNAL);
            assert_string_equal(err.msg, "fill failed at row 2000");
            assert_int_equal(access(path, F_OK), -1);
        }
    }
    remove(path);

    /* A fill tensor needs a function; errors stay sticky. */
    gguf_writer *w = NULL;
    ts_error err = {0};
    uint8_t *out = NULL;
    size_t n = 0;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    assert_int_equal(gguf_writer_add_tensor_fill(w, "x", GGUF_TENSOR_F32, 1, small, NULL, NULL),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(gguf_writer_finish(w, &out, &n, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "'x'"));
    gguf_writer_free(w);
    free(bytes[0]);
    free(bytes[1]);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_full_shapes_headers_read_back),
        cmocka_unit_test(test_shrink),
        cmocka_unit_test(test_family_mismatch_refused),
        cmocka_unit_test(test_every_family_shrunk_loads_and_generates),
        cmocka_unit_test(test_cli_tiny_and_list),
        cmocka_unit_test(test_q8_0_matches_ggml_layout),
        cmocka_unit_test(test_f32_model_loads_with_the_config_and_distribution),
        cmocka_unit_test(test_llama3_rope_factors),
        cmocka_unit_test(test_q8_0_within_quantisation_error_of_f32),
        cmocka_unit_test(test_same_seed_same_bytes),
        cmocka_unit_test(test_vocab_padding_tying_and_refusals),
        cmocka_unit_test(test_generation_is_finite),
        cmocka_unit_test(test_q4_k_m_mix),
        cmocka_unit_test(test_distinct_rows),
        cmocka_unit_test(test_writer_fill_matches_data_across_chunks),
    };
    return cmocka_run_group_tests_name("synth", tests, NULL, NULL);
}
