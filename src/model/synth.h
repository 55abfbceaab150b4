/* synth.h: GGUF files with seeded random weights at the shapes of real Llama models, for
 * benchmarks and tests that need a model's size and speed but not its knowledge. */
#ifndef TESSERA_MODEL_SYNTH_H
#define TESSERA_MODEL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "tokenizer/vocab.h"

/* Weights are normal with this standard deviation; RMS-norm weights are 1. */
#define MODEL_SYNTH_STD 0.02f

/* Fills *out with the named shape's config ("stories110m", "smollm2-360m",
 * "tinyllama-1.1b", "llama3.2-1b"; also the small "test-tiny" for tests). name borrowed.
 * Returns false for an unknown name. llama3.2-1b has rope_factors set: its files carry
 * the rope_freqs.weight of Llama 3.2's long-context scaling, as real ones do. */
bool model_synth_shape(ts_model_config *out, const char *name);

/* The RoPE factors (c->head_dim / 2 floats into out) of Llama 3.2's rope_scaling (rope_type
 * llama3: factor 32, low_freq_factor 1, high_freq_factor 4, original context 8192) for c's
 * base and head dimension, as llama.cpp's converter works them out. */
void model_synth_llama3_factors(float *out, const ts_model_config *c);

/* Name of the i-th public shape (test-tiny is not listed); NULL past the end. */
const char *model_synth_shape_name(int i);

/* Writes a GGUF v3 file at path (borrowed) with config c (borrowed, must validate), the
 * vocabulary v (borrowed) and random weights from seed; with c->rope_factors, the
 * model_synth_llama3_factors() of c as rope_freqs.weight. type is GGUF_TENSOR_F32 or
 * GGUF_TENSOR_Q8_0 (matrices quantised, norms kept F32, as llama.cpp does). A vocabulary
 * smaller than c->vocab_size is padded with "<unused_N>" tokens of type UNUSED; a larger
 * one is refused (cutting it would orphan ids and merges). Tensors are generated in
 * chunks as they are written: memory stays at a few MiB whatever the model's size. The
 * same arguments give the same bytes. On failure no file is left at path. */
ts_status model_synth_write(const char *path, const ts_model_config *c, uint32_t type,
                            const tokenizer_vocab *v, uint64_t seed, ts_error *err);

/* Quantises n floats (n a multiple of 32) at src into Q8_0 blocks at dst
 * (n / 32 * 34 bytes), as ggml's reference quantiser does. */
void model_quantize_q8_0(uint8_t *dst, const float *src, uint64_t n);

#endif /* TESSERA_MODEL_SYNTH_H */
