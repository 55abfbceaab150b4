/* synth.c: random-weight GGUF models of every family at real shapes, generated row by row
 * as the writer streams them, in F32 or any of llama.cpp's ftypes (each tensor in its
 * mix's type). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_arch.h"
#include "model/model_gguf.h"
#include "model/synth.h"
#include "quant.h"
#include "quant/quantize.h"

typedef struct synth_shape {
    const char *name;
    const char *arch; /* general.architecture: the family's row of model_arch.c */
    bool hidden;      /* for tests; not listed */
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, context_len;
    int head_dim;     /* attention.key_length; 0: dim / n_heads */
    float rope_freq_base;
    float rope_scale; /* linear rope_scaling's factor; 0: none */
    float rms_eps;    /* 0: 1e-5 */
    bool tied_output, qkv_bias, qkv_fused;
    float llama3_factor; /* rope_scaling llama3's factor, as rope_freqs.weight; 0: none */
    int swa_window;      /* the windowed layers' span; 0: the family's default */
    int n_experts, n_experts_used; /* a mixture of experts (hidden_dim: each one's) */
    int shared_ffn_dim;  /* a shared expert's feed-forward length; 0: none */
    ts_pooling pooling;  /* an embedding model's pooling; 0: a generative model */
} synth_shape;

/* From each model's published config.json (llama2.c's README for stories110m, whose
 * checkpoint shares the classifier with the embedding: 110M parameters with it tied).
 * mistral-7b is v0.1 (vocabulary 32000, base 10000), mistral-7b-v0.3 its 32768-token,
 * base 1e6 successor; both untied, 32768 positions. Mistral Nemo is converted as a llama
 * file whose heads (128) are narrower than dim / n_heads (160). Gemma 3's 4B and 12B
 * scale RoPE linearly by 8 (rope_scaling), base 1e6 on global layers and 1e4 (the
 * family's default) on windowed ones; Gemma 2's window and soft-caps are the family's
 * defaults (4096; 50 and 30). Phi-4-mini's RoPE is written plain and whole-head: its
 * LongRoPE factors and partial rotary factor (0.75) are left out, as the loader refuses
 * both. */
static const synth_shape shapes[] = {
    {.name = "stories110m", .arch = "llama", .dim = 768, .hidden_dim = 2048, .n_layers = 12,
     .n_heads = 12, .n_kv_heads = 12, .vocab_size = 32000, .context_len = 1024,
     .rope_freq_base = 10000.0f, .tied_output = true},
    {.name = "smollm2-360m", .arch = "llama", .dim = 960, .hidden_dim = 2560, .n_layers = 32,
     .n_heads = 15, .n_kv_heads = 5, .vocab_size = 49152, .context_len = 8192,
     .rope_freq_base = 100000.0f, .tied_output = true},
    {.name = "tinyllama-1.1b", .arch = "llama", .dim = 2048, .hidden_dim = 5632,
     .n_layers = 22, .n_heads = 32, .n_kv_heads = 4, .vocab_size = 32000,
     .context_len = 2048, .rope_freq_base = 10000.0f},
    {.name = "llama3.2-1b", .arch = "llama", .dim = 2048, .hidden_dim = 8192, .n_layers = 16,
     .n_heads = 32, .n_kv_heads = 8, .vocab_size = 128256, .context_len = 131072,
     .rope_freq_base = 500000.0f, .tied_output = true, .llama3_factor = 32.0f},
    {.name = "llama3.1-8b", .arch = "llama", .dim = 4096, .hidden_dim = 14336, .n_layers = 32,
     .n_heads = 32, .n_kv_heads = 8, .vocab_size = 128256, .context_len = 131072,
     .rope_freq_base = 500000.0f, .llama3_factor = 8.0f},
    {.name = "mistral-7b", .arch = "llama", .dim = 4096, .hidden_dim = 14336, .n_layers = 32,
     .n_heads = 32, .n_kv_heads = 8, .vocab_size = 32000, .context_len = 32768,
     .rope_freq_base = 10000.0f},
    {.name = "mistral-7b-v0.3", .arch = "llama", .dim = 4096, .hidden_dim = 14336,
     .n_layers = 32, .n_heads = 32, .n_kv_heads = 8, .vocab_size = 32768,
     .context_len = 32768, .rope_freq_base = 1000000.0f},
    {.name = "mistral-nemo-12b", .arch = "llama", .dim = 5120, .hidden_dim = 14336,
     .n_layers = 40, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128, .vocab_size = 131072,
     .context_len = 1024000, .rope_freq_base = 1000000.0f},
    {.name = "qwen2.5-7b", .arch = "qwen2", .dim = 3584, .hidden_dim = 18944, .n_layers = 28,
     .n_heads = 28, .n_kv_heads = 4, .vocab_size = 152064, .context_len = 32768,
     .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f, .qkv_bias = true},
    {.name = "qwen3-4b", .arch = "qwen3", .dim = 2560, .hidden_dim = 9728, .n_layers = 36,
     .n_heads = 32, .n_kv_heads = 8, .head_dim = 128, .vocab_size = 151936,
     .context_len = 40960, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f,
     .tied_output = true},
    {.name = "qwen3-8b", .arch = "qwen3", .dim = 4096, .hidden_dim = 12288, .n_layers = 36,
     .n_heads = 32, .n_kv_heads = 8, .head_dim = 128, .vocab_size = 151936,
     .context_len = 40960, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f},
    {.name = "gemma2-9b", .arch = "gemma2", .dim = 3584, .hidden_dim = 14336, .n_layers = 42,
     .n_heads = 16, .n_kv_heads = 8, .head_dim = 256, .vocab_size = 256000,
     .context_len = 8192, .rope_freq_base = 10000.0f, .rms_eps = 1e-6f, .tied_output = true},
    {.name = "gemma3-4b", .arch = "gemma3", .dim = 2560, .hidden_dim = 10240, .n_layers = 34,
     .n_heads = 8, .n_kv_heads = 4, .head_dim = 256, .vocab_size = 262208,
     .context_len = 131072, .rope_freq_base = 1000000.0f, .rope_scale = 8.0f,
     .rms_eps = 1e-6f, .tied_output = true, .swa_window = 1024},
    {.name = "gemma3-12b", .arch = "gemma3", .dim = 3840, .hidden_dim = 15360,
     .n_layers = 48, .n_heads = 16, .n_kv_heads = 8, .head_dim = 256, .vocab_size = 262208,
     .context_len = 131072, .rope_freq_base = 1000000.0f, .rope_scale = 8.0f,
     .rms_eps = 1e-6f, .tied_output = true, .swa_window = 1024},
    {.name = "phi-4-mini", .arch = "phi3", .dim = 3072, .hidden_dim = 8192, .n_layers = 32,
     .n_heads = 24, .n_kv_heads = 8, .vocab_size = 200064, .context_len = 131072,
     .rope_freq_base = 10000.0f, .tied_output = true, .qkv_fused = true},
    /* mixtures of experts: Qwen3-30B-A3B (128 experts of 768, 8 a token, about 3.3B
     * active parameters of 30.5B) and Mixtral 8x7B (a llama file: 8 of 14336, 2 used) */
    {.name = "qwen3-30b-a3b", .arch = "qwen3moe", .dim = 2048, .hidden_dim = 768,
     .n_layers = 48, .n_heads = 32, .n_kv_heads = 4, .head_dim = 128, .vocab_size = 151936,
     .context_len = 40960, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f, .n_experts = 128,
     .n_experts_used = 8},
    /* Qwen1.5-MoE-A2.7B: 60 experts of 1408, 4 a token, unnormalised, and a shared expert
     * of 5632 (about 2.7B active parameters of 14.3B) */
    {.name = "qwen2moe-a2.7b", .arch = "qwen2moe", .dim = 2048, .hidden_dim = 1408,
     .n_layers = 24, .n_heads = 16, .n_kv_heads = 16, .vocab_size = 151936,
     .context_len = 8192, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f, .qkv_bias = true,
     .n_experts = 60, .n_experts_used = 4, .shared_ffn_dim = 5632},
    {.name = "mixtral-8x7b", .arch = "llama", .dim = 4096, .hidden_dim = 14336,
     .n_layers = 32, .n_heads = 32, .n_kv_heads = 8, .vocab_size = 32000, .context_len = 32768,
     .rope_freq_base = 1000000.0f, .n_experts = 8, .n_experts_used = 2},
    /* Qwen3-Embedding-0.6B: last-token pooling */
    {.name = "qwen3-embedding-0.6b", .arch = "qwen3", .dim = 1024, .hidden_dim = 3072,
     .n_layers = 28, .n_heads = 16, .n_kv_heads = 8, .head_dim = 128, .vocab_size = 151669,
     .context_len = 32768, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f,
     .tied_output = true, .pooling = TS_POOLING_LAST},
    /* encoders: BAAI/bge-small-en-v1.5 (CLS pooling), sentence-transformers'
     * all-MiniLM-L6-v2 (mean), nomic-embed-text-v1.5 (mean; fused QKV without biases,
     * rotary positions of base 1000, SwiGLU) */
    {.name = "bge-small", .arch = "bert", .dim = 384, .hidden_dim = 1536, .n_layers = 12,
     .n_heads = 12, .n_kv_heads = 12, .vocab_size = 30522, .context_len = 512,
     .rope_freq_base = 10000.0f, .rms_eps = 1e-12f, .qkv_bias = true,
     .pooling = TS_POOLING_CLS},
    {.name = "all-minilm-l6", .arch = "bert", .dim = 384, .hidden_dim = 1536, .n_layers = 6,
     .n_heads = 12, .n_kv_heads = 12, .vocab_size = 30522, .context_len = 512,
     .rope_freq_base = 10000.0f, .rms_eps = 1e-12f, .qkv_bias = true,
     .pooling = TS_POOLING_MEAN},
    {.name = "nomic-embed-text", .arch = "nomic-bert", .dim = 768, .hidden_dim = 3072,
     .n_layers = 12, .n_heads = 12, .n_kv_heads = 12, .vocab_size = 30522,
     .context_len = 2048, .rope_freq_base = 1000.0f, .rms_eps = 1e-12f, .qkv_fused = true,
     .pooling = TS_POOLING_MEAN},
    /* BAAI/bge-reranker-base (XLM-RoBERTa base, converted as a bert file): rank pooling
     * through the classification head (cls, cls.output) of the CLS row */
    {.name = "bge-reranker-base", .arch = "bert", .dim = 768, .hidden_dim = 3072,
     .n_layers = 12, .n_heads = 12, .n_kv_heads = 12, .vocab_size = 250002,
     .context_len = 512, .rope_freq_base = 10000.0f, .rms_eps = 1e-5f, .qkv_bias = true,
     .pooling = TS_POOLING_RANK},
    {.name = "test-tiny", .arch = "llama", .hidden = true, .dim = 64, .hidden_dim = 128,
     .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 512, .context_len = 128,
     .rope_freq_base = 10000.0f},
};

/* Llama 3's rope_scaling (rope_type llama3) but for its factor, which is the shape's: 32
 * in Llama 3.2, 8 in Llama 3.1. */
static const struct {
    float low_freq_factor, high_freq_factor;
    int original_context;
} llama3_scaling = {1.0f, 4.0f, 8192};

/* Gemma's 27B attention scale, 1 / sqrt(dim / n_heads), where c's layer count is the one
 * that names that size in its family a; else 0 (1 / sqrt(head_dim)). */
static float family_attn_scale(const ts_model_config *c, const model_arch *a)
{
    return a->attn_scale_dim_layers && c->n_layers == a->attn_scale_dim_layers
               ? 1.0f / sqrtf((float)(c->dim / c->n_heads))
               : 0.0f;
}

/* The features c's family row gives every file of it, as model_gguf.c reads them: what
 * the loader sets whatever the file's tensors (q/k norms, post-norms, ...), the family's
 * soft-caps and window defaults, and Gemma's attention scale of the 27B size. */
static void family_features(ts_model_config *c, const model_arch *a)
{
    c->rope_neox = a->rope_neox;
    c->qk_norm = a->qk_norm;
    c->post_norms = a->post_norms;
    c->ffn_fused = a->ffn_fused;
    c->embd_scaled = a->embd_scaled;
    c->ffn_act = a->ffn_act;
    c->attn_softcap = a->softcaps ? a->attn_softcap : 0.0f;
    c->final_softcap = a->softcaps ? a->final_softcap : 0.0f;
    c->swa_window = a->swa_reads ? a->swa_window : 0;
    c->swa_pattern = a->swa_reads ? a->swa_pattern : 0;
    c->rope_freq_base_swa = a->swa_reads ? a->rope_base_swa : 0.0f;
    c->rope_scale_swa = a->swa_reads && !a->swa_rope_scaled ? 1.0f : 0.0f;
    c->attn_scale = family_attn_scale(c, a);
    c->experts_unnormed = a->experts_unnormed;
    c->encoder = a->encoder;
    c->pos_embd = a->pos_embd;
}

static const model_arch *family_of(const ts_model_config *c)
{
    return model_arch_find(c->arch, strnlen(c->arch, sizeof c->arch));
}

bool model_synth_shape(ts_model_config *out, const char *name)
{
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const synth_shape *s = &shapes[i];
        if (strcmp(s->name, name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->arch, sizeof out->arch, "%s", s->arch);
        snprintf(out->name, sizeof out->name, "synth-%s", s->name);
        out->dim = s->dim;
        out->hidden_dim = s->hidden_dim;
        out->n_layers = s->n_layers;
        out->n_heads = s->n_heads;
        out->n_kv_heads = s->n_kv_heads;
        out->head_dim = s->head_dim ? s->head_dim : s->dim / s->n_heads;
        out->vocab_size = s->vocab_size;
        out->context_len = s->context_len;
        out->rope_freq_base = s->rope_freq_base;
        out->rope_scale = s->rope_scale > 0.0f ? s->rope_scale : 1.0f;
        out->rms_eps = s->rms_eps > 0.0f ? s->rms_eps : 1e-5f;
        out->rope_factors = s->llama3_factor > 0.0f;
        out->tied_output = s->tied_output;
        out->qkv_bias = s->qkv_bias;
        out->qkv_fused = s->qkv_fused;
        out->n_experts = s->n_experts;
        out->n_experts_used = s->n_experts_used;
        out->shared_ffn_dim = s->shared_ffn_dim;
        out->pooling = s->pooling;
        family_features(out, family_of(out));
        out->cls_out = out->encoder && out->pooling == TS_POOLING_RANK ? 1 : 0;
        if (s->swa_window)
            out->swa_window = s->swa_window;
        return true;
    }
    return false;
}

void model_synth_shrink(ts_model_config *c)
{
    enum { HEAD = 16, KV = 2 };
    int gqa = c->n_heads / c->n_kv_heads;
    bool dim_is_heads = c->dim == c->n_heads * c->head_dim;
    c->n_kv_heads = c->n_kv_heads < KV ? c->n_kv_heads : KV;
    c->n_heads = c->n_kv_heads * gqa;
    c->head_dim = HEAD;
    c->dim = dim_is_heads ? c->n_heads * HEAD : 64;
    c->hidden_dim = 128;
    if (c->shared_ffn_dim > 0)
        c->shared_ffn_dim = 256;
    c->vocab_size = 512;
    c->context_len = 256;
    if (c->swa_window > 8)
        c->swa_window = 8;
    int layers = c->swa_window ? c->swa_pattern : 0; /* windowed layers, then a global one */
    c->n_layers = layers > 2 ? layers : 2;
    const model_arch *a = family_of(c);
    if (a) /* Gemma's 27B scale follows the layer count, which changed */
        c->attn_scale = family_attn_scale(c, a);
    size_t n = strnlen(c->name, sizeof c->name);
    if (n + 5 < sizeof c->name)
        memcpy(c->name + n, "-tiny", 6);
}

const char *model_synth_shape_name(int i)
{
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        if (!shapes[k].hidden && i-- == 0)
            return shapes[k].name;
    return NULL;
}

/* The llama3 factor of the shape c was made from (its name is "synth-SHAPE", or
 * "synth-SHAPE-tiny" shrunk), else Llama 3.2's. */
static float llama3_factor(const ts_model_config *c)
{
    if (strncmp(c->name, "synth-", 6) != 0)
        return 32.0f;
    const char *shape = c->name + 6;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        size_t n = strlen(shapes[i].name);
        if (!strncmp(shape, shapes[i].name, n) &&
            (!shape[n] || !strcmp(shape + n, "-tiny")) && shapes[i].llama3_factor > 0.0f)
            return shapes[i].llama3_factor;
    }
    return 32.0f;
}

void model_synth_llama3_factors(float *out, const ts_model_config *c)
{
    /* llama.cpp's convert_hf_to_gguf.py, in float as it computes them: frequencies whose
     * wavelength is under original_context / high_freq_factor are kept (factor 1), those
     * over original_context / low_freq_factor slowed by the full factor, and the band
     * between blended smoothly. */
    float factor = llama3_factor(c), low = llama3_scaling.low_freq_factor;
    float high = llama3_scaling.high_freq_factor, old_ctx = (float)llama3_scaling.original_context;
    float low_freq_wavelen = old_ctx / low, high_freq_wavelen = old_ctx / high;
    for (int i = 0; i < c->head_dim / 2; i++) {
        float freq = 1.0f / powf(c->rope_freq_base, (float)(2 * i) / (float)c->head_dim);
        float wavelen = 2.0f * (float)M_PI / freq;
        if (wavelen < high_freq_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_freq_wavelen) {
            out[i] = factor;
        } else {
            float smooth = (old_ctx / wavelen - low) / (high - low);
            out[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

/* ---- seeded normals: one independent stream per (tensor, row), so rows can be made in
 * any order and on any thread and still give the same bytes ---- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct normal_rng {
    uint64_t state;
    float spare;
    bool has_spare;
} normal_rng;

static void rng_init(normal_rng *r, uint64_t seed, uint64_t tensor, uint64_t row)
{
    uint64_t s = seed;
    r->state = splitmix64(&s) ^ (tensor << 40) ^ row;
    splitmix64(&r->state);
    r->spare = 0.0f;
    r->has_spare = false;
}

/* A uniform in (0, 1]: never 0, so logf() is finite. */
static float uniform(normal_rng *r)
{
    return (float)((splitmix64(&r->state) >> 40) + 1) * (1.0f / 16777216.0f);
}

/* Box-Muller, both outputs used. */
static float normal(normal_rng *r)
{
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    float rad = sqrtf(-2.0f * logf(uniform(r))), ang = 6.2831853f * uniform(r);
    r->spare = rad * sinf(ang);
    r->has_spare = true;
    return rad * cosf(ang);
}

/* ---- tensors ---- */

typedef struct synth_tensor {
    uint64_t seed, index; /* the rows' streams */
    uint32_t type;        /* qtype */
    uint64_t ne0;         /* row length */
    uint64_t row_bytes;   /* of one row in type */
    float std;            /* 0: every element is 1 (norm weights) */
    const tokenizer_vocab *damped; /* the LM head of a peaked model: rows of tokens other
                                    * than NORMAL ones drawn 10x smaller, so that greedy
                                    * text is words, not bytes, controls or padding */
    float mean;           /* with std > 0: added to every element (an encoder's LayerNorm
                           * weights, drawn around 1) */
    uint64_t n_rows;      /* of the whole tensor (all its experts) */
    uint32_t distinct;    /* 0: every row drawn; else each row is one of the first
                           * `distinct` rows' draws, picked at random (model_synth_opts) */
    uint8_t *pool;        /* with distinct: those rows, quantized; made by the first chunk
                           * and freed after the last */
} synth_tensor;

/* One row: its f32 values into buf (ne0), then quantized into dst. */
static void fill_row(const synth_tensor *t, uint8_t *dst, float *buf, uint64_t row)
{
    normal_rng r;
    rng_init(&r, t->seed, t->index, row);
    float std = t->std;
    if (t->damped && row < (uint64_t)t->damped->n_tokens &&
        t->damped->tokens[row].type != VOCAB_TOKEN_NORMAL)
        std *= 0.1f;
    for (uint64_t i = 0; i < t->ne0; i++)
        buf[i] = std > 0.0f ? t->mean + std * normal(&r) : 1.0f;
    quant_row(dst, buf, t->type, (int64_t)t->ne0);
}

/* The drawn row that row `row` of a tensor with distinct rows repeats: one of the first
 * t->distinct, picked by a stream of its own. */
static uint64_t pool_pick(const synth_tensor *t, uint64_t row)
{
    uint64_t s = t->seed ^ (t->index << 40) ^ (row << 1) ^ 1;
    return splitmix64(&s) % t->distinct;
}

static ts_status fill_rows(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                           ts_error *err)
{
    synth_tensor *t = user;
    long long n = (long long)n_rows, drawn = 0; /* pool rows to draw in this call */
    if (t->distinct && !t->pool) {
        if (!(t->pool = malloc((size_t)(t->distinct * t->row_bytes))))
            return ts_error_set(err, TS_ERR_NOMEM, "%u distinct rows", t->distinct);
        drawn = t->distinct;
    }
    bool ok = true;
#pragma omp parallel reduction(&& : ok)
    {
        float *buf = malloc((size_t)t->ne0 * sizeof *buf); /* a row per thread */
        ok = buf != NULL;
#pragma omp for schedule(static)
        for (long long r = 0; r < drawn; r++) /* the pool, once, with the first chunk */
            if (buf)
                fill_row(t, t->pool + (uint64_t)r * t->row_bytes, buf, (uint64_t)r);
#pragma omp for schedule(static)
        for (long long r = 0; r < n; r++) {
            uint64_t row = row0 + (uint64_t)r;
            if (t->distinct)
                memcpy(dst + (uint64_t)r * t->row_bytes,
                       t->pool + pool_pick(t, row) * t->row_bytes, (size_t)t->row_bytes);
            else if (buf)
                fill_row(t, dst + (uint64_t)r * t->row_bytes, buf, row);
        }
        free(buf);
    }
    if (row0 + n_rows == t->n_rows) {
        free(t->pool);
        t->pool = NULL;
    }
    return ok ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "a row of %llu floats",
                                     (unsigned long long)t->ne0);
}

/* The vocabulary padded to n tokens: the first tokens are borrowed from v, the padding is
 * owned (free it with free_padding). */
static ts_status pad_vocab(tokenizer_vocab *out, const tokenizer_vocab *v, int n, ts_error *err)
{
    *out = *v;
    out->tokens = NULL;
    if (v->n_tokens > n)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "the vocabulary has %d tokens, more than the shape's %d: give a "
                            "vocabulary of at most %d tokens", v->n_tokens, n, n);
    out->n_tokens = n;
    if (!(out->tokens = calloc((size_t)n, sizeof *out->tokens)))
        return ts_error_set(err, TS_ERR_NOMEM, "vocabulary of %d tokens", n);
    memcpy(out->tokens, v->tokens, (size_t)v->n_tokens * sizeof *v->tokens);
    for (int i = v->n_tokens; i < n; i++) {
        char text[32];
        int len = snprintf(text, sizeof text, "<unused_%d>", i - v->n_tokens);
        vocab_token *t = &out->tokens[i];
        if (!(t->text = strdup(text)))
            return ts_error_set(err, TS_ERR_NOMEM, "vocabulary padding");
        t->len = (uint32_t)len;
        t->score = -1000.0f;
        t->type = VOCAB_TOKEN_UNUSED;
    }
    return TS_OK;
}

static void free_padding(tokenizer_vocab *padded, int n_borrowed)
{
    if (padded->tokens)
        for (int i = n_borrowed; i < padded->n_tokens; i++)
            free(padded->tokens[i].text);
    free(padded->tokens);
}

typedef struct synth_plan {
    gguf_writer *g;
    synth_tensor *tensors; /* (n) */
    int n;
    uint64_t seed;
    quant_ftype ftype;
    quant_model_info info;
    bool peaked;        /* model_synth_opts.peaked */
    uint32_t distinct_rows; /* model_synth_opts.distinct_rows */
    const tokenizer_vocab *vocab; /* the file's (padded) vocabulary */
    const char *unfit; /* the first tensor no type of the ftype fits, with its row length */
    uint64_t unfit_ne0;
} synth_plan;

/* The standard deviation of tensor `name` (rows of ne0; a bias when ne1 is 0) in a peaked
 * model (model_synth_opts.peaked): a trained model's scales, so that activations keep
 * their size through the layers and the logits spread (std about 14), as the reference
 * models of other families were made. */
static float peaked_std(const char *name, uint64_t ne0, uint64_t ne1)
{
    float fan_in = sqrtf((float)ne0);
    if (!strcmp(name, "token_embd.weight"))
        return 1.0f;
    if (!strcmp(name, "output.weight"))
        return 14.0f / fan_in;
    if (strstr(name, "ffn_gate_inp.weight")) /* a router decisive but varied */
        return 3.0f / fan_in;
    return ne1 == 0 ? 0.5f : 1.0f / fan_in;
}

/* Records one tensor of ggml shape (ne0, ne1), 1-D when ne1 is 0, of normals of std (0:
 * ones, for norm weights; peaked_std in a peaked model). */
static void plan_add3(synth_plan *p, const char *name, uint64_t ne0, uint64_t ne1,
                      uint64_t ne2, float std)
{
    synth_tensor *t = &p->tensors[p->n];
    if (p->peaked && std > 0.0f)
        std = peaked_std(name, ne0, ne1);
    bool lm_head = !strcmp(name, "output.weight") ||
                   (p->info.has_output == false && !strcmp(name, "token_embd.weight"));
    t->damped = p->peaked && lm_head ? p->vocab : NULL;
    const uint64_t ne[3] = {ne0, ne1, ne2};
    uint32_t n_dims = ne2 > 1 ? 3 : ne1 ? 2 : 1;
    t->seed = p->seed;
    t->index = (uint64_t)p->n++;
    t->ne0 = ne0;
    t->type = quant_mix_type(p->ftype, &p->info, name, n_dims, ne0);
    t->std = std;
    if (t->type == QUANT_TYPE_NONE) {
        if (!p->unfit) {
            p->unfit = strdup(name);
            p->unfit_ne0 = ne0;
        }
        t->type = QT_F32; /* the file is refused; keep the writer's state consistent */
    }
    t->row_bytes = qtype_row_bytes(t->type, (int64_t)ne0);
    t->n_rows = (ne1 ? ne1 : 1) * ne2;
    bool blocks = t->type != QT_F32 && t->type != QT_F16 && t->type != QT_BF16;
    t->distinct = blocks && !strncmp(name, "blk.", 4) && t->n_rows > p->distinct_rows
                      ? p->distinct_rows : 0;
    t->pool = NULL;
    gguf_writer_add_tensor_fill(p->g, name, t->type, n_dims, ne, fill_rows, t);
}

static void plan_add(synth_plan *p, const char *name, uint64_t ne0, uint64_t ne1, float std)
{
    plan_add3(p, name, ne0, ne1, 1, std);
}

/* blk.LAYER.SUFFIX: a matrix (ne1 > 0), a bias (ne1 0, std > 0) or a norm of ones. */
static void plan_layer(synth_plan *p, int layer, const char *suffix, uint64_t ne0, uint64_t ne1,
                       float std)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    plan_add(p, name, ne0, ne1, std);
}

/* At most this many tensors per layer: norms (attn, ffn, q, k, post-attention, post-ffw),
 * Q, K, V and their biases, attn_output, gate, up, down; or a mixture's router, experts
 * and shared expert. */
enum { SYNTH_LAYER_TENSORS = 20 };

/* Layer l's attention: Q, K and V (fused into attn_qkv for c->qkv_fused), their biases
 * for c->qkv_bias, per-head norms for c->qk_norm, then attn_output; matrices and biases
 * drawn with std. */
static void plan_attention_std(synth_plan *p, const ts_model_config *c, int l, float std)
{
    uint64_t dim = (uint64_t)c->dim, hd = (uint64_t)c->head_dim;
    uint64_t q_dim = (uint64_t)c->n_heads * hd, kv_dim = (uint64_t)c->n_kv_heads * hd;
    if (c->qkv_fused) {
        plan_layer(p, l, "attn_qkv.weight", dim, q_dim + 2 * kv_dim, std);
        if (c->qkv_bias)
            plan_layer(p, l, "attn_qkv.bias", q_dim + 2 * kv_dim, 0, std);
    } else {
        static const char *const part[3] = {"attn_q", "attn_k", "attn_v"};
        const uint64_t rows[3] = {q_dim, kv_dim, kv_dim};
        char name[32];
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "%s.weight", part[i]);
            plan_layer(p, l, name, dim, rows[i], std);
        }
        for (int i = 0; i < 3 && c->qkv_bias; i++) {
            snprintf(name, sizeof name, "%s.bias", part[i]);
            plan_layer(p, l, name, rows[i], 0, std);
        }
    }
    if (c->qk_norm) {
        plan_layer(p, l, "attn_q_norm.weight", hd, 0, 0.0f);
        plan_layer(p, l, "attn_k_norm.weight", hd, 0, 0.0f);
    }
    plan_layer(p, l, "attn_output.weight", q_dim, dim, std);
}

static void plan_attention(synth_plan *p, const ts_model_config *c, int l)
{
    plan_attention_std(p, c, l, MODEL_SYNTH_STD);
}

/* Weights of an encoder's matrices: wider than MODEL_SYNTH_STD, so that a tiny model's
 * attention is far from uniform and its tests see each row's own keys. */
#define SYNTH_ENCODER_STD 0.15f
/* An encoder's LayerNorm weights are 1 + this times a normal; its biases this times one. */
#define SYNTH_ENCODER_NORM_STD 0.1f

/* A LayerNorm's weight (around 1) and bias, PREFIX.weight / PREFIX.bias, of n. */
static void plan_layer_norm(synth_plan *p, const char *prefix, uint64_t n)
{
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    plan_add(p, name, n, 0, SYNTH_ENCODER_NORM_STD);
    p->tensors[p->n - 1].mean = 1.0f;
    snprintf(name, sizeof name, "%s.bias", prefix);
    plan_add(p, name, n, 0, SYNTH_ENCODER_NORM_STD);
}

/* An encoder's tensors as llama.cpp's BERT converters name them: the embeddings (token,
 * two token types, positions for BERT) and their norm; per layer the attention with its
 * biases (BERT) or fused and bias-free (nomic-bert), attn_output_norm, the feed-forward
 * (BERT: up and down with biases; nomic-bert: gate, up, down) and layer_output_norm; for
 * rank pooling a reranker's classification head of one output. */
static void plan_encoder(synth_plan *p, const ts_model_config *c)
{
    const float std = SYNTH_ENCODER_STD, bstd = SYNTH_ENCODER_NORM_STD;
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    bool bert = c->ffn_act == TS_FFN_GELU;
    char name[96];
    plan_add(p, "token_embd.weight", dim, (uint64_t)c->vocab_size, std);
    plan_add(p, "token_types.weight", dim, 2, std);
    if (c->pos_embd)
        plan_add(p, "position_embd.weight", dim, (uint64_t)c->context_len, std);
    plan_layer_norm(p, "token_embd_norm", dim);
    for (int l = 0; l < c->n_layers; l++) {
        plan_attention_std(p, c, l, std);
        if (bert)
            plan_layer(p, l, "attn_output.bias", dim, 0, bstd);
        snprintf(name, sizeof name, "blk.%d.attn_output_norm", l);
        plan_layer_norm(p, name, dim);
        if (!bert)
            plan_layer(p, l, "ffn_gate.weight", dim, ffn, std);
        plan_layer(p, l, "ffn_up.weight", dim, ffn, std);
        if (bert)
            plan_layer(p, l, "ffn_up.bias", ffn, 0, bstd);
        plan_layer(p, l, "ffn_down.weight", ffn, dim, std);
        if (bert)
            plan_layer(p, l, "ffn_down.bias", dim, 0, bstd);
        snprintf(name, sizeof name, "blk.%d.layer_output_norm", l);
        plan_layer_norm(p, name, dim);
    }
    if (c->pooling == TS_POOLING_RANK) { /* a reranker's classification head, one score */
        plan_add(p, "cls.weight", dim, dim, std);
        plan_add(p, "cls.bias", dim, 0, bstd);
        plan_add(p, "cls.output.weight", dim, 1, std);
        plan_add(p, "cls.output.bias", 1, 0, bstd);
    }
}

/* The tensors under llama.cpp's names, in its converters' order (after rope_freqs.weight,
 * which model_synth_write() adds itself): for a Llama config, model_gguf_write()'s. */
static void plan_tensors(synth_plan *p, const ts_model_config *c)
{
    const float std = MODEL_SYNTH_STD;
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    if (c->encoder) {
        plan_encoder(p, c);
        return;
    }
    plan_add(p, "token_embd.weight", dim, (uint64_t)c->vocab_size, std);
    plan_add(p, "output_norm.weight", dim, 0, 0.0f);
    if (!c->tied_output)
        plan_add(p, "output.weight", dim, (uint64_t)c->vocab_size, std);
    for (int l = 0; l < c->n_layers; l++) {
        plan_layer(p, l, "attn_norm.weight", dim, 0, 0.0f);
        plan_attention(p, c, l);
        if (c->post_norms)
            plan_layer(p, l, "post_attention_norm.weight", dim, 0, 0.0f);
        plan_layer(p, l, "ffn_norm.weight", dim, 0, 0.0f);
        if (c->n_experts > 0) { /* the router, then the experts as 3-D tensors */
            uint64_t e = (uint64_t)c->n_experts;
            char name[96];
            plan_layer(p, l, "ffn_gate_inp.weight", dim, e, std);
            snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
            plan_add3(p, name, dim, ffn, e, std);
            snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
            plan_add3(p, name, dim, ffn, e, std);
            snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
            plan_add3(p, name, ffn, dim, e, std);
            if (c->shared_ffn_dim > 0) { /* the shared expert and its gate's vector */
                uint64_t sh = (uint64_t)c->shared_ffn_dim;
                plan_layer(p, l, "ffn_gate_inp_shexp.weight", dim, 0, std);
                plan_layer(p, l, "ffn_gate_shexp.weight", dim, sh, std);
                plan_layer(p, l, "ffn_up_shexp.weight", dim, sh, std);
                plan_layer(p, l, "ffn_down_shexp.weight", sh, dim, std);
            }
            continue;
        }
        if (c->ffn_fused) {
            plan_layer(p, l, "ffn_up.weight", dim, 2 * ffn, std); /* [gate; up] */
        } else {
            plan_layer(p, l, "ffn_gate.weight", dim, ffn, std);
            plan_layer(p, l, "ffn_up.weight", dim, ffn, std);
        }
        plan_layer(p, l, "ffn_down.weight", ffn, dim, std);
        if (c->post_norms)
            plan_layer(p, l, "post_ffw_norm.weight", dim, 0, 0.0f);
    }
}

/* ---- metadata ---- */

/* The first of c's row-given features that differs from family a's row, or NULL. */
static const char *family_mismatch(const ts_model_config *c, const model_arch *a)
{
    ts_model_config want = *c;
    family_features(&want, a);
    if (c->rope_neox != want.rope_neox)
        return "RoPE order (rope_neox)";
    if (c->qk_norm != want.qk_norm)
        return "q/k norms (qk_norm)";
    if (c->post_norms != want.post_norms)
        return "post-norms (post_norms)";
    if (c->ffn_fused != want.ffn_fused)
        return "fused gate/up (ffn_fused)";
    if (c->embd_scaled != want.embd_scaled)
        return "embedding scale (embd_scaled)";
    if (c->ffn_act != want.ffn_act)
        return "activation (ffn_act)";
    if (c->attn_scale != want.attn_scale)
        return "attention scale (attn_scale)";
    if (!a->softcaps && (c->attn_softcap != 0.0f || c->final_softcap != 0.0f))
        return "soft-caps (attn_softcap, final_softcap)";
    if (!a->swa_reads && (c->swa_window || c->swa_pattern || c->rope_freq_base_swa != 0.0f))
        return "sliding window (swa_window, swa_pattern, rope_freq_base_swa)";
    /* a key of 0 is refused, so the family's default window and pattern cannot be unset */
    if ((!c->swa_window && a->swa_window) || (!c->swa_pattern && a->swa_pattern))
        return "sliding window of 0 (swa_window, swa_pattern)";
    if (a->experts && c->n_experts == 0)
        return "a mixture of experts (n_experts)";
    if (c->n_experts > 0 && c->experts_unnormed != want.experts_unnormed)
        return "expert weighting (experts_unnormed)";
    if (c->n_experts > 0 && (c->shared_ffn_dim > 0) != a->shared_expert)
        return "shared expert (shared_ffn_dim)";
    if (c->encoder != want.encoder || c->pos_embd != want.pos_embd)
        return "encoder layers (encoder, pos_embd)";
    return NULL;
}

ts_status model_synth_check(const ts_model_config *c, ts_error *err)
{
    ts_status st = model_config_validate(c, err);
    if (st != TS_OK)
        return st;
    const model_arch *a = family_of(c);
    if (!a)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "synthetic '%.32s' model: tessera runs %s",
                            c->arch, model_arch_names());
    const char *what = family_mismatch(c, a);
    if (what)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "synthetic %s model: its %s is not the family's, which the loader "
                            "would read instead", c->arch, what);
    return TS_OK;
}

ts_status model_synth_write(const char *path, const ts_model_config *c, const char *type,
                            const tokenizer_vocab *v, uint64_t seed, ts_error *err)
{
    return model_synth_write_with(path, c, type, v, seed, NULL, err);
}

ts_status model_synth_write_with(const char *path, const ts_model_config *c, const char *type,
                                 const tokenizer_vocab *v, uint64_t seed,
                                 const model_synth_opts *opts, ts_error *err)
{
    synth_plan p = {.seed = seed, .peaked = opts && opts->peaked,
                    .distinct_rows = opts ? opts->distinct_rows : 0};
    float *rope_factors = NULL;
    tokenizer_vocab padded;
    memset(&padded, 0, sizeof padded);
    ts_status st = model_synth_check(c, err);
    if (st != TS_OK)
        return st;
    if (!quant_ftype_parse(&p.ftype, type))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "synthetic weights of type '%s' (give F32, "
                            "F16, BF16 or one of llama.cpp's quantized types)", type);
    quant_ftype ftype = p.ftype;
    p.info.n_layers = c->n_layers;
    p.info.n_gqa = c->n_heads / c->n_kv_heads;
    p.info.has_output = !c->tied_output;
    if ((st = pad_vocab(&padded, v, c->vocab_size, err)) != TS_OK)
        goto done;
    p.vocab = &padded;
    if (!(p.tensors = calloc((size_t)(12 + SYNTH_LAYER_TENSORS * c->n_layers),
                             sizeof *p.tensors))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "tensor list of %d layers", c->n_layers);
        goto done;
    }
    if ((st = gguf_writer_create(0, &p.g, err)) != TS_OK)
        goto done;
    model_gguf_add_config(p.g, c, (uint32_t)ftype);
    if (quant_ftype_base(ftype) != QT_F32 && quant_ftype_base(ftype) != QT_F16 &&
        quant_ftype_base(ftype) != QT_BF16)
        gguf_writer_add_u32(p.g, "general.quantization_version", 2);
    if ((st = model_gguf_add_vocab(p.g, &padded, err)) != TS_OK)
        goto done;
    if (c->rope_factors) { /* real factors, not random ones: they shape every position */
        const uint64_t ne[1] = {(uint64_t)c->head_dim / 2};
        if (!(rope_factors = malloc(ne[0] * sizeof *rope_factors))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "RoPE factors");
            goto done;
        }
        model_synth_llama3_factors(rope_factors, c);
        gguf_writer_add_tensor(p.g, "rope_freqs.weight", GGUF_TENSOR_F32, 1, ne, rope_factors,
                               ne[0] * sizeof *rope_factors);
    }
    plan_tensors(&p, c);
    if (p.unfit) {
        st = ts_error_set(err, TS_ERR_INVALID_ARG, "%s needs row lengths that are multiples of "
                          "32: %s has %llu", qtype_name(quant_ftype_base(ftype)), p.unfit,
                          (unsigned long long)p.unfit_ne0);
        goto done;
    }
    st = gguf_writer_write_file(p.g, path, err);
done:
    gguf_writer_free(p.g);
    free(rope_factors);
    for (int i = 0; p.tensors && i < p.n; i++)
        free(p.tensors[i].pool); /* a write that failed inside a tensor */
    free(p.tensors);
    free((char *)p.unfit);
    free_padding(&padded, v->n_tokens);
    return st;
}
