/* model_gguf.h: a model as GGUF describes it: config from its family's row of
 * model_arch.c and the file's `ARCH.*` keys, weights from `token_embd` / `blk.N.*` tensors
 * (fused or separate, dense or a mixture's experts), the vocabulary from
 * `tokenizer.ggml.*`; and the reverse, writing a model back out as GGUF v3 with F32
 * tensors (Llama's layers only). */
#ifndef TESSERA_MODEL_MODEL_GGUF_H
#define TESSERA_MODEL_MODEL_GGUF_H

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

/* Fills c from f's metadata (f borrowed). Refuses architectures model_arch.c has no row
 * for by name (with the reason where it knows one), RoPE scaling types other than none
 * and linear, LongRoPE, attention temperature, routing other than a softmax's top experts
 * (TS_ERR_UNSUPPORTED), and missing or ill-typed keys naming the key. name_fallback
 * (borrowed, may be NULL) names the model when general.name is absent. What the tensors
 * say is read from them: tied_output (no output.weight), rope_factors (rope_freqs.weight),
 * qkv_fused (attn_qkv), qkv_bias (any Q/K/V bias). The caller still runs
 * model_config_validate(). */
ts_status model_gguf_read_config(ts_model_config *c, const gguf_file *f,
                                 const char *name_fallback, ts_error *err);

/* The whole model of a parsed file: config, vocabulary, weights and chat template, as
 * model_load_gguf() reads them from a path. f is borrowed and must outlive the model: its
 * weight matrices point into f's bytes (model_load_gguf() hands the model its file).
 * name (borrowed) names the model when general.name is absent, and errors. On success
 * *out owns the model. */
ts_status model_gguf_load_parsed(const gguf_file *f, const char *name, ts_model **out,
                                 ts_error *err);

/* Fills w (zeroed on entry; free it with model_weights_free() whatever the result) from
 * f's tensors for c (a validated config): every matrix points into f's bytes in the
 * tensor's own type (f borrowed, must outlive w; a mixture's experts are slices of its
 * 3-D tensors), norms, biases and RoPE factors are converted to owned f32 arrays. A
 * missing tensor, a wrong shape, a byte size that does not match the type and shape, a
 * type tessera does not compute on (refused by name), or a tensor c's forward pass would
 * not read is an error naming the tensor, as is a RoPE factor that is not a positive
 * number. w->rope_freq is left to model_rope_init(). */
ts_status model_gguf_read_weights(model_weights *w, const ts_model_config *c,
                                  const gguf_file *f, ts_error *err);

/* Writes config c, weights w, vocabulary v and chat_template (all borrowed; the template
 * may be NULL) to path as GGUF v3 with F32 tensors (every type dequantised) under
 * llama.cpp's names, RoPE factors
 * (rope_freqs.weight) and linear scaling included. */
ts_status model_gguf_write(const char *path, const ts_model_config *c, const model_weights *w,
                           const tokenizer_vocab *v, const char *chat_template, ts_error *err);

/* general.file_type values (llama.cpp's llama_ftype). */
enum { MODEL_GGUF_FILE_F32 = 0, MODEL_GGUF_FILE_Q8_0 = 7 };

/* The metadata model_gguf_write() writes, for writers that add their own tensors: the
 * general.* and ARCH.* keys of c (borrowed; its family's keys as llama.cpp's converters
 * write them: key_length, soft-caps, windows, experts), and the tokenizer.ggml.* keys of
 * v (borrowed);
 * the rope_freqs.weight tensor of c->rope_factors is theirs to add.
 * Writer errors are sticky in g; model_gguf_add_vocab() also reports running out of memory
 * through err. */
void model_gguf_add_config(gguf_writer *g, const ts_model_config *c, uint32_t file_type);
ts_status model_gguf_add_vocab(gguf_writer *g, const tokenizer_vocab *v, ts_error *err);

#endif /* TESSERA_MODEL_MODEL_GGUF_H */
