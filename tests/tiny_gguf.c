/* tiny_gguf.c: the tiny Llama GGUF of tiny_gguf.h. */
#include <stdbool.h>

#include "tiny_gguf.h"

const tiny_meta tiny_honest = {8, 16, 1, 2, 1};

/* Every tensor's data: small values, enough for the largest (16 x 8). */
static float weights[128];

static void add_f32(gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1)
{
    uint64_t ne[2] = {ne0, ne1};
    gguf_writer_add_tensor(w, name, GGUF_TENSOR_F32, ne1 > 1 ? 2 : 1, ne, weights,
                           ne0 * ne1 * sizeof(float));
}

void tiny_gguf_add_llama(gguf_writer *w, const tiny_meta *meta)
{
    for (size_t i = 0; i < sizeof weights / sizeof *weights; i++)
        weights[i] = (float)((int)(i * 37 % 19) - 9) / 64.0f;
    gguf_writer_add_str(w, "general.architecture", "llama");
    gguf_writer_add_u32(w, "llama.context_length", 16);
    gguf_writer_add_u32(w, "llama.embedding_length", meta->dim);
    gguf_writer_add_u32(w, "llama.block_count", meta->layers);
    gguf_writer_add_u32(w, "llama.feed_forward_length", meta->ffn);
    gguf_writer_add_u32(w, "llama.attention.head_count", meta->heads);
    gguf_writer_add_u32(w, "llama.attention.head_count_kv", meta->kv_heads);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    const char *tokens[8] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b",
                             "\xe2\x96\x81\x61" /* "▁a" */, "<0x0A>"};
    float scores[8] = {0, 0, 0, -1, -2, -3, -0.5f, 0};
    int32_t types[8] = {2, 3, 3, 1, 1, 1, 1, 6};
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", tokens, NULL, 8);
    gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 8);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 8);
    add_f32(w, "token_embd.weight", 8, 8);
    add_f32(w, "output_norm.weight", 8, 1);
    add_f32(w, "blk.0.attn_norm.weight", 8, 1);
    add_f32(w, "blk.0.ffn_norm.weight", 8, 1);
    add_f32(w, "blk.0.attn_q.weight", 8, 8);
    add_f32(w, "blk.0.attn_k.weight", 8, 4);
    add_f32(w, "blk.0.attn_v.weight", 8, 4);
    add_f32(w, "blk.0.attn_output.weight", 8, 8);
    add_f32(w, "blk.0.ffn_gate.weight", 8, 16);
    add_f32(w, "blk.0.ffn_up.weight", 8, 16);
    add_f32(w, "blk.0.ffn_down.weight", 16, 8);
}
