/* hf_convert.h: a Hugging Face Llama directory (config.json, *.safetensors, tokenizer.json,
 * tokenizer_config.json) written as a GGUF file that model_gguf_read_* load. */
#ifndef TESSERA_MODEL_HF_CONVERT_H
#define TESSERA_MODEL_HF_CONVERT_H

#include <stdbool.h>

#include "tessera/model.h"
#include "tokenizer/vocab.h"

/* True when dir (borrowed) holds a config.json. */
bool model_hf_is_dir(const char *dir);

/* Reads dir/config.json into c: LlamaForCausalLM only (others refused by name), SiLU, no
 * biases, RoPE scaling none, linear or llama3 (others, such as yarn, dynamic or longrope,
 * refused by name); c->name from dir's base name. */
ts_status model_hf_read_config(ts_model_config *c, const char *dir, ts_error *err);

/* Llama 3's rope_scaling (rope_type "llama3"). */
typedef struct model_hf_llama3 {
    float factor, low_freq_factor, high_freq_factor;
    float original_context; /* original_max_position_embeddings */
} model_hf_llama3;

/* model_hf_read_config() that also fills *llama3 (borrowed) and sets c->rope_factors when
 * the scaling is llama3. */
ts_status model_hf_read_config_rope(ts_model_config *c, model_hf_llama3 *llama3, const char *dir,
                                    ts_error *err);

/* out (head_dim / 2): the divisor of each RoPE pair's frequency under llama3 scaling, what
 * llama.cpp's converter stores as rope_freqs.weight: 1 for pairs whose wavelength
 * (2 pi / freq, freq = theta^(-2i/head_dim)) is under original_context / high_freq_factor,
 * factor for those over original_context / low_freq_factor, and between them
 * 1 / ((1 - s) / factor + s) with s = (original_context / wavelength - low) / (high - low). */
void model_hf_llama3_factors(float *out, int head_dim, float theta, const model_hf_llama3 *p);

/* Reads dir/tokenizer.json (and tokenizer_config.json for add_bos_token and the special
 * tokens) into v (zeroed by the caller; vocab_clear() it) for a model of config c:
 *  - a SentencePiece-style BPE with byte fallback and '▁' for space (Llama 2, TinyStories)
 *    becomes tokenizer.ggml.model "llama", each merged token scored minus the rank of the
 *    first merge making it, so the highest-scored pair is the earliest merge;
 *  - a byte-level BPE becomes "gpt2" with its merges, and tokenizer.ggml.pre named by its
 *    pre-tokenizer's expression: llama-bpe (Llama 3), qwen2, smollm, gpt2.
 * Other tokenizers (Unigram, WordPiece, other pre-tokenizers) are refused by name. */
ts_status model_hf_read_vocab(tokenizer_vocab *v, const ts_model_config *c, const char *dir,
                              ts_error *err);

/* Writes dir's model to out_path (borrowed) as GGUF with tensors of type out_type
 * (GGUF_TENSOR_F32, _F16 or _BF16; norms stay F32): the shards of dir (every *.safetensors)
 * read through mappings, Q and K rows reordered from Hugging Face's half-split RoPE layout
 * to GGUF's interleaved pairs, lm_head dropped when tied, the chat template of
 * tokenizer_config.json kept, llama3 RoPE scaling as a rope_freqs.weight tensor. */
ts_status model_hf_convert(const char *dir, const char *out_path, uint32_t out_type,
                           ts_error *err);

#endif
