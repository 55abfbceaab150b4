/* qpack.h: weight matrices repacked once at load, 16 rows interleaved in the order one
 * AVX-512 VNNI instruction or one AMX tile multiplies (qpack_internal.h), the kernels on
 * that layout (a vector kernel for every M, AMX tiles for steps of 16 rows or more, 32 for
 * Q4_K, none for Q5_K; bf16 tiles for F16 / BF16), and their plain-C twin.
 *
 * The model does not call these directly: simd_qmat_plan() (qmat.h) decides at load
 * whether a matrix is packed and which kernel runs its pack, and simd_qmat_gemm() runs it.
 *
 * The pack serves every M, each kernel giving the same bits, so once a matrix is packed
 * the file's blocks of it are never read again and the mapping's pages can be dropped
 * (madvise MADV_DONTNEED). Sizes: each weight keeps its file's bits (Q4_K nibbles, Q5_K
 * and Q6_K nibbles plus bit planes, Q8_0 and Q4_0 bytes), the f16 scales stay f16, 6-bit
 * ones take a byte: per 16x256 unit Q4_K takes 2368 bytes (1.03x the file's blocks), Q5_K
 * 2880 (1.02x), Q6_K 3392 (1.01x), per 16x32 unit Q8_0 576 (1.06x), Q4_0 576 (2.0x: a
 * byte a weight), each unit rounded to 64 bytes; F16
 * as two bf16 planes (2.0x), BF16 as itself (1.0x).
 *
 * F16 / BF16 weights run on bf16 tiles (TDPBF16PS, f32 sums): their activations are bf16
 * rows from simd_qpack_bf16_rows() instead of quantize_act()'s. Each activation and each
 * F16 weight is the sum of a hi and a lo bf16 (ref/qpack_bf16.c), so results are within
 * about 2^-16 relative of the f32 path; a decode step reads an F16 pack's twice the bytes,
 * so the model packs these where steps are long (embedding models, or --pack all).
 *
 * Arithmetic of the int8 types (the vector kernel, the tile kernels and the twin agree bit
 * for bit; the bf16 tiles agree with their twin, a double sum, to f32 rounding): for output
 * (m, n) and activation block b, with dx = the activation block's d,
 *     isum = sum_j sc[n][j] * dot_j(m, n)          int32, exact (dot_j over sub-block j)
 *     acc  = fmaf(d[n] * dx, (float)isum, acc)
 *     acc  = fmaf(-(dmin[n] * dx), (float)msum, acc)    Q4_K, Q5_K only:
 *            msum = sum_j min[n][j] * (bsums[2j] + bsums[2j+1]), int32, exact
 * over b = 0, 1, ... in order, from acc = 0; then out = acc (beta 0) or
 * fmaf(beta, out, acc). sc = 1 for Q8_0 / Q4_0; d[n], dmin[n] are the block's f16
 * scales as f32. Each output element is computed alone, in the same order whatever M and
 * the n range: a row's result does not depend on the rows beside it. */
#ifndef TESSERA_SIMD_QPACK_H
#define TESSERA_SIMD_QPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "simd.h"

typedef struct simd_qpack simd_qpack;

/* True where the tile kernels can run (dispatch.c asks): they were built (x86-64, a
 * compiler with AMX), CPUID shows AMX-TILE, AMX-INT8 and AVX-512 F/BW/VL, XCR0 enables the
 * AVX-512 and tile state, and Linux granted this process the tile data state (arch_prctl
 * ARCH_REQ_XCOMP_PERM, asked once). False when TESSERA_FORCE_REF=1 or TESSERA_NO_AMX=1.
 * Thread-safe; the answer is computed once. */
bool simd_amx_usable(void);

/* Whether simd_qpack_make() takes weights of this qtype: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K
 * (int8 tiles), F16, BF16 (bf16 tiles; K a multiple of 32). */
bool simd_qpack_supports(uint32_t type);

/* Whether a packed matrix of this (supported) type computes on a fast kernel here, not
 * the twin: the int8 types where the CPU has AVX-512 VNNI (vector kernel) or AMX-INT8
 * (tiles), F16 / BF16 where it has AMX-BF16. Thread-safe. */
bool simd_qpack_fast(uint32_t type);

/* What int8-type packs run on here: "AVX-512 VNNI + AMX tiles", "AVX-512 VNNI", "AMX
 * tiles" or "plain C" (a static string). */
const char *simd_qpack_kernels(void);

/* Repacks w (a supported type, K a whole number of its blocks, N >= 1) into the tile
 * layout: rows in groups of 16 (the last one padded with zero weights), each 16-row group
 * a run of units, one per activation block, of int8 weights in the tile's VNNI order
 * followed by that block's scales. Plain C, on any CPU (the twin computes on it too).
 * w->data is borrowed for the call only. Returns an owned pack to free with
 * simd_qpack_free(), or NULL for an unsupported type or shape or when out of memory.
 * Which kernel runs it is simd_qmat_plan()'s choice (qmat.h). */
simd_qpack *simd_qpack_make(const simd_qmat *w);

/* Frees a pack; NULL is fine. */
void simd_qpack_free(simd_qpack *p);

/* Bytes the pack holds (its weights and scales). */
size_t simd_qpack_bytes(const simd_qpack *p);

/* Activations for a pack of F16 or BF16 weights: x (M, lda) as out (M, 2K) row-major, a
 * row's K nearest bf16 (even ties) and then the K nearest bf16 of what they leave: the
 * activation form SIMD_ACT_BF16 (qmat.h) such a pack's kernels take (in place of
 * quantize_act's QACT_F32 copy). Plain C. */
void simd_qpack_bf16_rows(uint16_t *out, const float *x, size_t lda, int M, int K);

/* ---- bf16 packs of values a step makes (an encoder's keys and values) ----
 *
 * N rows of K f32 values laid out as an F16 matrix's pack, each value a hi and a lo bf16,
 * K padded with zeros to simd_qpack_f32_k(K) (a multiple of 32): made every step into the
 * caller's memory and multiplied like a weight pack, to the same 2^-16 or so of f32. The
 * activations are SIMD_ACT_BF16 rows of simd_qpack_f32_k(K) values (bf16_rows). */

/* K rounded up to the 32 values of one tile step. */
static inline int simd_qpack_f32_k(int K) { return (K + 31) / 32 * 32; }

/* Bytes of such a pack: 16-row groups of 32-value units, hi and lo planes. */
size_t simd_qpack_f32_bytes(int N, int K);

/* Makes the pack of w at dst (simd_qpack_f32_bytes(N, K) bytes, 64-byte aligned): pack row
 * n is w's row n, w (N, K) at row stride ldw, or with `columns` w's column n, w (K, N) at
 * row stride ldw. k's bf16_rows splits the values (16 source rows at a time into tmp,
 * simd_qpack_f32_tmp(N, K) values); plain C lays them out. */
size_t simd_qpack_f32_tmp(int N, int K);
void simd_qpack_f32_make(const simd_kernels *k, void *dst, uint16_t *tmp, const float *w,
                         size_t ldw, bool columns, int N, int K);

/* out[m][n] = x[m] . w(n) for m < M, n < N, x the M bf16 rows (simd_qpack_bf16_rows of
 * simd_qpack_f32_k(K) values) of a pack made as above; out (M, ldo), only its first N
 * columns written. On the AMX bf16 tiles where simd_qpack_fast(QT_F16), else the twin. */
void simd_qpack_f32_gemm(float *out, size_t ldo, const uint16_t *x, const void *pack, int N,
                         int K, int M);

/* The plain-C twin of every kernel on a pack: out[m][n] = sum_k x[m][k] * w[n][k] +
 * beta * out[m][n] for m < M and n in [n_begin, n_end) (0 <= n_begin <= n_end <= N),
 * computed as the comment at the top says: xq holds the M rows quantize_act() made for
 * qtype_get(type)->act, row m at xq + m * qact_row_bytes(act, K) (for F16 / BF16 the rows
 * of simd_qpack_bf16_rows()); out is (M, ldo), ldo >= N. beta == 0 never reads out. out
 * must not overlap xq. Threads split [0, N) outside, best in multiples of 16 (a 16-row
 * group split between two calls is computed by both). The vector and tile kernels keep
 * this contract and its results bit for bit (the bf16 tiles to f32 rounding). */
void simd_qpack_gemm_ref(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                         float beta, int n_begin, int n_end);

#endif
