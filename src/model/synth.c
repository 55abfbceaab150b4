/* synth.c: random-weight GGUF models at real shapes, generated row by row as the writer
 * streams them, in F32 or any of llama.cpp's ftypes (each tensor in its mix's type). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_gguf.h"
#include "model/synth.h"
#include "quant.h"
#include "quant/quantize.h"

typedef struct synth_shape {
    const char *name;
    bool hidden; /* for tests; not listed */
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, context_len;
    float rope_freq_base;
    bool tied_output;
    float llama3_factor; /* rope_scaling llama3's factor, as rope_freqs.weight; 0: none */
} synth_shape;

/* From each model's published config.json (llama2.c's README for stories110m, whose
 * checkpoint shares the classifier with the embedding: 110M parameters with it tied).
 * mistral-7b is v0.1 (vocabulary 32000, base 10000), mistral-7b-v0.3 its 32768-token,
 * base 1e6 successor; both untied, 32768 positions. */
static const synth_shape shapes[] = {
    {"stories110m", false, 768, 2048, 12, 12, 12, 32000, 1024, 10000.0f, true, 0.0f},
    {"smollm2-360m", false, 960, 2560, 32, 15, 5, 49152, 8192, 100000.0f, true, 0.0f},
    {"tinyllama-1.1b", false, 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, false, 0.0f},
    {"llama3.2-1b", false, 2048, 8192, 16, 32, 8, 128256, 131072, 500000.0f, true, 32.0f},
    {"llama3.1-8b", false, 4096, 14336, 32, 32, 8, 128256, 131072, 500000.0f, false, 8.0f},
    {"mistral-7b", false, 4096, 14336, 32, 32, 8, 32000, 32768, 10000.0f, false, 0.0f},
    {"mistral-7b-v0.3", false, 4096, 14336, 32, 32, 8, 32768, 32768, 1000000.0f, false, 0.0f},
    {"test-tiny", true, 64, 128, 2, 4, 2, 512, 128, 10000.0f, false, 0.0f},
};

/* Llama 3's rope_scaling (rope_type llama3) but for its factor, which is the shape's: 32
 * in Llama 3.2, 8 in Llama 3.1. */
static const struct {
    float low_freq_factor, high_freq_factor;
    int original_context;
} llama3_scaling = {1.0f, 4.0f, 8192};

bool model_synth_shape(ts_model_config *out, const char *name)
{
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const synth_shape *s = &shapes[i];
        if (strcmp(s->name, name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->arch, sizeof out->arch, "llama");
        snprintf(out->name, sizeof out->name, "synth-%s", s->name);
        out->dim = s->dim;
        out->hidden_dim = s->hidden_dim;
        out->n_layers = s->n_layers;
        out->n_heads = s->n_heads;
        out->n_kv_heads = s->n_kv_heads;
        out->head_dim = s->dim / s->n_heads;
        out->vocab_size = s->vocab_size;
        out->context_len = s->context_len;
        out->rope_freq_base = s->rope_freq_base;
        out->rope_scale = 1.0f;
        out->rms_eps = 1e-5f;
        out->rope_factors = s->llama3_factor > 0.0f;
        out->tied_output = s->tied_output;
        return true;
    }
    return false;
}

const char *model_synth_shape_name(int i)
{
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        if (!shapes[k].hidden && i-- == 0)
            return shapes[k].name;
    return NULL;
}

/* The llama3 factor of the shape c was made from (its name is "synth-SHAPE"), else Llama
 * 3.2's. */
static float llama3_factor(const ts_model_config *c)
{
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        if (!strncmp(c->name, "synth-", 6) && !strcmp(c->name + 6, shapes[i].name) &&
            shapes[i].llama3_factor > 0.0f)
            return shapes[i].llama3_factor;
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
} synth_tensor;

/* One row: its f32 values into buf (ne0), then quantized into dst. */
static void fill_row(const synth_tensor *t, uint8_t *dst, float *buf, uint64_t row)
{
    normal_rng r;
    rng_init(&r, t->seed, t->index, row);
    for (uint64_t i = 0; i < t->ne0; i++)
        buf[i] = t->std > 0.0f ? t->std * normal(&r) : 1.0f;
    quant_row(dst, buf, t->type, (int64_t)t->ne0);
}

static ts_status fill_rows(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                           ts_error *err)
{
    const synth_tensor *t = user;
    long long n = (long long)n_rows;
    bool ok = true;
#pragma omp parallel reduction(&& : ok)
    {
        float *buf = malloc((size_t)t->ne0 * sizeof *buf); /* a row per thread */
        ok = buf != NULL;
#pragma omp for schedule(static)
        for (long long r = 0; r < n; r++)
            if (buf)
                fill_row(t, dst + (uint64_t)r * t->row_bytes, buf, row0 + (uint64_t)r);
        free(buf);
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
    const char *unfit; /* the first tensor no type of the ftype fits, with its row length */
    uint64_t unfit_ne0;
} synth_plan;

/* Records one tensor of ggml shape (ne0, ne1), 1-D when ne1 is 0; norms are F32 ones. */
static void plan_add(synth_plan *p, const char *name, uint64_t ne0, uint64_t ne1)
{
    synth_tensor *t = &p->tensors[p->n];
    const uint64_t ne[2] = {ne0, ne1};
    t->seed = p->seed;
    t->index = (uint64_t)p->n++;
    t->ne0 = ne0;
    t->type = quant_mix_type(p->ftype, &p->info, name, ne1 ? 2 : 1, ne0);
    t->std = ne1 ? MODEL_SYNTH_STD : 0.0f;
    if (t->type == QUANT_TYPE_NONE) {
        if (!p->unfit) {
            p->unfit = strdup(name);
            p->unfit_ne0 = ne0;
        }
        t->type = QT_F32; /* the file is refused; keep the writer's state consistent */
    }
    t->row_bytes = qtype_row_bytes(t->type, (int64_t)ne0);
    gguf_writer_add_tensor_fill(p->g, name, t->type, ne1 ? 2 : 1, ne, fill_rows, t);
}

static void plan_layer(synth_plan *p, int layer, const char *suffix, uint64_t ne0, uint64_t ne1)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, suffix);
    plan_add(p, name, ne0, ne1);
}

/* The tensors under llama.cpp's names, in the order model_gguf_write() uses (after
 * rope_freqs.weight, which model_synth_write() adds itself). */
static void plan_tensors(synth_plan *p, const ts_model_config *c)
{
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    uint64_t q_dim = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim;
    plan_add(p, "token_embd.weight", dim, (uint64_t)c->vocab_size);
    plan_add(p, "output_norm.weight", dim, 0);
    if (!c->tied_output)
        plan_add(p, "output.weight", dim, (uint64_t)c->vocab_size);
    for (int l = 0; l < c->n_layers; l++) {
        plan_layer(p, l, "attn_norm", dim, 0);
        plan_layer(p, l, "attn_q", dim, q_dim);
        plan_layer(p, l, "attn_k", dim, kv_dim);
        plan_layer(p, l, "attn_v", dim, kv_dim);
        plan_layer(p, l, "attn_output", q_dim, dim);
        plan_layer(p, l, "ffn_norm", dim, 0);
        plan_layer(p, l, "ffn_gate", dim, ffn);
        plan_layer(p, l, "ffn_up", dim, ffn);
        plan_layer(p, l, "ffn_down", ffn, dim);
    }
}

ts_status model_synth_write(const char *path, const ts_model_config *c, const char *type,
                            const tokenizer_vocab *v, uint64_t seed, ts_error *err)
{
    synth_plan p = {.seed = seed};
    float *rope_factors = NULL;
    tokenizer_vocab padded;
    memset(&padded, 0, sizeof padded);
    ts_status st = model_config_validate(c, err);
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
    if (!(p.tensors = calloc((size_t)(3 + 9 * c->n_layers), sizeof *p.tensors))) {
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
    free(p.tensors);
    free((char *)p.unfit);
    free_padding(&padded, v->n_tokens);
    return st;
}
