/* model.c: format detection, config validation, weight allocation and the model's
 * lifecycle. The readers live in model_gguf.c and model_llama2c.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* Caps on what an untrusted file may ask us to allocate. Generous for real models. */
enum {
    MODEL_MAX_DIM = 1 << 16,
    MODEL_MAX_LAYERS = 1024,
    MODEL_MAX_HEADS = 1024,
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
    if (c->n_heads <= 0 || c->n_heads > MODEL_MAX_HEADS || c->dim % c->n_heads != 0)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "head count %d out of range or does not divide dim %d",
                            c->n_heads, c->dim);
    if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "head count kv %d must divide head count %d", c->n_kv_heads,
                            c->n_heads);
    if (c->head_dim <= 0 || c->head_dim % 2 != 0)
        return ts_error_set(err, TS_ERR_FORMAT, "head dimension %d must be positive and even",
                            c->head_dim);
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
    return TS_OK;
}

static float *alloc_floats(size_t n)
{
    return calloc(n, sizeof(float));
}

ts_status model_weights_alloc(model_weights *w, const ts_model_config *c, ts_error *err)
{
    size_t dim = (size_t)c->dim, L = (size_t)c->n_layers, ffn = (size_t)c->hidden_dim;
    size_t vocab = (size_t)c->vocab_size, q_dim = (size_t)c->n_heads * c->head_dim;

    w->tok_embd = alloc_floats(vocab * dim);
    w->output = c->tied_output ? w->tok_embd : alloc_floats(vocab * dim);
    w->rms_final = alloc_floats(dim);
    w->rms_att = alloc_floats(L * dim);
    w->rms_ffn = alloc_floats(L * dim);
    w->wqkv = alloc_floats(L * (size_t)model_qkv_rows(c) * dim);
    w->wo = alloc_floats(L * dim * q_dim);
    w->w13 = alloc_floats(L * 2 * ffn * dim);
    w->w2 = alloc_floats(L * dim * ffn);
    w->rope_factors = c->rope_factors ? alloc_floats((size_t)c->head_dim / 2) : NULL;
    w->rope_freq = alloc_floats((size_t)c->head_dim / 2);
    if (!w->tok_embd || !w->output || !w->rms_final || !w->rms_att || !w->rms_ffn ||
        !w->wqkv || !w->wo || !w->w13 || !w->w2 || (c->rope_factors && !w->rope_factors) ||
        !w->rope_freq)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate weights for %s (dim %d, %d layers)",
                            c->name, c->dim, c->n_layers);
    return TS_OK;
}

void model_weights_free(model_weights *w)
{
    if (w->output != w->tok_embd)
        free(w->output);
    free(w->tok_embd);
    free(w->rms_final);
    free(w->rms_att);
    free(w->rms_ffn);
    free(w->wqkv);
    free(w->wo);
    free(w->w13);
    free(w->w2);
    free(w->rope_factors);
    free(w->rope_freq);
    memset(w, 0, sizeof *w);
}

void model_rope_init(model_weights *w, const ts_model_config *c)
{
    for (int i = 0; i < c->head_dim / 2; i++) {
        /* this exact expression, unscaled, is what llama2.c computes: models without
         * scaling keep its logits bit for bit (x / 1.0f == x) */
        float freq = 1.0f / powf(c->rope_freq_base, (float)(2 * i) / (float)c->head_dim);
        float divisor = (w->rope_factors ? w->rope_factors[i] : 1.0f) * c->rope_scale;
        w->rope_freq[i] = freq / divisor;
    }
}

/* GGUF files start with these four bytes; anything else is taken for llama2.c. */
static int is_gguf_file(const char *path, ts_error *err, ts_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *st = ts_error_set(err, TS_ERR_IO, "cannot open %s", path);
        return -1;
    }
    char magic[4] = {0};
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return got == 4 && memcmp(magic, "GGUF", 4) == 0;
}

ts_status ts_model_load(const char *path, const char *tokenizer_path, ts_model **out,
                        ts_error *err)
{
    *out = NULL;
    ts_status st = TS_OK;
    int gguf = is_gguf_file(path, err, &st);
    if (gguf < 0)
        return st;
    if (gguf)
        return model_load_gguf(path, out, err);
    if (!tokenizer_path)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "%s is not GGUF; a llama2.c checkpoint needs its tokenizer file",
                            path);
    return model_load_llama2c(path, tokenizer_path, out, err);
}

void ts_model_free(ts_model *m)
{
    if (!m)
        return;
    model_weights_free(&m->w);
    ts_tokenizer_free(m->tokenizer);
    free(m->chat_template);
    free(m);
}

const ts_model_config *ts_model_get_config(const ts_model *m)
{
    return &m->cfg;
}

const ts_tokenizer *ts_model_get_tokenizer(const ts_model *m)
{
    return m->tokenizer;
}

const char *ts_model_get_chat_template(const ts_model *m)
{
    return m->chat_template;
}
