/* model_gguf.c: a Llama config from a parsed GGUF file, and its weights mapped in their
 * own types (norms converted to f32). */
#include <limits.h>
#include <stdint.h>
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

/* The tensor called name, which must have ggml shape (ne0, ne1): a refusal names it. */
static ts_status find_shaped(const gguf_tensor **out, const gguf_file *f, const char *name,
                             uint64_t ne0, uint64_t ne1, ts_error *err)
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
    *out = t;
    return TS_OK;
}

/* Checks t's type: one tessera computes on, rows of whole blocks, exactly the bytes its
 * shape needs, and (for the plain float types, which kernels load as such) data aligned
 * to its element. */
static ts_status check_type(const gguf_tensor *t, const char *name, ts_error *err)
{
    const qtype_info *q = qtype_get(t->type);
    if (!q) {
        const char *tn = qtype_name(t->type);
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "tensor '%s' has type %s (%u), which tessera does not support", name,
                            tn ? tn : "unknown", t->type);
    }
    size_t row = qtype_row_bytes(t->type, (int64_t)t->ne[0]);
    if (row == 0)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "tensor '%s': rows of %llu elements are not whole %s blocks of %u",
                            name, (unsigned long long)t->ne[0], q->name, q->block_elems);
    if (t->nbytes != (uint64_t)row * t->ne[1])
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s' holds %llu bytes, its %s shape %llu",
                            name, (unsigned long long)t->nbytes, q->name,
                            (unsigned long long)((uint64_t)row * t->ne[1]));
    size_t align = q->block_elems == 1 ? q->block_bytes : 1;
    if ((uintptr_t)t->data % align != 0)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s': %s data not aligned to %zu bytes",
                            name, q->name, align);
    return TS_OK;
}

/* Points m at the matrix called name, of n rows of k inputs (ggml shape (k, n)), in the
 * file's bytes: nothing is copied. */
static ts_status map_matrix(simd_qmat *m, const gguf_file *f, const char *name, uint64_t k,
                            uint64_t n, ts_error *err)
{
    const gguf_tensor *t = NULL;
    ts_status st;
    if ((st = find_shaped(&t, f, name, k, n, err)) != TS_OK ||
        (st = check_type(t, name, err)) != TS_OK)
        return st;
    *m = (simd_qmat){.type = t->type, .N = (int)n, .K = (int)k,
                     .row_bytes = qtype_row_bytes(t->type, (int64_t)k), .data = t->data};
    return TS_OK;
}

/* Converts the vector called name, of n elements in any supported type, into dst (n). */
static ts_status load_vector(float *dst, const gguf_file *f, const char *name, uint64_t n,
                             ts_error *err)
{
    const gguf_tensor *t = NULL;
    ts_status st;
    if ((st = find_shaped(&t, f, name, n, 1, err)) != TS_OK ||
        (st = check_type(t, name, err)) != TS_OK)
        return st;
    qtype_dequant_row(dst, t->data, t->type, (int64_t)n);
    return TS_OK;
}

static const char *layer_name(char *buf, size_t cap, int layer, const char *suffix)
{
    snprintf(buf, cap, "blk.%d.%s.weight", layer, suffix);
    return buf;
}

ts_status model_gguf_read_weights(model_weights *w, const ts_model_config *c,
                                  const gguf_file *f, ts_error *err)
{
    /* ggml shapes are (in, out): ne[0] is the row length of our (out, in) matrices. */
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim, vocab = (uint64_t)c->vocab_size;
    uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    ts_status st;
    if ((st = model_weights_alloc(w, c, false, err)) != TS_OK ||
        (st = map_matrix(&w->tok_embd, f, "token_embd.weight", dim, vocab, err)) != TS_OK ||
        (st = load_vector(w->rms_final, f, "output_norm.weight", dim, err)) != TS_OK)
        return st;
    if (c->tied_output)
        w->output = w->tok_embd;
    else if ((st = map_matrix(&w->output, f, "output.weight", dim, vocab, err)) != TS_OK)
        return st;
    if (c->rope_factors) {
        /* Llama 3.1's long-context scaling, worked out by the converter: one divisor of
         * each dimension pair's frequency (llama.cpp's freq_factors) */
        int half = c->head_dim / 2;
        if ((st = load_vector(w->rope_factors, f, "rope_freqs.weight", (uint64_t)half, err)) !=
            TS_OK)
            return st;
        for (int i = 0; i < half; i++)
            if (!(w->rope_factors[i] > 0.0f) || !isfinite(w->rope_factors[i]))
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "tensor 'rope_freqs.weight': factor %d is %g, not a "
                                    "positive number", i, (double)w->rope_factors[i]);
    }
    char n[96];
    for (int l = 0; l < c->n_layers; l++) {
        model_layer *ly = &w->layers[l];
        if ((st = load_vector(w->rms_att + l * dim, f, layer_name(n, sizeof n, l, "attn_norm"),
                              dim, err)) != TS_OK ||
            (st = load_vector(w->rms_ffn + l * dim, f, layer_name(n, sizeof n, l, "ffn_norm"),
                              dim, err)) != TS_OK ||
            (st = map_matrix(&ly->wq, f, layer_name(n, sizeof n, l, "attn_q"), dim, q_dim,
                             err)) != TS_OK ||
            (st = map_matrix(&ly->wk, f, layer_name(n, sizeof n, l, "attn_k"), dim, kv_dim,
                             err)) != TS_OK ||
            (st = map_matrix(&ly->wv, f, layer_name(n, sizeof n, l, "attn_v"), dim, kv_dim,
                             err)) != TS_OK ||
            (st = map_matrix(&ly->wo, f, layer_name(n, sizeof n, l, "attn_output"), q_dim, dim,
                             err)) != TS_OK ||
            (st = map_matrix(&ly->w1, f, layer_name(n, sizeof n, l, "ffn_gate"), dim, ffn,
                             err)) != TS_OK ||
            (st = map_matrix(&ly->w3, f, layer_name(n, sizeof n, l, "ffn_up"), dim, ffn,
                             err)) != TS_OK ||
            (st = map_matrix(&ly->w2, f, layer_name(n, sizeof n, l, "ffn_down"), ffn, dim,
                             err)) != TS_OK)
            return st;
    }
    return TS_OK;
}
