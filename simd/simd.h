/* simd.h: the kernel dispatch table (rmsnorm, rope, silu*mul, softmax, f16 conversion,
 * paged attention, skinny GEMM), one table per instruction set, chosen once by simd_init(). */
#ifndef TESSERA_SIMD_H
#define TESSERA_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/* Token slots per KV block. The KV pool, the block tables and the attention kernel all
 * assume this size. */
#define TS_KV_BLOCK 32

/* Element type of the KV pool. f16 is IEEE binary16 stored as uint16_t. q8_0 is int8 with
 * one f16 scale per SIMD_KV_Q8_GROUP values of a row (llama.cpp's q8_0 cache type; a row
 * whose head_dim is not a multiple of 32 ends in a shorter group), laid out below. */
typedef enum simd_kv_type {
    SIMD_KV_F32,
    SIMD_KV_F16,
    SIMD_KV_Q8_0,
} simd_kv_type;

/* q8_0 K/V. A (layer, K or V, kv head) run of a block is SIMD_KV_Q8_RUN_BYTES(head_dim)
 * bytes: TS_KV_BLOCK rows of head_dim int8 values, then the rows' scales, TS_KV_BLOCK rows
 * of SIMD_KV_Q8_GROUPS(head_dim) f16; value d of a row stands for q[d] * scale[d / 32].
 * The vector kernels take head_dim <= SIMD_KV_Q8_MAX_HEAD_DIM in q8_0 (the pool refuses
 * more). */
#define SIMD_KV_Q8_GROUP 32
#define SIMD_KV_Q8_GROUPS(head_dim) (((size_t)(head_dim) + SIMD_KV_Q8_GROUP - 1) / SIMD_KV_Q8_GROUP)
#define SIMD_KV_Q8_RUN_BYTES(head_dim) \
    ((size_t)TS_KV_BLOCK * ((size_t)(head_dim) + 2 * SIMD_KV_Q8_GROUPS(head_dim)))
#define SIMD_KV_Q8_MAX_HEAD_DIM 512

/* Quantizes one row x (n) to q8_0: q (n) int8 and scales (SIMD_KV_Q8_GROUPS(n)) f16, each
 * group's scale max|x| / 127 and each value round(x / scale), as llama.cpp's q8_0 (a
 * non-finite value becomes a clamped one, never undefined behaviour). Plain C, any thread:
 * the same bits on every instruction set. */
void simd_kv_q8_quantize(int8_t *q, uint16_t *scales, const float *x, int n);
/* The values q8_0 stands for: out (n) = q[d] * scales[d / 32]. */
void simd_kv_q8_dequantize(float *out, const int8_t *q, const uint16_t *scales, int n);

/* RoPE pairing: Llama/llama2.c rotates (2i, 2i+1), GPT-NeoX rotates (i, i + head_dim/2). */
typedef enum simd_rope_style {
    SIMD_ROPE_NORMAL,
    SIMD_ROPE_NEOX,
} simd_rope_style;

/* Where one layer of one sequence's keys and values live in the block pool.
 * Physical block b starts at element b * block_stride of pool; inside it, for each layer,
 * K then V, each [n_kv_heads][TS_KV_BLOCK][head_dim]. Offsets and strides count elements
 * of the pool's type, not bytes (q8_0: bytes, each kv head's run SIMD_KV_Q8_RUN_BYTES
 * with its scales after its values). */
typedef struct simd_kv_view {
    const void *pool;           /* borrowed: the block pool base, of element type `type` */
    simd_kv_type type;
    size_t block_stride;        /* elements from one physical block to the next */
    size_t k_offset;            /* elements from a block's start to this layer's K, kv head 0 */
    size_t v_offset;            /* elements from a block's start to this layer's V, kv head 0 */
    size_t head_stride;         /* elements from one kv head to the next: TS_KV_BLOCK * head_dim
                                 * (q8_0: SIMD_KV_Q8_RUN_BYTES(head_dim)) */
    const int32_t *block_table; /* borrowed: (n_logical_blocks) physical id per logical block */
} simd_kv_view;

/* Shapes of one attention call: one sequence, n_rows consecutive query rows. */
typedef struct simd_attn_shape {
    int n_heads;       /* query heads */
    int n_kv_heads;    /* kv heads; divides n_heads, head h reads kv head h / (n_heads / n_kv_heads) */
    int head_dim;      /* even, >= 2 */
    int pos0;          /* position of query row 0; row j attends to positions up to pos0 + j */
    int n_rows;        /* query rows: 1 for decode, the chunk length for prefill */
    size_t q_stride;   /* floats between query rows (q[row * q_stride + head * head_dim]) */
    size_t out_stride; /* floats between output rows */
    float scale;       /* scores are q . k times this: 1 / sqrt(head_dim) for most models */
    float softcap;     /* > 0: scores become softcap * tanh(score / softcap) (Gemma 2) */
    int window;        /* > 0: row j attends to the last `window` positions up to pos0 + j,
                        * its own included; 0: to all of them */
    /* A span of the context (split-K): positions outside [span_begin, span_end) are left
     * out of every row's softmax (span_end 0: no upper bound). With lse set, the kernel
     * also writes lse[j * n_heads + h] = log(sum over the row's positions in the span of
     * exp(score)), -INFINITY where it has none (its output row is then zero), so that
     * the spans' outputs can be merged: simd_attn_merge(). */
    int span_begin, span_end;
    float *lse;
} simd_attn_shape;

/* One implementation of every kernel. All pointers are borrowed for the call only.
 * Kernels work on the row or head range they are given; threads split work outside. */
typedef struct simd_kernels {
    const char *name; /* "ref", "avx2", "avx512", "neon", "avx512vnni" */

    /* out[r] = x[r] * weight / sqrt(mean(x[r]^2) + eps); x, out (rows, n); weight (n).
     * out may equal x. */
    void (*rmsnorm)(float *out, const float *x, const float *weight, int rows, int n, float eps);

    /* Rotates n_heads heads of head_dim (even) floats in each of rows rows in place:
     * x (rows, row_stride) holding (n_heads, head_dim) at its start; table (rows,
     * SIMD_ROPE_TABLE_FLOATS(head_dim)) from simd_rope_table() for the same style. */
    void (*rope)(float *x, const float *table, int rows, size_t row_stride, int n_heads,
                 int head_dim, simd_rope_style style);

    /* out = gate * sigmoid(gate) * up, all (n). out may equal gate or up. */
    void (*silu_mul)(float *out, const float *gate, const float *up, size_t n);

    /* out = gelu(gate) * up with GELU's tanh form, 0.5 g (1 + tanh(sqrt(2/pi) (g +
     * 0.044715 g^3))), all (n). out may equal gate or up. */
    void (*gelu_mul)(float *out, const float *gate, const float *up, size_t n);

    /* x = exp(x - max(x)) / sum, in place; x (n), n >= 1. */
    void (*softmax)(float *x, size_t n);

    /* Round-to-nearest-even conversions of n elements; subnormals, inf and NaN kept. */
    void (*f32_to_f16)(uint16_t *out, const float *x, size_t n);
    void (*f16_to_f32)(float *out, const uint16_t *x, size_t n);

    /* Causal attention of query heads [head_begin, head_end) of one sequence over its
     * paged KV: out[j * out_stride + h * head_dim] = softmax(s) V with scores
     * s = cap(scale * q_j,h . K) (shape's scale, soft-cap) over positions first .. pos0 + j,
     * first = 0, or pos0 + j - window + 1 for a window, within the shape's span. Reads
     * only those positions' slots: the others may hold anything. One pass, online softmax; query heads sharing a
     * kv head are processed together so K and V are read once per kv head. out must not
     * overlap q. */
    void (*attention)(float *out, const float *q, const simd_kv_view *kv,
                      const simd_attn_shape *shape, int head_begin, int head_end);

    /* Skinny GEMM against a row-major (out, in) weight matrix, for steps of few rows:
     * out[m][n] = sum_k x[m][k] * w[n][k] + beta * out[m][n] for m < M and n in
     * [n_begin, n_end) (0 <= n_begin <= n_end <= N); x (M, lda), w (N, K), out (M, ldo),
     * lda >= K, ldo >= N. beta == 0 never reads out (it may hold NaN). Each weight row is
     * read from memory once for all M rows; every output element is summed in the same
     * order whatever M and the n range, so a row's result does not depend on the rows
     * beside it. out must not overlap x or w. Threads split [0, N) outside. */
    void (*gemm_nt)(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                    int M, int N, int K, float beta, int n_begin, int n_end);
    /* Most rows M for which callers should prefer gemm_nt to a BLAS sgemm: where it was
     * measured faster (bench/bench_gemm.c, docs/BENCHMARKS.md); 0 for the reference. */
    int gemm_nt_max_rows;
    /* out[m][n] = sum_k x[m][k] * w[k][n] for m < M, n < N: x (M, lda), w (K, ldw), out
     * (M, ldo), lda >= K, ldw >= N, ldo >= N; out is written, never read. For the small
     * products of an encoder's attention (Q K^T on the keys transposed, P V on the
     * values as stored), whose inner dimension is too short for gemm_nt's horizontal sums.
     * Each element is the fused multiply-adds over k in order from zero, in every table:
     * the reference's bits. out must not overlap x or w. */
    void (*gemm_nn)(float *out, size_t ldo, const float *x, size_t lda, const float *w,
                    size_t ldw, int M, int N, int K);

    /* Quantizes M rows of K activations, x (M, lda), into the form a names, row m at
     * out + m * qact_row_bytes(a, K): K a whole number of a's blocks. Each row is quantized
     * on its own, so a row's blocks do not depend on the rows beside it. QACT_F32 copies. */
    void (*quantize_act)(void *out, const float *x, size_t lda, int M, int K, qact a);
    /* Splits M rows of K activations, x (M, lda), into the bf16 tiles' form: row m at
     * out + m * 2K, its K hi bf16 then its K lo (simd_qpack_bf16_rows, qpack.h, says
     * how), bit for bit what that plain-C function writes. */
    void (*bf16_rows)(uint16_t *out, const float *x, size_t lda, int M, int K);

    /* The GEMM on a weight matrix in its file's blocks: out[m][n] = sum_k x[m][k] * w[n][k]
     * + beta * out[m][n] for m < M and n in [n_begin, n_end), where xq holds the M rows
     * quantize_act() made for qtype_get(w->type)->act and out is (M, ldo). beta == 0 never
     * reads out. Each weight block is unpacked once for all M rows. Every output element is
     * summed in the same order whatever M and the n range (batch invariance). out must not
     * overlap xq or w. Threads split [0, N) outside. */
    void (*qgemm)(float *out, size_t ldo, const void *xq, const simd_qmat *w, int M,
                  float beta, int n_begin, int n_end);
} simd_kernels;

/* Floats per row of a RoPE table: the cos then the sin terms, head_dim each. */
#define SIMD_ROPE_TABLE_FLOATS(head_dim) (2 * (size_t)(head_dim))

/* Fills table (rows, SIMD_ROPE_TABLE_FLOATS(head_dim)) with the rotation of each row's
 * position pos[r], angle pos * freq[i] for pair i (freq: head_dim/2, the model's table of
 * base^(-2i/head_dim) over any scaling), cos and sin in float as llama2.c computes them.
 * A step builds it once for every layer, query and key head. Plain C: the same table on
 * every instruction set. */
void simd_rope_table(float *table, const int32_t *pos, int rows, int head_dim, const float *freq,
                     simd_rope_style style);

/* Instruction sets with a kernel table. */
typedef enum simd_isa {
    SIMD_ISA_REF,
    SIMD_ISA_AVX2,   /* AVX2 + FMA + F16C */
    SIMD_ISA_AVX512, /* AVX-512 F/VL/BW/DQ, with OS support for the zmm state */
    SIMD_ISA_NEON,
    SIMD_ISA_AVX512VNNI, /* SIMD_ISA_AVX512 plus AVX512_VNNI (the quantized GEMM's dots) */
    SIMD_ISA_COUNT,
} simd_isa;

/* The best table for this CPU, or the reference when the environment variable
 * TESSERA_FORCE_REF=1 is set or the build has TESSERA_FORCE_REF. Never NULL; returns a
 * pointer to a static constant table, so it is cheap, idempotent and thread-safe. */
/* One row's attention from its spans (simd_attn_shape's span and lse): out[h * head_dim ..]
 * = sum over spans p of w_p part_p / sum of w_p, w_p = exp(lse_p - max lse), for heads
 * [head_begin, head_end). parts (n_parts, n_heads * head_dim) and lse (n_parts, n_heads)
 * are the spans' rows in order. Plain C, the same for every kernel set, so a row split into
 * the same spans gives the same bits whichever threads ran them. */
void simd_attn_merge(float *out, const float *parts, const float *lse, int n_parts,
                     int n_heads, int head_dim, int head_begin, int head_end);

const simd_kernels *simd_init(void);

/* The table of one instruction set if it was built and this CPU (and OS) can run it,
 * else NULL. SIMD_ISA_REF always succeeds. Ignores TESSERA_FORCE_REF. */
const simd_kernels *simd_kernels_for(simd_isa isa);

/* "ref", "avx2", "avx512", "neon", "avx512vnni"; "unknown" outside the enum. */
const char *simd_isa_name(simd_isa isa);

#endif
