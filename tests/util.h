/* util.h: helpers shared by the cmocka test programs. */
#ifndef TESSERA_TESTS_UTIL_H
#define TESSERA_TESTS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "tessera/tokenizer.h"

/* Path of rel inside the shared data folder ($TESSERA_SHARED, else ../shared beside the
 * source tree). Returns a static buffer overwritten by the next call. */
const char *tu_shared(const char *rel);

/* Reads a whole file; returns a malloc'd NUL-terminated buffer and its length, or NULL. */
char *tu_read_file(const char *path, size_t *len);

/* A fresh path under the build folder's tmp/ for files a test writes (static buffer). */
const char *tu_tmp_path(const char *name);

/* The standard output of the shell command cmd (malloc'd, NUL-terminated; its first MiB
 * less one byte); *status gets the command's exit status. */
char *tu_run(const char *cmd, int *status);

/* The cosine of the angle between a and b (n floats each). */
double tu_cosine(const float *a, const float *b, int n);

/* This process's resident set size in bytes (/proc/self/statm); fails the test when it
 * cannot be read. */
long tu_rss_bytes(void);

struct tokenizer_vocab;
struct ts_model;
struct ts_model_config;

/* stories260K's vocabulary read into *v (the caller frees it with vocab_clear); fails the
 * test when it cannot be read. */
void tu_stories_vocab(struct tokenizer_vocab *v);

/* Model c (its weights of type, as `tessera synth --type`; seed 1) with vocabulary v
 * (borrowed), written by model_synth_write to name under the build folder's tmp/ and
 * loaded from there (the file removed after). Fails the test, naming name, on any error;
 * the caller frees the model with ts_model_free(). */
struct ts_model *tu_synth_model(const struct ts_model_config *c, const char *type,
                                const struct tokenizer_vocab *v, const char *name);

/* Fails the test unless a and b hold the same tokens (text, score, type), special ids
 * and flags. */
void tu_assert_same_vocab(const struct tokenizer_vocab *a, const struct tokenizer_vocab *b);

/* Writes v as a vocabulary-only GGUF at path with the GGUF writer; fails the test on any
 * error. */
void tu_write_vocab_gguf(const struct tokenizer_vocab *v, const char *path);

/* Writes v as a vocabulary-only GGUF (a file name under the build folder's tmp/, removed
 * after) with the GGUF writer and loads it back as `tessera tokenize` does, into *tok.
 * Returns the load's status (err set on failure); fails the test when the file cannot be
 * written. */
ts_status tu_tokenizer_via_gguf(const struct tokenizer_vocab *v, const char *name,
                                ts_tokenizer **tok, ts_error *err);

/* stories260K written back by the GGUF writer with rope_freqs.weight holding factors (its
 * head_dim/2 = 4 floats, copied; NULL for no tensor) and linear RoPE scaling rope_scale (1
 * for none), then loaded from that file: the loader, writer and forward passes see RoPE
 * scaling as a converted model has it. Fails the test on any error; the caller frees the
 * model with ts_model_free(). */
struct ts_model *tu_stories_with_rope(const float *factors, float rope_scale);

/* The reference forward pass's logits of m at every position of tokens (n, vocab_size),
 * malloc'd. */
float *tu_reference_logits(const struct ts_model *m, const int32_t *tokens, int n);

/* Every weight of m decoded to f32: (N, K) malloc'd. */
float *tu_dequant_matrix(const simd_qmat *m);

/* m's quantized matrices decoded once, for references on quantized files: the reference
 * forward decodes a row and sums it in the same order whether it reads blocks or f32
 * rows, so its logits are the same floats, but on blocks it decodes every row again for
 * each token. tu_decode_matrices points every quantized matrix of m at f32 rows of its
 * decoded blocks and returns what tu_restore_matrices needs to put them back (and free).
 * Nothing else may use m in between (no engine on it). */
typedef struct tu_decoded tu_decoded;
tu_decoded *tu_decode_matrices(struct ts_model *m);
void tu_restore_matrices(struct ts_model *m, tu_decoded *d);
/* Fails unless a and b have the same type, shape and bytes. */
void tu_assert_same_matrix(const simd_qmat *a, const simd_qmat *b);

#endif
