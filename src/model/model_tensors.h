/* model_tensors.h: a model's tensors read out of a GGUF file by name, shape and type,
 * shared by the decoder families' reader (model_gguf.c) and the encoders' (encoder.c).
 * Matrices point into the file's bytes (nothing is copied; the file must outlive them);
 * vectors are converted to f32. Every refusal names the tensor. */
#ifndef TESSERA_MODEL_MODEL_TENSORS_H
#define TESSERA_MODEL_MODEL_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "model/model.h"

/* The tensor called name, which must have ggml shape (ne0, ne1). */
ts_status tensors_find_shaped(const gguf_tensor **out, const gguf_file *f, const char *name,
                              uint64_t ne0, uint64_t ne1, ts_error *err);

/* t's type is one tessera computes on, its rows whole blocks, its bytes exactly what its
 * shape needs, and (plain float types) its data aligned to its element. */
ts_status tensors_check_type(const gguf_tensor *t, const char *name, ts_error *err);

/* m pointed at the matrix called name, of n rows of k inputs (ggml shape (k, n)). */
ts_status tensors_map_matrix(simd_qmat *m, const gguf_file *f, const char *name, uint64_t k,
                             uint64_t n, ts_error *err);

/* The vector called name, of n elements in any supported type, converted into dst (n). */
ts_status tensors_load_vector(float *dst, const gguf_file *f, const char *name, uint64_t n,
                              ts_error *err);

/* "blk.LAYER.SUFFIX.weight" into buf (cap bytes); gives buf. */
const char *tensors_layer_name(char *buf, size_t cap, int layer, const char *suffix);

/* Layer l's biases of Q, K and V into bias (model_qkv_rows(c), zeroed by the caller): the
 * fused attn_qkv.bias, or each of attn_{q,k,v}.bias the file has (a missing one stays 0). */
ts_status tensors_load_qkv_bias(float *bias, const ts_model_config *c, const gguf_file *f,
                                int l, ts_error *err);

/* Layer l's attention matrices: attn_qkv, or attn_q / attn_k / attn_v (c->qkv_fused); then
 * attn_output. A fused matrix takes wq's place and leaves wk and wv empty. */
ts_status tensors_map_attention(model_layer *ly, const ts_model_config *c, const gguf_file *f,
                                int l, ts_error *err);

/* A layer tensor's name "blk.N.SUFFIX" (0 <= N < n_layers) copied into buf, giving SUFFIX
 * within it; NULL for any other name. */
enum { TENSORS_NAME_MAX = 128 };
const char *tensors_layer_suffix(gguf_str name, int n_layers, char buf[TENSORS_NAME_MAX]);

/* Refuses a file holding a tensor the forward pass would not read (reads says which it
 * reads), naming the first such tensor: such a file is not the model tessera would run. */
ts_status tensors_refuse_unread(const gguf_file *f, const ts_model_config *c,
                                bool (*reads)(const ts_model_config *c, gguf_str name),
                                ts_error *err);

#endif /* TESSERA_MODEL_MODEL_TENSORS_H */
