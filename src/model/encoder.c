/* encoder.c: an encoder's weights from GGUF under llama.cpp's names (token_types,
 * position_embd, token_embd_norm, attn_output_norm, layer_output_norm and the biases).
 * The pass is forward_encoder.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/encoder.h"
#include "model/model_tensors.h"

static ts_status alloc_arrays(model_encoder *e, const ts_model_config *c, ts_error *err)
{
    size_t dim = (size_t)c->dim, L = (size_t)c->n_layers, ffn = (size_t)c->hidden_dim;
    e->type_embd = calloc(dim, sizeof(float));
    e->embd_norm = calloc(2 * dim, sizeof(float));
    e->qkv_b = calloc(L * (size_t)model_qkv_rows(c), sizeof(float));
    e->out_b = calloc(L * dim, sizeof(float));
    e->att_norm = calloc(L * 2 * dim, sizeof(float));
    e->up_b = calloc(L * ffn, sizeof(float));
    e->down_b = calloc(L * dim, sizeof(float));
    e->out_norm = calloc(L * 2 * dim, sizeof(float));
    e->ones = malloc(ffn * sizeof(float));
    if (!e->type_embd || !e->embd_norm || !e->qkv_b ||
        !e->out_b || !e->att_norm || !e->up_b || !e->down_b || !e->out_norm || !e->ones)
        return ts_error_set(err, TS_ERR_NOMEM, "encoder arrays of %d layers", c->n_layers);
    for (size_t i = 0; i < ffn; i++)
        e->ones[i] = 1.0f;
    return TS_OK;
}

/* The optional vector called name (n) into dst, which keeps its zeros when it is absent. */
static ts_status optional_vector(float *dst, const gguf_file *f, const char *name, uint64_t n,
                                 ts_error *err)
{
    return gguf_find_tensor(f, name) ? tensors_load_vector(dst, f, name, n, err) : TS_OK;
}

/* A LayerNorm's weight and bias, PREFIX.weight and PREFIX.bias, into wb (2, n). */
static ts_status layer_norm(float *wb, const gguf_file *f, const char *prefix, uint64_t n,
                            ts_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    ts_status st = tensors_load_vector(wb, f, name, n, err);
    if (st != TS_OK)
        return st;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return tensors_load_vector(wb + n, f, name, n, err);
}

/* Token type 0's row of token_types (optional), the learned positions where the family
 * has them (its first context_len rows; a file may carry more), the embeddings' norm. */
static ts_status read_embeddings(model_encoder *e, const ts_model_config *c, const gguf_file *f,
                                 ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim;
    const gguf_tensor *t = gguf_find_tensor(f, "token_types.weight");
    if (t) {
        if (t->n_dims != 2 || t->ne[0] != dim || t->ne[1] < 1 || t->ne[1] > 16)
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tensor 'token_types.weight' must be (%llu, 1..16)",
                                (unsigned long long)dim);
        size_t row = qtype_row_bytes(t->type, (int64_t)dim);
        if (!qtype_get(t->type) || row == 0 || t->nbytes != row * t->ne[1])
            return ts_error_set(err, TS_ERR_FORMAT, "tensor 'token_types.weight': bad type or size");
        qtype_dequant_row(e->type_embd, t->data, t->type, (int64_t)dim);
    }
    if (c->pos_embd) {
        simd_qmat pos;
        ts_status st = tensors_map_matrix(&pos, f, "position_embd.weight", dim,
                                          (uint64_t)c->context_len, err);
        if (st != TS_OK) /* checked before the rows are allocated: the file holds them */
            return st;
        if (!(e->pos_embd = malloc((size_t)c->context_len * dim * sizeof(float))))
            return ts_error_set(err, TS_ERR_NOMEM, "%d learned positions", c->context_len);
        for (int p = 0; p < c->context_len; p++)
            qtype_dequant_row(e->pos_embd + (size_t)p * dim,
                              (const char *)pos.data + (size_t)p * pos.row_bytes, pos.type,
                              (int64_t)dim);
    }
    return layer_norm(e->embd_norm, f, "token_embd_norm", dim, err);
}

static const char *blk(char *buf, size_t cap, int l, const char *suffix)
{
    snprintf(buf, cap, "blk.%d.%s", l, suffix);
    return buf;
}

/* Layer l: attention (with its biases), the two LayerNorms, the feed-forward matrices
 * (BERT's ffn_up in w1; nomic-bert's ffn_gate in w1 and ffn_up in w3) and biases. */
static ts_status read_layer(model_weights *w, const ts_model_config *c, const gguf_file *f,
                            int l, ts_error *err)
{
    model_encoder *e = w->enc;
    model_layer *ly = &w->layers[l];
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    size_t ld = (size_t)l * dim;
    char n[96];
    ts_status st;
    bool gated = c->ffn_act != TS_FFN_GELU;
    if ((st = tensors_map_attention(ly, c, f, l, err)) != TS_OK ||
        (st = tensors_load_qkv_bias(e->qkv_b + (size_t)l * model_qkv_rows(c), c, f, l,
                                    err)) != TS_OK ||
        (st = optional_vector(e->out_b + ld, f, blk(n, sizeof n, l, "attn_output.bias"), dim,
                              err)) != TS_OK ||
        (st = layer_norm(e->att_norm + 2 * ld, f, blk(n, sizeof n, l, "attn_output_norm"), dim,
                         err)) != TS_OK ||
        (st = layer_norm(e->out_norm + 2 * ld, f, blk(n, sizeof n, l, "layer_output_norm"), dim,
                         err)) != TS_OK)
        return st;
    if (gated) {
        if ((st = tensors_map_matrix(&ly->w1, f, blk(n, sizeof n, l, "ffn_gate.weight"), dim,
                                     ffn, err)) != TS_OK ||
            (st = tensors_map_matrix(&ly->w3, f, blk(n, sizeof n, l, "ffn_up.weight"), dim, ffn,
                                     err)) != TS_OK)
            return st;
    } else {
        if ((st = tensors_map_matrix(&ly->w1, f, blk(n, sizeof n, l, "ffn_up.weight"), dim, ffn,
                                     err)) != TS_OK)
            return st;
        ly->w3 = (simd_qmat){.type = QT_F32, .K = c->dim};
    }
    if ((st = optional_vector(e->up_b + (size_t)l * ffn, f, blk(n, sizeof n, l, "ffn_up.bias"),
                              ffn, err)) != TS_OK ||
        (st = optional_vector(e->down_b + ld, f, blk(n, sizeof n, l, "ffn_down.bias"), dim,
                              err)) != TS_OK)
        return st;
    return tensors_map_matrix(&ly->w2, f, blk(n, sizeof n, l, "ffn_down.weight"), ffn, dim, err);
}

/* The matrix called name, n rows of k, dequantized into a new *out; its type in *type. */
static ts_status read_dense(float **out, uint32_t *type, const gguf_file *f, const char *name,
                            uint64_t k, uint64_t n, ts_error *err)
{
    simd_qmat m;
    ts_status st = tensors_map_matrix(&m, f, name, k, n, err);
    if (st != TS_OK)
        return st;
    *type = m.type;
    if (!(*out = malloc((size_t)(k * n) * sizeof(float))))
        return ts_error_set(err, TS_ERR_NOMEM, "tensor '%s'", name);
    for (uint64_t r = 0; r < n; r++)
        qtype_dequant_row(*out + r * k, (const char *)m.data + r * m.row_bytes, m.type,
                          (int64_t)k);
    return TS_OK;
}

/* A reranker's classification head: cls (dim, dim) and cls.output (cls_out rows), each
 * with its optional bias, where the file has them. */
static ts_status read_head(model_encoder *e, const ts_model_config *c, const gguf_file *f,
                           ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim, n_out = (uint64_t)c->cls_out;
    ts_status st;
    if (gguf_find_tensor(f, "cls.weight")) {
        if ((st = read_dense(&e->cls, &e->cls_type, f, "cls.weight", dim, dim, err)) != TS_OK)
            return st;
        if (!(e->cls_b = calloc(dim, sizeof(float))))
            return ts_error_set(err, TS_ERR_NOMEM, "cls.bias");
        if ((st = optional_vector(e->cls_b, f, "cls.bias", dim, err)) != TS_OK)
            return st;
    }
    if (!gguf_find_tensor(f, "cls.output.weight"))
        return TS_OK;
    if ((st = read_dense(&e->cls_out, &e->cls_out_type, f, "cls.output.weight", dim, n_out,
                          err)) != TS_OK)
        return st;
    if (!(e->cls_out_b = calloc(n_out, sizeof(float))))
        return ts_error_set(err, TS_ERR_NOMEM, "cls.output.bias");
    return optional_vector(e->cls_out_b, f, "cls.output.bias", n_out, err);
}

/* Whether the encoder pass reads the tensor called name (a file with another is not the
 * model tessera would run, and is refused by name). */
static bool tensor_read(const ts_model_config *c, gguf_str name)
{
    static const char *const global[] = {"token_embd.weight", "token_types.weight",
                                         "token_embd_norm.weight", "token_embd_norm.bias"};
    for (int i = 0; i < 4; i++)
        if (gguf_str_eq(name, global[i]))
            return true;
    if (c->pos_embd && gguf_str_eq(name, "position_embd.weight"))
        return true;
    static const char *const head[] = {"cls.weight", "cls.bias", "cls.output.weight",
                                       "cls.output.bias"};
    for (int i = 0; c->pooling == TS_POOLING_RANK && i < 4; i++)
        if (gguf_str_eq(name, head[i]))
            return true;
    char buf[TENSORS_NAME_MAX];
    const char *suffix = tensors_layer_suffix(name, c->n_layers, buf);
    if (!suffix)
        return false;
    static const char *const always[] = {
        "attn_output.weight", "attn_output.bias", "attn_output_norm.weight",
        "attn_output_norm.bias", "layer_output_norm.weight", "layer_output_norm.bias",
        "ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias"};
    static const char *const fused[] = {"attn_qkv.weight", "attn_qkv.bias"};
    static const char *const split[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight",
                                        "attn_q.bias", "attn_k.bias", "attn_v.bias"};
    for (size_t i = 0; i < sizeof always / sizeof *always; i++)
        if (!strcmp(suffix, always[i]))
            return true;
    for (size_t i = 0; c->qkv_fused && i < 2; i++)
        if (!strcmp(suffix, fused[i]))
            return true;
    for (size_t i = 0; !c->qkv_fused && i < 6; i++)
        if (!strcmp(suffix, split[i]))
            return true;
    return c->ffn_act != TS_FFN_GELU && !strcmp(suffix, "ffn_gate.weight");
}

ts_status encoder_read_weights(model_weights *w, const ts_model_config *c, const gguf_file *f,
                               ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim;
    ts_status st;
    if (c->n_experts > 0)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "%s: an encoder with a mixture of experts is not supported", c->arch);
    if ((st = model_weights_alloc(w, c, false, err)) != TS_OK)
        return st;
    if (!(w->enc = calloc(1, sizeof *w->enc)))
        return ts_error_set(err, TS_ERR_NOMEM, "encoder tensors");
    if ((st = alloc_arrays(w->enc, c, err)) != TS_OK ||
        (st = tensors_map_matrix(&w->tok_embd, f, "token_embd.weight", dim,
                                 (uint64_t)c->vocab_size, err)) != TS_OK ||
        (st = read_embeddings(w->enc, c, f, err)) != TS_OK)
        return st;
    w->output = (simd_qmat){.type = QT_F32, .K = c->dim}; /* no LM head */
    if (c->pooling == TS_POOLING_RANK && (st = read_head(w->enc, c, f, err)) != TS_OK)
        return st;
    for (int l = 0; l < c->n_layers; l++)
        if ((st = read_layer(w, c, f, l, err)) != TS_OK)
            return st;
    return tensors_refuse_unread(f, c, tensor_read, err);
}
