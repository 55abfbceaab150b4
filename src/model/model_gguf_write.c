/* model_gguf_write.c: a model (config, weights of any type, vocabulary) written out as a
 * GGUF v3 file of F32 tensors that llama.cpp and model_gguf_read_* load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_arch.h"
#include "model/model_gguf.h"

/* ARCH.suffix of c's family, in buf. */
static const char *arch_key(char *buf, size_t cap, const ts_model_config *c, const char *suffix)
{
    snprintf(buf, cap, "%s.%s", c->arch, suffix);
    return buf;
}

void model_gguf_add_config(gguf_writer *g, const ts_model_config *c, uint32_t file_type)
{
    const model_arch *a = model_arch_find(c->arch, strnlen(c->arch, sizeof c->arch));
    char k[96];
    gguf_writer_add_str(g, "general.architecture", c->arch);
    gguf_writer_add_str(g, "general.name", c->name[0] ? c->name : "tessera");
    gguf_writer_add_u32(g, "general.file_type", file_type);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "context_length"), (uint32_t)c->context_len);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "embedding_length"), (uint32_t)c->dim);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "block_count"), (uint32_t)c->n_layers);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "feed_forward_length"),
                        (uint32_t)c->hidden_dim);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "attention.head_count"),
                        (uint32_t)c->n_heads);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "attention.head_count_kv"),
                        (uint32_t)c->n_kv_heads);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "attention.key_length"),
                        (uint32_t)c->head_dim);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "attention.value_length"),
                        (uint32_t)c->head_dim);
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "rope.dimension_count"),
                        (uint32_t)c->head_dim);
    gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "rope.freq_base"), c->rope_freq_base);
    if (c->rope_scale != 1.0f) {
        gguf_writer_add_str(g, arch_key(k, sizeof k, c, "rope.scaling.type"), "linear");
        gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "rope.scaling.factor"), c->rope_scale);
    }
    if (c->encoder) { /* LayerNorm's epsilon; bidirectional; one token type used of two */
        gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "attention.layer_norm_epsilon"),
                            c->rms_eps);
        gguf_writer_add_bool(g, arch_key(k, sizeof k, c, "attention.causal"), false);
        gguf_writer_add_u32(g, "tokenizer.ggml.token_type_count", 2);
    } else {
        gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "attention.layer_norm_rms_epsilon"),
                            c->rms_eps);
    }
    gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "vocab_size"), (uint32_t)c->vocab_size);
    if (a && a->softcaps) { /* Gemma 2 files carry both; Gemma 3's have none */
        if (c->attn_softcap != 0.0f || a->attn_softcap != 0.0f)
            gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "attn_logit_softcapping"),
                                c->attn_softcap);
        if (c->final_softcap != 0.0f || a->final_softcap != 0.0f)
            gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "final_logit_softcapping"),
                                c->final_softcap);
    }
    if (a && a->swa_reads) {
        if (c->swa_window != 0) /* as converted files carry it */
            gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "attention.sliding_window"),
                                (uint32_t)c->swa_window);
        if (c->swa_pattern != a->swa_pattern)
            gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "attention.sliding_window_pattern"),
                                (uint32_t)c->swa_pattern);
        if (c->rope_freq_base_swa != a->rope_base_swa)
            gguf_writer_add_f32(g, arch_key(k, sizeof k, c, "rope.freq_base_swa"),
                                c->rope_freq_base_swa);
    }
    if (c->n_experts > 0) {
        gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "expert_count"), (uint32_t)c->n_experts);
        gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "expert_used_count"),
                            (uint32_t)c->n_experts_used);
        gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "expert_feed_forward_length"),
                            (uint32_t)c->hidden_dim);
        if (c->shared_ffn_dim > 0)
            gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "expert_shared_feed_forward_length"),
                                (uint32_t)c->shared_ffn_dim);
    }
    if (c->pooling != TS_POOLING_NONE)
        gguf_writer_add_u32(g, arch_key(k, sizeof k, c, "pooling_type"), (uint32_t)c->pooling);
}

static void add_id(gguf_writer *g, const char *key, int32_t id)
{
    if (id >= 0)
        gguf_writer_add_u32(g, key, (uint32_t)id);
}

ts_status model_gguf_add_vocab(gguf_writer *g, const tokenizer_vocab *v, ts_error *err)
{
    size_t n = (size_t)v->n_tokens;
    const char **texts = malloc(n * sizeof *texts);
    uint32_t *lens = malloc(n * sizeof *lens);
    float *scores = malloc(n * sizeof *scores);
    int32_t *types = malloc(n * sizeof *types);
    ts_status st = TS_OK;
    if (!texts || !lens || !scores || !types) {
        st = ts_error_set(err, TS_ERR_NOMEM, "writing a vocabulary of %zu tokens", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        texts[i] = v->tokens[i].text;
        lens[i] = v->tokens[i].len;
        scores[i] = v->tokens[i].score;
        types[i] = v->tokens[i].type;
    }
    gguf_writer_add_str(g, "tokenizer.ggml.model", v->kind == VOCAB_KIND_BPE   ? "gpt2"
                                                   : v->kind == VOCAB_KIND_WPM ? "bert"
                                                   : v->kind == VOCAB_KIND_UGM ? "t5"
                                                                               : "llama");
    if (v->pre[0])
        gguf_writer_add_str(g, "tokenizer.ggml.pre", v->pre);
    gguf_writer_add_str_array(g, "tokenizer.ggml.tokens", texts, lens, n);
    gguf_writer_add_array(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n);
    gguf_writer_add_array(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n);
    if (v->n_merges)
        gguf_writer_add_str_array(g, "tokenizer.ggml.merges", (const char *const *)v->merges,
                                  NULL, (uint64_t)v->n_merges);
    add_id(g, "tokenizer.ggml.bos_token_id", v->bos_id);
    add_id(g, "tokenizer.ggml.eos_token_id", v->eos_id);
    add_id(g, "tokenizer.ggml.unknown_token_id", v->unk_id);
    add_id(g, "tokenizer.ggml.padding_token_id", v->pad_id);
    add_id(g, "tokenizer.ggml.eot_token_id", v->eot_id);
    gguf_writer_add_bool(g, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (v->add_eos)
        gguf_writer_add_bool(g, "tokenizer.ggml.add_eos_token", true);
    gguf_writer_add_bool(g, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    if (v->kind == VOCAB_KIND_WPM) {
        add_id(g, "tokenizer.ggml.seperator_token_id", v->sep_id);
        gguf_writer_add_bool(g, "tokenizer.ggml.add_sep_token", v->add_sep);
        gguf_writer_add_bool(g, "tokenizer.ggml.normalizer.lowercase", v->lowercase);
        gguf_writer_add_bool(g, "tokenizer.ggml.normalizer.strip_accents", v->strip_accents);
    }
    if (v->kind == VOCAB_KIND_UGM) {
        add_id(g, "tokenizer.ggml.seperator_token_id", v->sep_id);
        gguf_writer_add_bool(g, "tokenizer.ggml.add_sep_token", v->add_sep);
        gguf_writer_add_bool(g, "tokenizer.ggml.remove_extra_whitespaces",
                             v->remove_extra_whitespaces);
        if (v->charsmap_len)
            gguf_writer_add_array(g, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8,
                                  v->charsmap, v->charsmap_len);
    }
done:
    free(texts);
    free(lens);
    free(scores);
    free(types);
    return st;
}

/* An F32 tensor of ggml shape (ne0, ne1), or 1-D when ne1 is 0. */
static void add_f32(gguf_writer *g, const char *name, const float *data, uint64_t ne0,
                    uint64_t ne1)
{
    const uint64_t ne[2] = {ne0, ne1};
    uint64_t n = ne1 ? ne0 * ne1 : ne0;
    gguf_writer_add_tensor(g, name, GGUF_TENSOR_F32, ne1 ? 2 : 1, ne, data, n * sizeof(float));
}

/* Rows [row0, row0 + n_rows) of a matrix of any type (user: its simd_qmat) as f32. */
static ts_status fill_f32_rows(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                               ts_error *err)
{
    (void)err;
    const simd_qmat *m = user;
    const uint8_t *src = (const uint8_t *)m->data;
    for (uint64_t r = 0; r < n_rows; r++)
        qtype_dequant_row((float *)(void *)(dst + r * (uint64_t)m->K * sizeof(float)),
                          src + (row0 + r) * m->row_bytes, m->type, m->K);
    return TS_OK;
}

/* Matrix m (borrowed until the file is written) as an F32 tensor of ggml shape (K, N):
 * F32 bytes as they are, any other type dequantised row by row as the writer asks. */
static void add_matrix(gguf_writer *g, const char *name, const simd_qmat *m)
{
    if (m->type == QT_F32) {
        add_f32(g, name, m->data, (uint64_t)m->K, (uint64_t)m->N);
        return;
    }
    const uint64_t ne[2] = {(uint64_t)m->K, (uint64_t)m->N};
    gguf_writer_add_tensor_fill(g, name, GGUF_TENSOR_F32, 2, ne, fill_f32_rows, (void *)m);
}

static void add_layer(gguf_writer *g, int layer, const char *suffix, const simd_qmat *m)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, suffix);
    add_matrix(g, name, m);
}

static void add_norm(gguf_writer *g, int layer, const char *suffix, const float *data,
                     uint64_t n)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, suffix);
    add_f32(g, name, data, n, 0);
}

static void add_weights(gguf_writer *g, const ts_model_config *c, const model_weights *w)
{
    size_t dim = (size_t)c->dim;
    if (c->rope_factors) /* first, where llama.cpp's converter puts it */
        add_f32(g, "rope_freqs.weight", w->rope_factors, (uint64_t)c->head_dim / 2, 0);
    add_matrix(g, "token_embd.weight", &w->tok_embd);
    add_f32(g, "output_norm.weight", w->rms_final, dim, 0);
    if (!c->tied_output)
        add_matrix(g, "output.weight", &w->output);
    for (int l = 0; l < c->n_layers; l++) {
        const model_layer *ly = &w->layers[l];
        add_norm(g, l, "attn_norm", w->rms_att + l * dim, dim);
        add_layer(g, l, "attn_q", &ly->wq);
        add_layer(g, l, "attn_k", &ly->wk);
        add_layer(g, l, "attn_v", &ly->wv);
        add_layer(g, l, "attn_output", &ly->wo);
        add_norm(g, l, "ffn_norm", w->rms_ffn + l * dim, dim);
        add_layer(g, l, "ffn_gate", &ly->w1);
        add_layer(g, l, "ffn_up", &ly->w3);
        add_layer(g, l, "ffn_down", &ly->w2);
    }
}

ts_status model_gguf_write(const char *path, const ts_model_config *c, const model_weights *w,
                           const tokenizer_vocab *v, const char *chat_template, ts_error *err)
{
    /* the weights go out under Llama's layer tensors: a family whose layers have others
     * is refused rather than written as a file that loads wrong */
    if (c->qkv_fused || c->ffn_fused || c->qkv_bias || c->qk_norm || c->post_norms ||
        c->n_experts > 0)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "writing a %s model's tensors is not supported (only Llama's "
                            "layers are written)", c->arch);
    gguf_writer *g = NULL;
    ts_status st = gguf_writer_create(0, &g, err);
    if (st != TS_OK)
        return st;
    model_gguf_add_config(g, c, MODEL_GGUF_FILE_F32);
    if ((st = model_gguf_add_vocab(g, v, err)) != TS_OK)
        goto done;
    if (chat_template)
        gguf_writer_add_str(g, "tokenizer.chat_template", chat_template);
    add_weights(g, c, w);
    st = gguf_writer_write_file(g, path, err);
done:
    gguf_writer_free(g);
    return st;
}
