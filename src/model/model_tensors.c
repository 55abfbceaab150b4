/* model_tensors.c: a model's tensors read out of a GGUF file by name, shape and type,
 * shared by the decoder families' reader (model_gguf.c) and the encoders' (encoder.c). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/model_tensors.h"
#include "quant.h"

/* The tensor called name, which must have ggml shape (ne0, ne1): a refusal names it. */
ts_status tensors_find_shaped(const gguf_tensor **out, const gguf_file *f, const char *name,
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
ts_status tensors_check_type(const gguf_tensor *t, const char *name, ts_error *err)
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
ts_status tensors_map_matrix(simd_qmat *m, const gguf_file *f, const char *name, uint64_t k,
                             uint64_t n, ts_error *err)
{
    const gguf_tensor *t = NULL;
    ts_status st;
    if ((st = tensors_find_shaped(&t, f, name, k, n, err)) != TS_OK ||
        (st = tensors_check_type(t, name, err)) != TS_OK)
        return st;
    *m = (simd_qmat){.type = t->type, .N = (int)n, .K = (int)k,
                     .row_bytes = qtype_row_bytes(t->type, (int64_t)k), .data = t->data};
    return TS_OK;
}

/* Converts the vector called name, of n elements in any supported type, into dst (n). */
ts_status tensors_load_vector(float *dst, const gguf_file *f, const char *name, uint64_t n,
                              ts_error *err)
{
    const gguf_tensor *t = NULL;
    ts_status st;
    if ((st = tensors_find_shaped(&t, f, name, n, 1, err)) != TS_OK ||
        (st = tensors_check_type(t, name, err)) != TS_OK)
        return st;
    qtype_dequant_row(dst, t->data, t->type, (int64_t)n);
    return TS_OK;
}

const char *tensors_layer_name(char *buf, size_t cap, int layer, const char *suffix)
{
    snprintf(buf, cap, "blk.%d.%s.weight", layer, suffix);
    return buf;
}

/* Layer l's biases of Q, K and V into bias (qkv_rows): the fused attn_qkv.bias, or each of
 * attn_{q,k,v}.bias that the file has (a missing one stays 0). */
ts_status tensors_load_qkv_bias(float *bias, const ts_model_config *c, const gguf_file *f, int l,
                                ts_error *err)
{
    uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    char n[96];
    if (c->qkv_fused) {
        snprintf(n, sizeof n, "blk.%d.attn_qkv.bias", l);
        return gguf_find_tensor(f, n) ? tensors_load_vector(bias, f, n, q_dim + 2 * kv_dim, err)
                                      : TS_OK;
    }
    const char *part[] = {"attn_q", "attn_k", "attn_v"};
    uint64_t rows[] = {q_dim, kv_dim, kv_dim}, at = 0;
    for (int i = 0; i < 3; at += rows[i], i++) {
        snprintf(n, sizeof n, "blk.%d.%s.bias", l, part[i]);
        ts_status st;
        if (gguf_find_tensor(f, n) &&
            (st = tensors_load_vector(bias + at, f, n, rows[i], err)) != TS_OK)
            return st;
    }
    return TS_OK;
}

/* Layer l's attention matrices: attn_qkv, or attn_q / attn_k / attn_v (c->qkv_fused); then
 * attn_output. A fused matrix takes wq's place and leaves wk and wv empty. */
ts_status tensors_map_attention(model_layer *ly, const ts_model_config *c, const gguf_file *f,
                                int l, ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim, q_dim = (uint64_t)c->n_heads * c->head_dim;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    char n[96];
    ts_status st;
    if (c->qkv_fused) {
        if ((st = tensors_map_matrix(&ly->wq, f, tensors_layer_name(n, sizeof n, l, "attn_qkv"),
                                     dim, q_dim + 2 * kv_dim, err)) != TS_OK)
            return st;
        ly->wk = ly->wv = (simd_qmat){.type = ly->wq.type, .K = c->dim};
    } else if ((st = tensors_map_matrix(&ly->wq, f, tensors_layer_name(n, sizeof n, l, "attn_q"),
                                        dim, q_dim, err)) != TS_OK ||
               (st = tensors_map_matrix(&ly->wk, f, tensors_layer_name(n, sizeof n, l, "attn_k"),
                                        dim, kv_dim, err)) != TS_OK ||
               (st = tensors_map_matrix(&ly->wv, f, tensors_layer_name(n, sizeof n, l, "attn_v"),
                                        dim, kv_dim, err)) != TS_OK) {
        return st;
    }
    return tensors_map_matrix(&ly->wo, f, tensors_layer_name(n, sizeof n, l, "attn_output"), q_dim,
                              dim, err);
}

const char *tensors_layer_suffix(gguf_str name, int n_layers, char buf[TENSORS_NAME_MAX])
{
    int layer = -1, end = 0;
    if (name.len >= TENSORS_NAME_MAX)
        return NULL;
    memcpy(buf, name.ptr, (size_t)name.len);
    buf[name.len] = '\0';
    if (sscanf(buf, "blk.%d.%n", &layer, &end) != 1 || end == 0 || layer < 0 || layer >= n_layers)
        return NULL;
    return buf + end;
}

ts_status tensors_refuse_unread(const gguf_file *f, const ts_model_config *c,
                                bool (*reads)(const ts_model_config *c, gguf_str name),
                                ts_error *err)
{
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_str name = f->tensors[i].name;
        if (!reads(c, name))
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "tensor '%.*s' is not part of a %s model as tessera runs it",
                                (int)(name.len > 96 ? 96 : name.len), name.ptr, c->arch);
    }
    return TS_OK;
}
