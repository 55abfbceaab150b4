/* model_gguf.c: a Llama config and its f32 weights from a parsed GGUF file. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_gguf.h"

/* An optional positive int key: *out keeps its default when the key is absent. */
static ts_status get_int(const gguf_file *f, const char *key, bool required, int *out,
                         ts_error *err)
{
    int64_t v;
    ts_status st = gguf_get_i64(f, key, &v, err);
    if (st == TS_ERR_NOT_FOUND && !required)
        return TS_OK;
    if (st != TS_OK)
        return st;
    if (v <= 0 || v > INT_MAX)
        return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s': %lld is out of range", key,
                            (long long)v);
    *out = (int)v;
    return TS_OK;
}

static ts_status get_float(const gguf_file *f, const char *key, float *out, ts_error *err)
{
    double v;
    ts_status st = gguf_get_f64(f, key, &v, err);
    if (st == TS_ERR_NOT_FOUND)
        return TS_OK;
    if (st == TS_OK)
        *out = (float)v;
    return st;
}

/* RoPE scaling, as llama.cpp reads it: llama.rope.scaling.type (linear when absent) and
 * llama.rope.scaling.factor (llama.rope.scale_linear in older files; 0 or absent is 1).
 * Linear scaling divides every frequency by the factor; "none" ignores the factor, as
 * llama.cpp does. Other types (yarn, longrope, ...) also change the attention or mix
 * frequencies by context length: refused by name rather than run wrongly. */
static ts_status read_rope_scaling(ts_model_config *c, const gguf_file *f, ts_error *err)
{
    gguf_str type = {"linear", 6};
    ts_status st = gguf_get_str(f, "llama.rope.scaling.type", &type, err);
    if (st != TS_OK && st != TS_ERR_NOT_FOUND)
        return st;
    bool linear = gguf_str_eq(type, "linear");
    if (!linear && !gguf_str_eq(type, "none"))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "llama.rope.scaling.type '%.*s' is not supported (none and linear "
                            "are)", (int)(type.len > 64 ? 64 : type.len), type.ptr);
    const char *key = "llama.rope.scaling.factor";
    if (!gguf_find_kv(f, key) && gguf_find_kv(f, "llama.rope.scale_linear"))
        key = "llama.rope.scale_linear";
    float factor = 0.0f;
    if ((st = get_float(f, key, &factor, err)) != TS_OK)
        return st;
    if (!(factor >= 0.0f) || !isfinite(factor))
        return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s': %g is out of range", key,
                            (double)factor);
    c->rope_scale = linear && factor != 0.0f ? factor : 1.0f;
    return TS_OK;
}

static void copy_str(char *dst, size_t cap, gguf_str s)
{
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = '\0';
}

ts_status model_gguf_read_config(ts_model_config *c, const gguf_file *f,
                                 const char *name_fallback, ts_error *err)
{
    memset(c, 0, sizeof *c);
    gguf_str s;
    ts_status st = gguf_get_str(f, "general.architecture", &s, err);
    if (st != TS_OK)
        return st;
    if (!gguf_str_eq(s, "llama"))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "architecture '%.*s' is not supported (only llama is)",
                            (int)(s.len > 64 ? 64 : s.len), s.ptr);
    copy_str(c->arch, sizeof c->arch, s);
    /* general.name names the model unless it is missing or merely repeats the
     * architecture (llama.cpp's llama2.c converter writes "llama"); then the file's base
     * name is the more useful id. */
    if (gguf_get_str(f, "general.name", &s, NULL) == TS_OK && s.len > 0 && !gguf_str_eq(s, c->arch))
        copy_str(c->name, sizeof c->name, s);
    else if (name_fallback)
        snprintf(c->name, sizeof c->name, "%s", name_fallback);

    c->rope_freq_base = 10000.0f;
    c->rms_eps = 1e-5f;
    if ((st = get_int(f, "llama.context_length", true, &c->context_len, err)) != TS_OK ||
        (st = get_int(f, "llama.embedding_length", true, &c->dim, err)) != TS_OK ||
        (st = get_int(f, "llama.block_count", true, &c->n_layers, err)) != TS_OK ||
        (st = get_int(f, "llama.feed_forward_length", true, &c->hidden_dim, err)) != TS_OK ||
        (st = get_int(f, "llama.attention.head_count", true, &c->n_heads, err)) != TS_OK)
        return st;
    c->n_kv_heads = c->n_heads;
    if ((st = get_int(f, "llama.attention.head_count_kv", false, &c->n_kv_heads, err)) != TS_OK ||
        (st = get_float(f, "llama.rope.freq_base", &c->rope_freq_base, err)) != TS_OK ||
        (st = get_float(f, "llama.attention.layer_norm_rms_epsilon", &c->rms_eps, err)) != TS_OK ||
        (st = read_rope_scaling(c, f, err)) != TS_OK)
        return st;
    c->head_dim = c->dim / c->n_heads;
    int rot = c->head_dim;
    if ((st = get_int(f, "llama.rope.dimension_count", false, &rot, err)) != TS_OK)
        return st;
    if (rot != c->head_dim)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "llama.rope.dimension_count %d differs from the head dimension %d "
                            "(partial rotary embeddings are not supported)", rot, c->head_dim);

    /* Vocabulary size: the explicit key, else the token list, else the embedding rows. */
    const gguf_value *tokens;
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    if (gguf_find_kv(f, "llama.vocab_size")) {
        if ((st = get_int(f, "llama.vocab_size", true, &c->vocab_size, err)) != TS_OK)
            return st;
    } else if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, NULL) ==
                   TS_OK && tokens->v.arr.n <= INT_MAX) {
        c->vocab_size = (int)tokens->v.arr.n;
    } else if (embd && embd->n_dims == 2 && embd->ne[1] <= INT_MAX) {
        c->vocab_size = (int)embd->ne[1];
    } else {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "vocabulary size: no llama.vocab_size, token list or token_embd.weight");
    }
    c->rope_neox = false; /* llama.cpp's converter stores Q and K for (2i, 2i+1) pairs */
    c->rope_factors = gguf_find_tensor(f, "rope_freqs.weight") != NULL;
    c->tied_output = gguf_find_tensor(f, "output.weight") == NULL;
    return TS_OK;
}

/* Dequantises the tensor called name, which must have shape (ne0, ne1), into dst. */
static ts_status load(float *dst, const gguf_file *f, const char *name, uint64_t ne0,
                      uint64_t ne1, ts_error *err)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "tensor '%s' has shape (%llu, %llu, %llu, %llu), expected (%llu, %llu)",
                            name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                            (unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
                            (unsigned long long)ne0, (unsigned long long)ne1);
    return gguf_tensor_to_f32(dst, t, (size_t)(ne0 * ne1), err);
}

static ts_status load_layer(float *dst, const gguf_file *f, int layer, const char *suffix,
                            uint64_t ne0, uint64_t ne1, ts_error *err)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, suffix);
    return load(dst, f, name, ne0, ne1, err);
}

ts_status model_gguf_read_weights(model_weights *w, const ts_model_config *c,
                                  const gguf_file *f, ts_error *err)
{
    /* ggml shapes are (in, out): ne[0] is the row length of our (out, in) matrices. */
    size_t dim = (size_t)c->dim, ffn = (size_t)c->hidden_dim, vocab = (size_t)c->vocab_size;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t qkv = (size_t)model_qkv_rows(c);
    ts_status st;
    if ((st = load(w->tok_embd, f, "token_embd.weight", dim, vocab, err)) != TS_OK ||
        (st = load(w->rms_final, f, "output_norm.weight", dim, 1, err)) != TS_OK)
        return st;
    if (!c->tied_output && (st = load(w->output, f, "output.weight", dim, vocab, err)) != TS_OK)
        return st;
    if (c->rope_factors) {
        /* Llama 3.1's long-context scaling, worked out by the converter: one divisor of
         * each dimension pair's frequency (llama.cpp's freq_factors) */
        int half = c->head_dim / 2;
        if ((st = load(w->rope_factors, f, "rope_freqs.weight", (uint64_t)half, 1, err)) != TS_OK)
            return st;
        for (int i = 0; i < half; i++)
            if (!(w->rope_factors[i] > 0.0f) || !isfinite(w->rope_factors[i]))
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "tensor 'rope_freqs.weight': factor %d is %g, not a "
                                    "positive number", i, (double)w->rope_factors[i]);
    }
    for (int l = 0; l < c->n_layers; l++) {
        float *wqkv = w->wqkv + (size_t)l * qkv * dim;
        float *w13 = w->w13 + (size_t)l * 2 * ffn * dim;
        if ((st = load_layer(w->rms_att + l * dim, f, l, "attn_norm", dim, 1, err)) != TS_OK ||
            (st = load_layer(w->rms_ffn + l * dim, f, l, "ffn_norm", dim, 1, err)) != TS_OK ||
            (st = load_layer(wqkv, f, l, "attn_q", dim, q_dim, err)) != TS_OK ||
            (st = load_layer(wqkv + q_dim * dim, f, l, "attn_k", dim, kv_dim, err)) != TS_OK ||
            (st = load_layer(wqkv + (q_dim + kv_dim) * dim, f, l, "attn_v", dim, kv_dim,
                             err)) != TS_OK ||
            (st = load_layer(w->wo + (size_t)l * dim * q_dim, f, l, "attn_output", q_dim, dim,
                             err)) != TS_OK ||
            (st = load_layer(w13, f, l, "ffn_gate", dim, ffn, err)) != TS_OK ||
            (st = load_layer(w13 + ffn * dim, f, l, "ffn_up", dim, ffn, err)) != TS_OK ||
            (st = load_layer(w->w2 + (size_t)l * dim * ffn, f, l, "ffn_down", ffn, dim, err)) !=
                TS_OK)
            return st;
    }
    return TS_OK;
}
