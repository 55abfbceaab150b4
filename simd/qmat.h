/* qmat.h: how a weight matrix is multiplied. simd_qmat_plan() decides it once per matrix
 * at load, in one place (dispatch.c): f32 rows, the file's blocks or a pack (qpack.h), the
 * instruction set, and from how many rows the AMX tiles take over. It records the choice
 * in the matrix (simd_qmat.mul); a step then asks the matrix which activation form it
 * wants, makes that form once per GEMM input, and makes one call per chunk of the
 * matrix's rows:
 *
 *     simd_qmat_plan(&w, simd_init(), SIMD_PACK_FAST_INT8);  // once, at load
 *     ...                                                     // per step and GEMM input:
 *     int f = simd_qmat_act(&w);
 *     if (f != SIMD_ACT_ROWS) simd_act_make(k, xq, x, lda, M, K, f);
 *     ...                                                     // per chunk [n_begin, n_end):
 *     simd_qmat_gemm(out, ldo, f == SIMD_ACT_ROWS ? x : xq, lda, &w, M, beta, n_begin, n_end);
 *
 * Whatever was chosen, each output element is computed alone, in the same order whatever
 * M and the n range: a row's result does not depend on the rows beside it. */
#ifndef TESSERA_SIMD_QMAT_H
#define TESSERA_SIMD_QMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "quant.h"
#include "simd.h"

/* Activation forms: quant.h's qact values (QACT_F32 a dense copy, K floats a row), bf16
 * rows for F16 / BF16 packs, and the f32 rows read in place at their stride. */
enum {
    SIMD_ACT_BF16 = 3,  /* (M, 2K) bf16, each row's hi K then its lo K (simd_qpack_bf16_rows) */
    SIMD_ACT_FORMS = 4, /* forms a step makes into a buffer: the qacts and SIMD_ACT_BF16 */
    SIMD_ACT_ROWS = 4,  /* the caller's f32 rows as they are (F32 weights): nothing to make */
};

/* Which matrices simd_qmat_plan() repacks (qpack.h). */
typedef enum simd_pack_policy {
    SIMD_PACK_NEVER,     /* the file's blocks always */
    SIMD_PACK_FAST_INT8, /* int8-type matrices where a packed kernel runs here: the same
                          * integers as the file's blocks */
    SIMD_PACK_FAST,      /* those, and F16 / BF16 where bf16 tiles run (each value a hi and
                          * a lo bf16: within about 2^-16 of f32) */
    SIMD_PACK_ALWAYS,    /* every type the pack takes, on the twin where nothing faster runs */
} simd_pack_policy;

/* Decides how w is multiplied and records it in w->mul: f32 weights on k's gemm_nt; a
 * matrix w->pack already holds on that pack (kept); else, where policy packs w's type, on a
 * new pack (w->pack, owned by w's owner: simd_qpack_free()); else on k's qgemm over the
 * file's blocks. A pack runs AVX-512 VNNI's kernel where the CPU has it (else the twin),
 * and AMX tiles from a per-type row count where AMX runs; TESSERA_FORCE_REF=1 and
 * TESSERA_NO_AMX=1 (dispatch.c) turn those off. k borrowed, must outlive w (the tables
 * are static). Returns whether it made a pack. Thread-safe for distinct matrices. */
bool simd_qmat_plan(simd_qmat *w, const simd_kernels *k, simd_pack_policy policy);

/* Whether simd_qmat_plan() packs a matrix of this type under policy here. */
bool simd_qmat_packs(simd_pack_policy policy, uint32_t type);

/* The activation form w multiplies: a qact, SIMD_ACT_BF16 or SIMD_ACT_ROWS. */
static inline int simd_qmat_act(const simd_qmat *w) { return w->mul.act; }

/* Bytes of one row of K activations in form f (not SIMD_ACT_ROWS). */
size_t simd_act_row_bytes(int f, int K);

/* Makes M rows of K activations, x (M, lda), into form f (not SIMD_ACT_ROWS) at out, row
 * m at out + m * simd_act_row_bytes(f, K), with k's quantize_act (bit for bit the same on
 * every table) or the bf16 rounding. Each row on its own. */
void simd_act_make(const simd_kernels *k, void *out, const float *x, size_t lda, int M, int K,
                   int f);

/* out[m][n] = sum_k x[m][k] * w[n][k] + beta * out[m][n] for m < M and n in
 * [n_begin, n_end), as w->mul says: x is the M rows of w's activation form (row stride
 * lda floats for SIMD_ACT_ROWS; the others' rows simd_act_row_bytes apart, lda unused);
 * out (M, ldo). beta == 0 never reads out. out must not overlap x. Threads split [0, N)
 * outside, best in chunks of w->mul.n_align rows. One indirect call. */
static inline void simd_qmat_gemm(float *out, size_t ldo, const void *x, size_t lda,
                                  const simd_qmat *w, int M, float beta, int n_begin, int n_end)
{
    const simd_qmul *u = &w->mul;
    if (u->how == SIMD_MUL_PACK)
        (M >= u->tile_min_m ? u->tiles : u->gemm)(out, ldo, x, w->pack, M, beta, n_begin, n_end);
    else if (u->how == SIMD_MUL_BLOCKS)
        u->qgemm(out, ldo, x, w, M, beta, n_begin, n_end);
    else
        u->gemm_nt(out, ldo, x, lda, w->data, M, w->N, w->K, beta, n_begin, n_end);
}

/* What w->mul runs, for people, into buf (n bytes, truncated): "Q4_K 16-row pack, AVX-512
 * VNNI, AMX tiles from 32 rows", "Q5_1 file blocks, avx2 qgemm", "F32 avx2 gemm_nt".
 * Returns buf. */
const char *simd_qmat_describe(const simd_qmat *w, char *buf, size_t n);

#endif
