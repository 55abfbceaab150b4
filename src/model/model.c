/* model.c: config validation, weight allocation (layer tables, norms, f32 matrices of
 * in-memory models), what the loaders share, and the model's getters and free. The
 * loading entry points are model_load.c's, the readers model_gguf.c's and
 * model_llama2c.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/model.h"
#include "qmat.h"
#include "qpack.h"

/* Caps on what an untrusted file may ask us to allocate. Generous for real models. */
enum {
    MODEL_MAX_DIM = 1 << 16,
    MODEL_MAX_LAYERS = 1024,
    MODEL_MAX_HEADS = 1024,
    MODEL_MAX_HEAD_DIM = 1024,
    MODEL_MAX_EXPERTS = 1024,
    MODEL_MAX_VOCAB = 1 << 20,
    MODEL_MAX_CONTEXT = 1 << 20,
};

ts_status model_config_validate(const ts_model_config *c, ts_error *err)
{
    if (c->dim <= 0 || c->dim > MODEL_MAX_DIM)
        return ts_error_set(err, TS_ERR_FORMAT, "embedding length %d out of range", c->dim);
    if (c->hidden_dim <= 0 || c->hidden_dim > 8 * MODEL_MAX_DIM)
        return ts_error_set(err, TS_ERR_FORMAT, "feed-forward length %d out of range",
                            c->hidden_dim);
    if (c->n_layers <= 0 || c->n_layers > MODEL_MAX_LAYERS)
        return ts_error_set(err, TS_ERR_FORMAT, "block count %d out of range", c->n_layers);
    if (c->n_heads <= 0 || c->n_heads > MODEL_MAX_HEADS)
        return ts_error_set(err, TS_ERR_FORMAT, "head count %d out of range", c->n_heads);
    if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "head count kv %d must divide head count %d", c->n_kv_heads,
                            c->n_heads);
    if (c->head_dim <= 0 || c->head_dim % 2 != 0 || c->head_dim > MODEL_MAX_HEAD_DIM ||
        (long)c->head_dim * c->n_heads > 4L * MODEL_MAX_DIM)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "head dimension %d must be even, 2 to %d, and %d heads of it at "
                            "most %d wide", c->head_dim, MODEL_MAX_HEAD_DIM, c->n_heads,
                            4 * MODEL_MAX_DIM);
    if (c->vocab_size <= 0 || c->vocab_size > MODEL_MAX_VOCAB)
        return ts_error_set(err, TS_ERR_FORMAT, "vocab size %d out of range", c->vocab_size);
    if (c->context_len <= 0 || c->context_len > MODEL_MAX_CONTEXT)
        return ts_error_set(err, TS_ERR_FORMAT, "context length %d out of range",
                            c->context_len);
    if (!(c->rope_freq_base > 0.0f) || !(c->rms_eps > 0.0f) || c->rms_eps > 1.0f)
        return ts_error_set(err, TS_ERR_FORMAT, "rope base %g or rms epsilon %g out of range",
                            (double)c->rope_freq_base, (double)c->rms_eps);
    if (!(c->rope_scale > 0.0f) || !isfinite(c->rope_scale))
        return ts_error_set(err, TS_ERR_FORMAT, "rope scaling factor %g out of range",
                            (double)c->rope_scale);
    float nonneg[] = {c->attn_scale, c->attn_softcap, c->final_softcap, c->rope_freq_base_swa,
                      c->rope_scale_swa};
    for (int i = 0; i < 5; i++)
        if (!(nonneg[i] >= 0.0f) || !isfinite(nonneg[i]))
            return ts_error_set(err, TS_ERR_FORMAT,
                                "attention scale %g, soft-caps %g / %g or windowed rope base %g "
                                "out of range", (double)c->attn_scale, (double)c->attn_softcap,
                                (double)c->final_softcap, (double)c->rope_freq_base_swa);
    if (c->swa_window < 0 || c->swa_pattern < 0 || c->swa_pattern > MODEL_MAX_LAYERS)
        return ts_error_set(err, TS_ERR_FORMAT, "sliding window %d or its pattern %d out of range",
                            c->swa_window, c->swa_pattern);
    if (c->n_experts < 0 || c->n_experts > MODEL_MAX_EXPERTS ||
        (c->n_experts > 0 && (c->n_experts_used < 1 || c->n_experts_used > c->n_experts)))
        return ts_error_set(err, TS_ERR_FORMAT, "%d experts, %d used a token: out of range",
                            c->n_experts, c->n_experts_used);
    if (c->shared_ffn_dim < 0 || c->shared_ffn_dim > 8 * MODEL_MAX_DIM ||
        (c->shared_ffn_dim > 0 && c->n_experts == 0))
        return ts_error_set(err, TS_ERR_FORMAT, "shared expert of %d (%d experts): out of range",
                            c->shared_ffn_dim, c->n_experts);
    if ((unsigned)c->ffn_act > TS_FFN_GELU || (c->ffn_act == TS_FFN_GELU && !c->encoder))
        return ts_error_set(err, TS_ERR_FORMAT, "feed-forward activation %d unknown%s",
                            (int)c->ffn_act, c->encoder ? "" : " for a decoder");
    if (c->encoder && (c->n_experts > 0 || c->swa_window > 0))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "an encoder with experts or windowed attention is not supported");
    return TS_OK;
}

static float *alloc_floats(size_t n)
{
    return calloc(n, sizeof(float));
}

simd_qmat model_qmat_f32(const float *data, int n, int k)
{
    simd_qmat m = {.type = QT_F32, .N = n, .K = k, .row_bytes = (size_t)k * sizeof(float),
                   .data = data};
    simd_qmat_plan(&m, simd_init(), SIMD_PACK_NEVER);
    return m;
}

/* Points m at n x k floats of the store at *cursor and moves the cursor past them. */
static void carve(simd_qmat *m, float **cursor, int n, int k)
{
    *m = model_qmat_f32(*cursor, n, k);
    *cursor += (size_t)n * (size_t)k;
}

ts_status model_weights_alloc(model_weights *w, const ts_model_config *c, bool with_matrices,
                              ts_error *err)
{
    size_t dim = (size_t)c->dim, L = (size_t)c->n_layers, ffn = (size_t)c->hidden_dim;
    size_t vocab = (size_t)c->vocab_size, q_dim = (size_t)c->n_heads * c->head_dim;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;

    size_t hd = (size_t)c->head_dim, qkv_rows = (size_t)model_qkv_rows(c);
    w->layers = calloc(L, sizeof *w->layers);
    w->rms_final = alloc_floats(dim);
    w->rms_att = alloc_floats(L * dim);
    w->rms_ffn = alloc_floats(L * dim);
    w->rope_factors = c->rope_factors ? alloc_floats(hd / 2) : NULL;
    w->rope_freq = alloc_floats(hd / 2);
    w->rope_freq_swa = alloc_floats(hd / 2);
    bool family_ok = true; /* the family's arrays, where it has them */
    if (c->qkv_bias)
        family_ok &= (w->qkv_bias = alloc_floats(L * qkv_rows)) != NULL;
    if (c->qk_norm) {
        family_ok &= (w->q_norm = alloc_floats(L * hd)) != NULL;
        family_ok &= (w->k_norm = alloc_floats(L * hd)) != NULL;
    }
    if (c->post_norms) {
        family_ok &= (w->rms_post_att = alloc_floats(L * dim)) != NULL;
        family_ok &= (w->rms_post_ffn = alloc_floats(L * dim)) != NULL;
    }
    w->n_layers = c->n_layers;
    w->layer_matrices = MODEL_LAYER_MATRICES;
    if (c->n_experts > 0) {
        if (with_matrices)
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "%s: a mixture of experts is read from GGUF files only", c->name);
        w->layer_matrices += MODEL_MOE_MATRICES + MODEL_EXPERT_MATRICES * c->n_experts;
        for (size_t l = 0; w->layers && l < L; l++)
            family_ok &= (w->layers[l].experts = calloc((size_t)c->n_experts * MODEL_EXPERT_MATRICES,
                                                        sizeof(simd_qmat))) != NULL;
    }
    if (with_matrices) {
        size_t per_layer = qkv_rows * dim + dim * q_dim + 3 * ffn * dim;
        w->store = alloc_floats(vocab * dim * (c->tied_output ? 1 : 2) + L * per_layer);
    }
    if (!w->layers || !w->rms_final || !w->rms_att || !w->rms_ffn || !family_ok ||
        (c->rope_factors && !w->rope_factors) || !w->rope_freq || !w->rope_freq_swa ||
        (with_matrices && !w->store))
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate weights for %s (dim %d, %d layers)",
                            c->name, c->dim, c->n_layers);
    if (!with_matrices)
        return TS_OK;
    float *p = w->store;
    carve(&w->tok_embd, &p, c->vocab_size, c->dim);
    if (c->tied_output)
        w->output = w->tok_embd;
    else
        carve(&w->output, &p, c->vocab_size, c->dim);
    for (int l = 0; l < c->n_layers; l++) {
        model_layer *ly = &w->layers[l];
        if (c->qkv_fused) {
            carve(&ly->wq, &p, (int)qkv_rows, c->dim);
            ly->wk = ly->wv = model_qmat_f32(NULL, 0, c->dim);
        } else {
            carve(&ly->wq, &p, (int)q_dim, c->dim);
            carve(&ly->wk, &p, (int)kv_dim, c->dim);
            carve(&ly->wv, &p, (int)kv_dim, c->dim);
        }
        carve(&ly->wo, &p, c->dim, (int)q_dim);
        if (c->ffn_fused) {
            carve(&ly->w1, &p, 2 * c->hidden_dim, c->dim);
            ly->w3 = model_qmat_f32(NULL, 0, c->dim);
        } else {
            carve(&ly->w1, &p, c->hidden_dim, c->dim);
            carve(&ly->w3, &p, c->hidden_dim, c->dim);
        }
        carve(&ly->w2, &p, c->dim, c->hidden_dim);
    }
    return TS_OK;
}

static void encoder_free(model_encoder *enc)
{
    if (!enc)
        return;
    free(enc->type_embd);
    free(enc->pos_embd);
    free(enc->embd_norm);
    free(enc->qkv_b);
    free(enc->out_b);
    free(enc->att_norm);
    free(enc->up_b);
    free(enc->down_b);
    free(enc->out_norm);
    free(enc->ones);
    free(enc->cls);
    free(enc->cls_b);
    free(enc->cls_out);
    free(enc->cls_out_b);
    free(enc);
}

void model_weights_free(model_weights *w)
{
    for (int l = 0; w->layers && l < w->n_layers; l++)
        free(w->layers[l].experts);
    free(w->layers);
    free(w->store);
    free(w->rms_final);
    free(w->rms_att);
    free(w->rms_ffn);
    free(w->qkv_bias);
    free(w->q_norm);
    free(w->k_norm);
    free(w->rms_post_att);
    free(w->rms_post_ffn);
    free(w->rope_factors);
    free(w->rope_freq);
    free(w->rope_freq_swa);
    encoder_free(w->enc);
    memset(w, 0, sizeof *w);
}

static uint64_t qmat_bytes(const simd_qmat *m)
{
    return (uint64_t)m->N * m->row_bytes;
}

simd_qmat *model_matrix(const model_weights *w, int i)
{
    if (i == 0)
        return (simd_qmat *)&w->output;
    model_layer *ly = &w->layers[(i - 1) / w->layer_matrices];
    int j = (i - 1) % w->layer_matrices;
    simd_qmat *lm[MODEL_LAYER_MATRICES + MODEL_MOE_MATRICES] = {
        &ly->wq,         &ly->wk,         &ly->wv,         &ly->wo,           &ly->w1,
        &ly->w3,         &ly->w2,         &ly->router,     &ly->shexp_gate,   &ly->shexp_up,
        &ly->shexp_down, &ly->shexp_gate_inp};
    int fixed = MODEL_LAYER_MATRICES + MODEL_MOE_MATRICES;
    return j < fixed ? lm[j] : &ly->experts[j - fixed];
}

bool model_all_f32(const model_weights *w)
{
    for (int i = 0; i < model_matrices(w); i++)
        if (model_matrix(w, i)->N > 0 && model_matrix(w, i)->type != QT_F32)
            return false;
    return true;
}

void model_weight_bytes(const model_weights *w, const ts_model_config *c, uint64_t *bytes,
                        uint64_t *params)
{
    uint64_t b = qmat_bytes(&w->tok_embd), n = (uint64_t)w->tok_embd.N * (uint64_t)w->tok_embd.K;
    if (!c->tied_output) {
        b += qmat_bytes(&w->output);
        n += (uint64_t)w->output.N * (uint64_t)w->output.K;
    }
    for (int i = 1; w->layers && i < model_matrices(w); i++) {
        const simd_qmat *m = model_matrix(w, i);
        b += qmat_bytes(m);
        n += (uint64_t)m->N * (uint64_t)m->K;
    }
    *bytes = b;
    *params = n;
}

/* table (hd/2) for RoPE base `base`, linear scale `scale` and w's factors. */
static void rope_fill(float *table, float base, float scale, const model_weights *w,
                      const ts_model_config *c)
{
    for (int i = 0; i < c->head_dim / 2; i++) {
        /* this exact expression, unscaled, is what llama2.c computes: models without
         * scaling keep its logits bit for bit (x / 1.0f == x) */
        float freq = 1.0f / powf(base, (float)(2 * i) / (float)c->head_dim);
        float divisor = (w->rope_factors ? w->rope_factors[i] : 1.0f) * scale;
        table[i] = freq / divisor;
    }
}

void model_rope_init(model_weights *w, const ts_model_config *c)
{
    rope_fill(w->rope_freq, c->rope_freq_base, c->rope_scale, w, c);
    float swa_base = c->rope_freq_base_swa > 0.0f ? c->rope_freq_base_swa : c->rope_freq_base;
    float swa_scale = c->rope_scale_swa > 0.0f ? c->rope_scale_swa : c->rope_scale;
    rope_fill(w->rope_freq_swa, swa_base, swa_scale, w, c);
}

/* Frees every pack of w (n_layers layers) and clears the pointers. The packs are made
 * by model_pack.c, above this file; the weights own them. */
void model_pack_free(model_weights *w)
{
    for (int i = 0; w->layers && i < model_matrices(w); i++) {
        simd_qmat *q = model_matrix(w, i);
        simd_qpack_free(q->pack);
        q->pack = NULL;
    }
}

void ts_model_free(ts_model *m)
{
    if (!m)
        return;
    model_pack_free(&m->w);
    model_weights_free(&m->w);
    if (m->locked_bytes)
        munlock(m->file->base, m->locked_bytes);
    gguf_close(m->file);
    ts_tokenizer_free(m->tokenizer);
    free(m->chat_template);
    free(m);
}

const ts_model_config *ts_model_get_config(const ts_model *m)
{
    return &m->cfg;
}

void ts_model_weight_bytes(const ts_model *m, uint64_t *bytes, uint64_t *params)
{
    model_weight_bytes(&m->w, &m->cfg, bytes, params);
}

const ts_tokenizer *ts_model_get_tokenizer(const ts_model *m)
{
    return m->tokenizer;
}

const char *ts_model_get_chat_template(const ts_model *m)
{
    return m->chat_template;
}
