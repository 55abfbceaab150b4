/* quantize.h: f32 rows into ggml's block types (our own scale searches, minimising the
 * plain squared error), llama.cpp's ftype mixes (which tensor gets which type), and a whole
 * GGUF file quantized tensor by tensor. Above simd/ (block layouts) and src/gguf, below
 * src/model and the CLI. */
#ifndef TESSERA_QUANT_QUANTIZE_H
#define TESSERA_QUANT_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "tessera/status.h"

/* ---- rows ---- */

/* True for the types quant_row() writes: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS (simd/quant.h's qtype numbers). */
bool quant_type_supported(uint32_t type);

/* Quantizes the k floats at src (borrowed) into dst (qtype_row_bytes(type, k) bytes); k
 * must be a whole number of type's blocks. Each block's scales are searched for the least
 * squared error of the values they stand for. Pure and thread-safe: rows may be done in
 * any order on any thread. Returns false for an unsupported type or a partial block. */
bool quant_row(void *dst, const float *src, uint32_t type, int64_t k);

/* ---- ftypes and mixes ---- */

/* The file-wide types `tessera quantize` takes, numbered as llama.cpp's general.file_type. */
typedef enum quant_ftype {
    QUANT_FTYPE_F32 = 0,
    QUANT_FTYPE_F16 = 1,
    QUANT_FTYPE_Q4_0 = 2,
    QUANT_FTYPE_Q4_1 = 3,
    QUANT_FTYPE_Q8_0 = 7,
    QUANT_FTYPE_Q5_0 = 8,
    QUANT_FTYPE_Q5_1 = 9,
    QUANT_FTYPE_Q2_K = 10,
    QUANT_FTYPE_Q3_K_S = 11,
    QUANT_FTYPE_Q3_K_M = 12,
    QUANT_FTYPE_Q3_K_L = 13,
    QUANT_FTYPE_Q4_K_S = 14,
    QUANT_FTYPE_Q4_K_M = 15,
    QUANT_FTYPE_Q5_K_S = 16,
    QUANT_FTYPE_Q5_K_M = 17,
    QUANT_FTYPE_Q6_K = 18,
    QUANT_FTYPE_IQ4_NL = 25,
    QUANT_FTYPE_IQ4_XS = 30,
    QUANT_FTYPE_BF16 = 32,
} quant_ftype;

/* The ftype named name ("Q4_K_M", case-insensitive); false for an unknown name. */
bool quant_ftype_parse(quant_ftype *out, const char *name);
/* "Q4_K_M", ...; NULL past the end: the i-th ftype, for help texts and tests. */
const char *quant_ftype_name(int i);
/* The tensor type most of an ftype's matrices get (Q4_K for Q4_K_M). */
uint32_t quant_ftype_base(quant_ftype f);

/* quant_mix_type's answer when no type fits a tensor's rows. */
#define QUANT_TYPE_NONE UINT32_MAX

/* What the mix rules need to know of the whole model. */
typedef struct quant_model_info {
    int n_layers;    /* blocks: the count of attn_v (and of ffn_down) tensors */
    int n_gqa;       /* query heads per KV head (1 when unknown) */
    bool has_output; /* a separate output.weight; else token_embd serves as the LM head */
    bool is_70b;     /* llama.cpp's 70B class (80 layers, GQA): attn_v gets more bits */
} quant_model_info;

/* The type tensor name (borrowed) of ne0 elements per row and n_dims dimensions gets in
 * ftype f, as llama.cpp's quantizer decides: 1-D tensors stay F32; output (or a tied token
 * embedding) Q6_K unless the ftype is Q8_0; attn_v, ffn_down and attn_output per the
 * ftype's layer rules; a type whose block does not divide ne0 falls back (Q4_K to Q5_0,
 * Q5_K to Q5_1, Q6_K to Q8_0, Q2_K / Q3_K / IQ4_XS to IQ4_NL, then F16). A row that is not
 * whole blocks of a 32-element type (Q8_0, Q4_0, ..., IQ4_NL) has no fallback, as in
 * llama.cpp: QUANT_TYPE_NONE. */
uint32_t quant_mix_type(quant_ftype f, const quant_model_info *m, const char *name,
                        uint32_t n_dims, uint64_t ne0);

/* ---- files ---- */

/* Called before each tensor is written: index i of n, its name and the type it gets. */
typedef void (*quant_progress)(void *user, uint64_t i, uint64_t n, const char *name,
                               uint32_t type);

/* Writes in (borrowed, an open GGUF of F32, F16 or BF16 tensors; any other type is
 * refused naming the tensor and its type) to path as ftype f: every metadata entry copied,
 * general.file_type set to f, each tensor quantized row by row as the writer streams it (a
 * few MiB at a time, rows split over OpenMP threads). progress may be NULL. On failure no
 * file is left at path. */
ts_status quant_gguf_write(const char *path, const gguf_file *in, quant_ftype f,
                           quant_progress progress, void *user, ts_error *err);

#endif /* TESSERA_QUANT_QUANTIZE_H */
