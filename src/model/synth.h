/* synth.h: GGUF files with seeded random weights at the shapes of real models of every
 * family model_arch.c lists, for benchmarks and tests that need a model's size and speed
 * but not its knowledge. */
#ifndef TESSERA_MODEL_SYNTH_H
#define TESSERA_MODEL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

/* Weights are normal with this standard deviation; RMS-norm weights are 1. */
#define MODEL_SYNTH_STD 0.02f

/* Fills *out with the named shape's config as the loader reads it back from the file
 * model_synth_write() makes of it: the published hyper-parameters, and the family's
 * features from its row of model_arch.c. Llama: "stories110m", "smollm2-360m",
 * "tinyllama-1.1b", "llama3.2-1b", "llama3.1-8b", "mistral-7b", "mistral-7b-v0.3",
 * "mistral-nemo-12b" (a llama file with 128-wide heads); "qwen2.5-7b"; "qwen3-4b",
 * "qwen3-8b"; "gemma2-9b"; "gemma3-4b", "gemma3-12b"; "phi-4-mini" (plain RoPE over the
 * whole head: its LongRoPE and partial rotary embedding are left out, which the loader
 * refuses); mixtures of experts "qwen3-30b-a3b", "mixtral-8x7b" (a llama file) and
 * "qwen2moe-a2.7b" (with a shared expert); also the small "test-tiny" for tests. name
 * borrowed. Returns false for an unknown name. The Llama 3 shapes have rope_factors set: their files carry the
 * rope_freqs.weight of the model's long-context scaling, as real ones do. */
bool model_synth_shape(ts_model_config *out, const char *name);

/* Shrinks *c to a few kilobytes of weights with the same family features: 2 KV heads (1
 * kept at 1) with the same query heads per KV head, heads of 16, dim 64 (or the heads'
 * width where the model's dim is theirs), feed-forward 128 (a shared expert 256; the
 * experts' count is kept), vocabulary 512, context 256,
 * a window of at most 8 positions and enough layers for one full-attention layer after
 * the windowed ones (at least 2). Biases, fused matrices, norms, soft-caps, RoPE bases and
 * tying are kept; the name gains "-tiny". For tests and quick checks of a family. */
void model_synth_shrink(ts_model_config *c);

/* The RoPE factors (c->head_dim / 2 floats into out) of Llama 3's rope_scaling (rope_type
 * llama3: low_freq_factor 1, high_freq_factor 4, original context 8192, and factor 8 for a
 * config model_synth_shape() made for llama3.1-8b, else Llama 3.2's 32) for c's base and
 * head dimension, as llama.cpp's converter works them out. */
void model_synth_llama3_factors(float *out, const ts_model_config *c);

/* Name of the i-th public shape (test-tiny is not listed); NULL past the end. */
const char *model_synth_shape_name(int i);

/* TS_OK when the loader would read c back from a file model_synth_write() makes: a
 * family of model_arch.c whose row gives c's features (q/k norms, post-norms, fused
 * gate/up, embedding scale, activation, RoPE order, attention scale; soft-caps and
 * windows only where the family reads them), and a config that validates. Else
 * TS_ERR_UNSUPPORTED (an unknown family), TS_ERR_INVALID_ARG (naming the feature) or
 * model_config_validate's code. */
ts_status model_synth_check(const ts_model_config *c, ts_error *err);

/* Writes a GGUF v3 file at path (borrowed) with config c (borrowed, must pass
 * model_synth_check), the
 * vocabulary v (borrowed) and random weights from seed; with c->rope_factors, the
 * model_synth_llama3_factors() of c as rope_freqs.weight. The tensors are the family's
 * (attn_qkv or attn_q/k/v, with biases for c->qkv_bias, drawn like the matrices; ffn_up
 * of [gate; up] rows for c->ffn_fused; attn_q_norm / attn_k_norm and post_attention_norm
 * / post_ffw_norm of ones). type (borrowed) names the file's
 * type as `tessera quantize` takes it: "F32", "F16", "BF16" or one of llama.cpp's ftypes
 * ("Q8_0", "Q4_K_M", ...; any case; TS_ERR_UNSUPPORTED for another name); each matrix gets
 * the type llama.cpp's mix gives it (quant_mix_type), norms stay F32; TS_ERR_INVALID_ARG
 * when a row fits no type of the ftype. Each row is drawn in f32 and quantized on its own.
 * A vocabulary smaller than c->vocab_size is padded with "<unused_N>" tokens of type
 * UNUSED; a larger one is refused (cutting it would orphan ids and merges). Tensors are generated in
 * chunks as they are written: memory stays at a few MiB whatever the model's size. The
 * same arguments give the same bytes. On failure no file is left at path. */
ts_status model_synth_write(const char *path, const ts_model_config *c, const char *type,
                            const tokenizer_vocab *v, uint64_t seed, ts_error *err);

/* How model_synth_write_with() draws the weights. A zeroed struct is model_synth_write's. */
typedef struct model_synth_opts {
    bool peaked; /* a trained model's scales instead of MODEL_SYNTH_STD everywhere: matrices
                  * 1/sqrt(inputs), the embedding 1, the output 14/sqrt(dim), routers
                  * 3/sqrt(dim), biases 0.5, norms 1, and the LM head's rows of tokens
                  * other than normal ones (bytes, controls, padding) 10x smaller. The
                  * logits then have a spread of
                  * about 14 in an untied model, so greedy decoding has clear margins:
                  * files to compare with another implementation token for token. */
    uint32_t distinct_rows; /* 0: every row drawn. Else each quantized layer matrix (blk.*,
                             * not F32/F16/BF16) with more rows holds only this many
                             * distinct rows: the first `distinct_rows` rows' draws, each
                             * row a copy of one picked at random. A matrix costs the same
                             * to read and multiply whatever its values, and quantizing
                             * every row is most of the time a large file takes to write
                             * (about 6.5 minutes for Qwen3-30B-A3B's 30.5 billion weights
                             * on 16 threads): files for speed measurements. The embedding,
                             * the output, norms and routers stay fully drawn, so tokens
                             * keep distinct states and a mixture's routing its spread. */
} model_synth_opts;

/* model_synth_write() drawn as opts (borrowed, NULL: the default) says. */
ts_status model_synth_write_with(const char *path, const ts_model_config *c, const char *type,
                                 const tokenizer_vocab *v, uint64_t seed,
                                 const model_synth_opts *opts, ts_error *err);

#endif /* TESSERA_MODEL_SYNTH_H */
