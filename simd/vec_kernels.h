/* vec_kernels.h: every SIMD kernel, written once in a small vector vocabulary (the skinny
 * GEMM is in vec_gemm.h, included from here). Included
 * by exactly one file per ISA directory (avx2/, avx512/, neon/) after it defines:
 *   V, VW                       vector of VW floats (VW divides TS_KV_BLOCK, VW even)
 *   v_zero v_set1 v_load v_store v_loadn v_storen (n < VW lanes, zero-filled)
 *   v_load_h v_loadn_h v_store_h v_storen_h       (f16 memory <-> f32 lanes)
 *   v_load_i8 v_loadn_i8                          (int8 memory -> f32 lanes)
 *   v_add v_sub v_mul v_div v_max v_min v_fma(a, b, c) = a * b + c
 *   v_reduce_add v_reduce_max v_swap_pairs (lanes 2i <-> 2i+1)
 *   v_round (to nearest) v_pow2n (2^n for integral n in [-126, 127])
 *   v_reduce_lanes(a[VW]) lane i = sum of a[i]'s lanes; V_ACCS accumulators to keep live
 *   v_in_reg(v)                 v, kept in a register (no load folded into its users)
 *   SIMD_TABLE, SIMD_NAME       the table's symbol and name
 *   GEMM_MAX_ROWS               the table's gemm_nt_max_rows
 * Each file is compiled with its own ISA flags, so everything here is static. */
#ifndef SIMD_TABLE
#error "define the vector vocabulary and SIMD_TABLE before including vec_kernels.h"
#endif

#include <limits.h>
#include <math.h>
#include <string.h>

#include "qpack.h"
#include "simd_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* m == VW loads a full vector, otherwise the first m lanes. */
ALWAYS_INLINE V ld(const float *p, size_t m) { return m == VW ? v_load(p) : v_loadn(p, m); }
ALWAYS_INLINE void st(float *p, V v, size_t m)
{
    if (m == VW)
        v_store(p, v);
    else
        v_storen(p, v, m);
}
ALWAYS_INLINE V ld_h(const uint16_t *p, size_t m) { return m == VW ? v_load_h(p) : v_loadn_h(p, m); }
ALWAYS_INLINE void st_h(uint16_t *p, V v, size_t m)
{
    if (m == VW)
        v_store_h(p, v);
    else
        v_storen_h(p, v, m);
}
/* Lanes left at i of n, capped at VW. */
#define LANES(i, n) ((n) - (i) < (size_t)VW ? (n) - (i) : (size_t)VW)

/* exp(x) for x in [-87.3, 88.3] (clamped outside), Cephes' polynomial, ~2 ulp. */
ALWAYS_INLINE V v_exp(V x)
{
    x = v_min(v_max(x, v_set1(-87.3f)), v_set1(88.3f));
    V n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    V r = v_fma(n, v_set1(-0.693359375f), x);
    r = v_fma(n, v_set1(2.12194440e-4f), r);
    V p = v_set1(1.9875691500e-4f);
    p = v_fma(p, r, v_set1(1.3981999507e-3f));
    p = v_fma(p, r, v_set1(8.3334519073e-3f));
    p = v_fma(p, r, v_set1(4.1665795894e-2f));
    p = v_fma(p, r, v_set1(1.6666665459e-1f));
    p = v_fma(p, r, v_set1(5.0000001201e-1f));
    p = v_fma(p, v_mul(r, r), v_add(r, v_set1(1.0f)));
    return v_mul(p, v_pow2n(n));
}

/* ---- elementwise kernels ------------------------------------------------------------ */

static void vec_rmsnorm(float *out, const float *x, const float *weight, int rows, int n, float eps)
{
    /* x, out (rows, n); weight (n) */
    size_t nn = (size_t)n;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * nn;
        float *o = out + (size_t)r * nn;
        V acc = v_zero();
        for (size_t i = 0; i < nn; i += VW) {
            V v = ld(xr + i, LANES(i, nn));
            acc = v_fma(v, v, acc);
        }
        float ss = v_reduce_add(acc) / n + eps;
        V scale = v_set1(1.0f / sqrtf(ss));
        for (size_t i = 0; i < nn; i += VW) {
            size_t m = LANES(i, nn);
            st(o + i, v_mul(ld(weight + i, m), v_mul(scale, ld(xr + i, m))), m);
        }
    }
}

static void vec_rope(float *x, const float *table, int rows, size_t row_stride, int n_heads,
                     int head_dim, simd_rope_style style)
{
    /* x (rows, row_stride) holding (n_heads, head_dim); table (rows,
     * SIMD_ROPE_TABLE_FLOATS(head_dim)) from simd_rope_table: the cos/sin of a row's
     * position, reused for every head. */
    int half = head_dim / 2;
    for (int r = 0; r < rows; r++) {
        const float *tc = table + (size_t)r * SIMD_ROPE_TABLE_FLOATS(head_dim);
        const float *ts = tc + head_dim;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)r * row_stride + (size_t)h * head_dim;
            if (style == SIMD_ROPE_NEOX) {
                float *a = v, *b = v + half;
                for (size_t i = 0; i < (size_t)half; i += VW) {
                    size_t m = LANES(i, (size_t)half);
                    V x1 = ld(a + i, m), x2 = ld(b + i, m);
                    V c = ld(tc + i, m), s = ld(ts + i, m);
                    st(a + i, v_sub(v_mul(x1, c), v_mul(x2, s)), m);
                    st(b + i, v_fma(x1, s, v_mul(x2, c)), m);
                }
            } else {
                size_t len = 2 * (size_t)half; /* even, so a partial vector keeps whole pairs */
                for (size_t i = 0; i < len; i += VW) {
                    size_t m = LANES(i, len);
                    V xv = ld(v + i, m);
                    st(v + i, v_fma(xv, ld(tc + i, m), v_mul(v_swap_pairs(xv), ld(ts + i, m))), m);
                }
            }
        }
    }
}

/* GELU's tanh form as g * sigmoid(2u), u = sqrt(2/pi) (g + 0.044715 g^3): 0.5 (1 +
 * tanh(u)) is sigmoid(2u), one exp where tanh would take two. */
static void vec_gelu_mul(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i += VW) {
        size_t m = LANES(i, n);
        V g = ld(gate + i, m);
        V g3 = v_mul(v_mul(g, g), g);
        V u2 = v_mul(v_set1(-2.0f * 0.7978845608f), v_fma(g3, v_set1(0.044715f), g));
        V y = v_div(g, v_add(v_set1(1.0f), v_exp(u2)));
        st(out + i, v_mul(y, ld(up + i, m)), m);
    }
}

static void vec_silu_mul(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i += VW) {
        size_t m = LANES(i, n);
        V g = ld(gate + i, m);
        V sig = v_div(v_set1(1.0f), v_add(v_set1(1.0f), v_exp(v_sub(v_zero(), g))));
        st(out + i, v_mul(v_mul(g, sig), ld(up + i, m)), m);
    }
}

static void vec_softmax(float *x, size_t n)
{
    V vmax = v_set1(x[0]);
    size_t i = 0;
    for (; i + VW <= n; i += VW)
        vmax = v_max(vmax, v_load(x + i));
    float mx = v_reduce_max(vmax);
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    V vmx = v_set1(mx), vsum = v_zero();
    float sum = 0.0f;
    for (i = 0; i < n; i += VW) {
        size_t m = LANES(i, n);
        V e = v_exp(v_sub(ld(x + i, m), vmx));
        st(x + i, e, m);
        if (m == VW)
            vsum = v_add(vsum, e);
        else
            for (size_t k = 0; k < m; k++) /* padding lanes hold exp(-max): skip them */
                sum += x[i + k];
    }
    V inv = v_set1(1.0f / (sum + v_reduce_add(vsum)));
    for (i = 0; i < n; i += VW) {
        size_t m = LANES(i, n);
        st(x + i, v_mul(ld(x + i, m), inv), m);
    }
}

static void vec_f32_to_f16(uint16_t *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i += VW) {
        size_t m = LANES(i, n);
        st_h(out + i, ld(x + i, m), m);
    }
}

static void vec_f16_to_f32(float *out, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i += VW) {
        size_t m = LANES(i, n);
        st(out + i, ld_h(x + i, m), m);
    }
}

/* ---- paged attention ---------------------------------------------------------------- */

/* Query vectors ((row, head) pairs of one kv head) processed together over one K/V read. */
#define ATTN_TILE 8

/* Lanes [0, m) of KV row data at element index i of the pool, whose type kt (a
 * simd_kv_type) is a constant after inlining; q8_0 values times their group's scale s. */
ALWAYS_INLINE V ld_kv(const void *pool, size_t i, size_t m, const int kt, float s)
{
    if (kt == SIMD_KV_Q8_0) {
        const int8_t *p = (const int8_t *)pool + i;
        return v_mul(m == VW ? v_load_i8(p) : v_loadn_i8(p, m), v_set1(s));
    }
    return kt == SIMD_KV_F16 ? ld_h((const uint16_t *)pool + i, m) : ld((const float *)pool + i, m);
}

/* Scores of slots [0, nt) for the NQ queries, for head-dim lanes [d, d + m). sc: the K
 * row's group scales (q8_0 only). */
ALWAYS_INLINE void qk_chunk(V *acc, const float *const *qp, const void *pool, size_t krow,
                            size_t d, size_t m, const int NQ, const int kt, const float *sc)
{
    V k = ld_kv(pool, krow + d, m, kt, kt == SIMD_KV_Q8_0 ? sc[d / SIMD_KV_Q8_GROUP] : 0.0f);
#pragma GCC unroll 8
    for (int q = 0; q < NQ; q++)
        acc[q] = v_fma(ld(qp[q] + d, m), k, acc[q]);
}

/* out[q][d, d + DC * VW) = out[q] * alpha[q] + sum over slots t < nt of p[q][t] * V[t],
 * (DC == 1: lanes [d, d + m)). DC chunks side by side give DC * NQ independent FMA chains.
 * vsc: q8_0 V's scales, (nt, ng) (a chunk lies in one group: VW divides 32). */
ALWAYS_INLINE void pv_chunk(float *const *op, const float (*p)[TS_KV_BLOCK], const float *alpha,
                            int first, const void *pool, size_t vbase, int nt, size_t hd,
                            size_t d, size_t m, const int NQ, const int DC, const int kt,
                            const float *vsc, size_t ng)
{
    V o[2][ATTN_TILE];
#pragma GCC unroll 2
    for (int c = 0; c < DC; c++)
#pragma GCC unroll 8
        for (int q = 0; q < NQ; q++)
            o[c][q] = first ? v_zero() : v_mul(ld(op[q] + d + c * VW, m), v_set1(alpha[q]));
    for (int t = 0; t < nt; t++) {
#pragma GCC unroll 2
        for (int c = 0; c < DC; c++) {
            size_t dc = d + (size_t)c * VW;
            V v = ld_kv(pool, vbase + (size_t)t * hd + dc, m, kt,
                        kt == SIMD_KV_Q8_0 ? vsc[(size_t)t * ng + dc / SIMD_KV_Q8_GROUP] : 0.0f);
#pragma GCC unroll 8
            for (int q = 0; q < NQ; q++)
                o[c][q] = v_fma(v_set1(p[q][t]), v, o[c][q]);
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < DC; c++)
#pragma GCC unroll 8
        for (int q = 0; q < NQ; q++)
            st(op[q] + d + c * VW, o[c][q], m);
}

/* Asks for the run of n elements at element index i of the pool to be brought into cache.
 * The K and V runs of a block are contiguous but blocks are scattered, and the V pass
 * walks a run column-wise, so the hardware prefetchers alone leave the kernel waiting. */
ALWAYS_INLINE void prefetch_run(const void *pool, size_t i, size_t n, const int kt)
{
    size_t es = kt == SIMD_KV_Q8_0 ? 1 : kt == SIMD_KV_F16 ? 2 : 4;
    const char *p = (const char *)pool + i * es;
    size_t bytes = n * es;
    for (size_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(p + off, 0, 3);
}

/* What every block of one attention call shares: the scores' scale and soft-cap. */
typedef struct attn_scores {
    float scale;
    float softcap; /* > 0: scores become softcap * tanh(score / softcap) */
} attn_scores;

/* Block b (slots b * TS_KV_BLOCK ..) of kv head g for NQ query vectors; query q attends
 * to positions first[q] .. last[q], last_max the tile's largest last. m_run[q] and
 * l_run[q] carry query q's running max and sum from block to block (set by the tile's
 * first block, `first_block`), and op[q] its unnormalised output (attn_finish divides).
 * A query none of whose positions are in this block (a window that starts later) keeps
 * its sums and adds nothing. With prefetch, the next block's K and V runs are asked for
 * while this one works (the first tile of a block does it for the others). NQ and kt (the
 * K/V type) are constants after inlining, so the per-query accumulators live in
 * registers. q8_0 K and V are read as int8 lanes times their group's scale, the block's
 * scales made f32 once for all its queries (a q8_0 prefetch covers the whole run, scales
 * included). */
ALWAYS_INLINE void attn_block(float *const *op, const float *const *qp, const int *first,
                              const int *last, int last_max, float *m_run, float *l_run,
                              const simd_kv_view *kv, const attn_scores *sc, int g, int b,
                              int first_block, int prefetch, int head_dim, const int NQ,
                              const int kt)
{
    size_t hd = (size_t)head_dim, d_full = hd - hd % VW;
    size_t ng = SIMD_KV_Q8_GROUPS(hd);
    size_t q8 = kt == SIMD_KV_Q8_0;
    float scale = sc->scale;
    float alpha[ATTN_TILE];
    float p[ATTN_TILE][TS_KV_BLOCK];

    size_t base = (size_t)kv->block_table[b] * kv->block_stride + (size_t)g * kv->head_stride;
    size_t kbase = base + kv->k_offset, vbase = base + kv->v_offset;
    int t0 = b * TS_KV_BLOCK;
    int nt = last_max - t0 + 1 < TS_KV_BLOCK ? last_max - t0 + 1 : TS_KV_BLOCK;
    if (prefetch && first_block)
        prefetch_run(kv->pool, vbase, q8 ? kv->head_stride : (size_t)nt * hd, kt);
    if (prefetch && (b + 1) * TS_KV_BLOCK <= last_max) { /* the next block's runs */
        size_t next = (size_t)kv->block_table[b + 1] * kv->block_stride + (size_t)g * kv->head_stride;
        int nt1 = last_max - t0 - TS_KV_BLOCK + 1 < TS_KV_BLOCK ? last_max - t0 - TS_KV_BLOCK + 1 : TS_KV_BLOCK;
        size_t run = q8 ? kv->head_stride : (size_t)nt1 * hd;
        prefetch_run(kv->pool, next + kv->k_offset, run, kt);
        prefetch_run(kv->pool, next + kv->v_offset, run, kt);
    }
    /* q8_0: the slots' scales as f32, (nt, ng) each */
    float ksc[TS_KV_BLOCK * SIMD_KV_Q8_GROUPS(SIMD_KV_Q8_MAX_HEAD_DIM)];
    float vsc[TS_KV_BLOCK * SIMD_KV_Q8_GROUPS(SIMD_KV_Q8_MAX_HEAD_DIM)];
    if (kt == SIMD_KV_Q8_0) {
        const char *pool = kv->pool;
        size_t n = (size_t)nt * ng;
        const uint16_t *kh = (const uint16_t *)(pool + kbase + TS_KV_BLOCK * hd);
        const uint16_t *vh = (const uint16_t *)(pool + vbase + TS_KV_BLOCK * hd);
        for (size_t i = 0; i < n; i += VW) {
            st(ksc + i, ld_h(kh + i, LANES(i, n)), LANES(i, n));
            st(vsc + i, ld_h(vh + i, LANES(i, n)), LANES(i, n));
        }
    }

    /* scores: each K row is read once for all NQ queries; the dot products of VW slots
     * are reduced together */
    V part[ATTN_TILE][VW];
    V vscale = v_set1(scale);
    for (int t = 0; t < nt; t++) {
        size_t krow = kbase + (size_t)t * hd;
        V acc[ATTN_TILE];
#pragma GCC unroll 8
        for (int q = 0; q < NQ; q++)
            acc[q] = v_zero();
        const float *krs = ksc + (size_t)t * ng * q8; /* the K row's scales */
        for (size_t d = 0; d < d_full; d += VW)
            qk_chunk(acc, qp, kv->pool, krow, d, VW, NQ, kt, krs);
        if (d_full < hd)
            qk_chunk(acc, qp, kv->pool, krow, d_full, hd - d_full, NQ, kt, krs);
        int lane = t % VW;
#pragma GCC unroll 8
        for (int q = 0; q < NQ; q++)
            part[q][lane] = acc[q];
        if (lane == VW - 1 || t == nt - 1) {
            for (int q = 0; q < NQ; q++) {
                for (int r = lane + 1; r < VW; r++)
                    part[q][r] = v_zero();
                v_store(p[q] + (t - lane), v_mul(v_reduce_lanes(part[q]), vscale));
            }
        }
    }

    if (sc->softcap > 0.0f) {
        float cap = sc->softcap, inv = 1.0f / sc->softcap;
        for (int q = 0; q < NQ; q++)
            for (int t = 0; t < nt; t++)
                p[q][t] = cap * tanhf(p[q][t] * inv);
    }

    /* online softmax: new running max, rescale factor, probabilities */
    for (int q = 0; q < NQ; q++) {
        /* the query's slots here are [lo, valid): valid <= 0 in a prefill tile's last
         * blocks, lo > 0 where a window starts inside (or past) this block */
        int valid = last[q] - t0 + 1;
        valid = valid < 0 ? 0 : valid > TS_KV_BLOCK ? TS_KV_BLOCK : valid;
        int lo = first[q] - t0;
        lo = lo < 0 ? 0 : lo > valid ? valid : lo;
        for (int t = 0; t < lo; t++)
            p[q][t] = -INFINITY;
        for (int t = valid; t < TS_KV_BLOCK; t++)
            p[q][t] = -INFINITY;
        if (lo == valid) { /* none of the query's positions here */
            memset(p[q], 0, sizeof p[q]);
            alpha[q] = 1.0f;
            if (first_block) {
                m_run[q] = -INFINITY;
                l_run[q] = 0.0f;
            }
            continue;
        }
        V vmax = v_load(p[q]);
        for (int t = VW; t < TS_KV_BLOCK; t += VW)
            vmax = v_max(vmax, v_load(p[q] + t));
        float mb = v_reduce_max(vmax);
        float m_new = first_block || mb > m_run[q] ? mb : m_run[q];
        alpha[q] = first_block ? 0.0f : expf(m_run[q] - m_new); /* 0 after -inf */
        V vm = v_set1(m_new), vsum = v_zero();
        for (int t = 0; t < TS_KV_BLOCK; t += VW) {
            V e = v_exp(v_sub(v_load(p[q] + t), vm));
            v_store(p[q] + t, e);
        }
        /* v_exp clamps, so masked slots need an exact zero */
        for (int t = 0; t < lo; t++)
            p[q][t] = 0.0f;
        for (int t = valid; t < TS_KV_BLOCK; t++)
            p[q][t] = 0.0f;
        for (int t = 0; t < TS_KV_BLOCK; t += VW)
            vsum = v_add(vsum, v_load(p[q] + t));
        l_run[q] = (first_block ? 0.0f : l_run[q] * alpha[q]) + v_reduce_add(vsum);
        m_run[q] = m_new;
    }

    /* values: each V row is read once for all NQ queries; accumulate in out */
    const int DC = 2 * NQ <= V_ACCS ? 2 : 1;
    size_t d = 0;
    for (; d + (size_t)DC * VW <= d_full; d += (size_t)DC * VW)
        pv_chunk(op, (const float(*)[TS_KV_BLOCK])p, alpha, first_block, kv->pool, vbase, nt,
                 hd, d, VW, NQ, DC, kt, vsc, ng);
    for (; d < d_full; d += VW)
        pv_chunk(op, (const float(*)[TS_KV_BLOCK])p, alpha, first_block, kv->pool, vbase, nt,
                 hd, d, VW, NQ, 1, kt, vsc, ng);
    if (d_full < hd)
        pv_chunk(op, (const float(*)[TS_KV_BLOCK])p, alpha, first_block, kv->pool, vbase, nt,
                 hd, d_full, hd - d_full, NQ, 1, kt, vsc, ng);
}

/* One tile's queries through block b: attn_block with the tile's size, head dimension and
 * K/V type as constants. */
typedef struct attn_tile {
    float *const *op;
    const float *const *qp;
    const int *first, *last;
    int nq, last_max;
    float *m_run, *l_run;
} attn_tile;

static void run_block(const attn_tile *t, const simd_kv_view *kv, const attn_scores *sc, int g,
                      int b, int first_block, int prefetch, int head_dim)
{
    /* head_dim 64 and 128 (most models) as constants: the loops over it unroll */
#define BLOCK_ARGS(HD, N, F)                                                              \
    t->op, t->qp, t->first, t->last, t->last_max, t->m_run, t->l_run, kv, sc, g, b,       \
        first_block, prefetch, HD, N, F
#define BLOCK_HD(N, F)                                   \
    if (head_dim == 64)                                  \
        attn_block(BLOCK_ARGS(64, N, F));                \
    else if (head_dim == 128)                            \
        attn_block(BLOCK_ARGS(128, N, F));               \
    else                                                 \
        attn_block(BLOCK_ARGS(head_dim, N, F));
#define BLOCK_CASE(N)                                                 \
    case N:                                                           \
        if (kv->type == SIMD_KV_Q8_0) {                               \
            BLOCK_HD(N, SIMD_KV_Q8_0)                                 \
        } else if (kv->type == SIMD_KV_F16) {                         \
            BLOCK_HD(N, SIMD_KV_F16)                                  \
        } else {                                                      \
            BLOCK_HD(N, SIMD_KV_F32)                                  \
        }                                                             \
        break;
    switch (t->nq) {
        BLOCK_CASE(1)
        BLOCK_CASE(2)
        BLOCK_CASE(3)
        BLOCK_CASE(4)
        BLOCK_CASE(5)
        BLOCK_CASE(6)
        BLOCK_CASE(7)
        BLOCK_CASE(8)
    default:
        break;
    }
#undef BLOCK_CASE
#undef BLOCK_HD
#undef BLOCK_ARGS
}

/* op[q] /= l_run[q]: the softmax's sum, once every block is in; and where lp[q] is set,
 * the log of that sum on the scores' own scale (the span's share in a merge). */
static void attn_finish(float *const *op, float *const *lp, const float *m_run,
                        const float *l_run, int nq, int head_dim)
{
    size_t hd = (size_t)head_dim;
    for (int q = 0; q < nq; q++) {
        V inv = v_set1(1.0f / l_run[q]);
        for (size_t d = 0; d < hd; d += VW) {
            size_t m = LANES(d, hd);
            st(op[q] + d, v_mul(ld(op[q] + d, m), inv), m);
        }
        if (lp[q])
            *lp[q] = m_run[q] + logf(l_run[q]);
    }
}

/* Query vectors of one kv head whose blocks run together: a prompt chunk's rows x the
 * heads that share the kv head (32 x 8 for TinyLlama), so that each K/V block is read
 * from memory once and then from L1 by every tile of ATTN_TILE queries. Tile by tile over
 * all blocks, each query row re-read its whole context from L2 or beyond. */
enum { ATTN_GROUP = 256 };

/* The n (<= ATTN_GROUP) queries at qp, in tiles of ATTN_TILE, block by block: each tile
 * from the block of its earliest first position to that of its latest last one. */
static void run_group(float *const *op, float *const *lp, const float *const *qp,
                      const int *first, const int *last, int n, const simd_kv_view *kv,
                      const attn_scores *sc, int g, int head_dim)
{
    float m_run[ATTN_GROUP], l_run[ATTN_GROUP];
    int tile_max[ATTN_GROUP / ATTN_TILE], tile_b0[ATTN_GROUP / ATTN_TILE];
    int n_tiles = (n + ATTN_TILE - 1) / ATTN_TILE;
    int group_max = 0, group_b0 = INT_MAX;
    for (int i = 0; i < n_tiles; i++) {
        int lo = INT_MAX;
        tile_max[i] = 0;
        for (int q = i * ATTN_TILE; q < n && q < (i + 1) * ATTN_TILE; q++) {
            tile_max[i] = last[q] > tile_max[i] ? last[q] : tile_max[i];
            lo = first[q] < lo ? first[q] : lo;
        }
        tile_b0[i] = lo / TS_KV_BLOCK;
        group_max = tile_max[i] > group_max ? tile_max[i] : group_max;
        group_b0 = tile_b0[i] < group_b0 ? tile_b0[i] : group_b0;
    }
    for (int b = group_b0; b * TS_KV_BLOCK <= group_max; b++) {
        int prefetch = 1;
        for (int i = 0; i < n_tiles; i++) {
            if (b < tile_b0[i] || b * TS_KV_BLOCK > tile_max[i])
                continue; /* the tile's windows start after, or its queries end before */
            int q0 = i * ATTN_TILE, nq = n - q0 < ATTN_TILE ? n - q0 : ATTN_TILE;
            attn_tile t = {op + q0, qp + q0, first + q0, last + q0, nq, tile_max[i],
                           m_run + q0, l_run + q0};
            run_block(&t, kv, sc, g, b, b == tile_b0[i], prefetch, head_dim);
            prefetch = 0;
        }
    }
    for (int i = 0; i < n_tiles; i++) {
        int q0 = i * ATTN_TILE, nq = n - q0 < ATTN_TILE ? n - q0 : ATTN_TILE;
        attn_finish(op + q0, lp + q0, m_run + q0, l_run + q0, nq, head_dim);
    }
}

static void vec_attention(float *out, const float *q, const simd_kv_view *kv,
                          const simd_attn_shape *shape, int head_begin, int head_end)
{
    /* q (n_rows, q_stride), out (n_rows, out_stride), each holding (n_heads, head_dim).
     * Queries are grouped by kv head, row-major then head, into groups of up to
     * ATTN_GROUP whose tiles of ATTN_TILE run block by block. A query with no position
     * in the span gets a zero row and an lse of -inf. */
    int hd = shape->head_dim;
    int group = shape->n_heads / shape->n_kv_heads;
    attn_scores sc = {shape->scale > 0.0f ? shape->scale : 1.0f / sqrtf((float)hd),
                      shape->softcap};
    const float *qp[ATTN_GROUP];
    float *op[ATTN_GROUP], *lp[ATTN_GROUP];
    int first[ATTN_GROUP], last[ATTN_GROUP];
    for (int g = head_begin / group; g * group < head_end; g++) {
        int h_lo = g * group > head_begin ? g * group : head_begin;
        int h_hi = (g + 1) * group < head_end ? (g + 1) * group : head_end;
        int n = 0;
        for (int j = 0; j < shape->n_rows; j++)
            for (int h = h_lo; h < h_hi; h++) {
                int lo, hi;
                simd_attn_positions(shape, j, &lo, &hi);
                float *o = out + (size_t)j * shape->out_stride + (size_t)h * hd;
                float *l = shape->lse ? shape->lse + (size_t)j * shape->n_heads + h : NULL;
                if (lo > hi) {
                    memset(o, 0, (size_t)hd * sizeof *o);
                    if (l)
                        *l = -INFINITY;
                    continue;
                }
                qp[n] = q + (size_t)j * shape->q_stride + (size_t)h * hd;
                op[n] = o;
                lp[n] = l;
                first[n] = lo;
                last[n] = hi;
                if (++n == ATTN_GROUP) {
                    run_group(op, lp, qp, first, last, n, kv, &sc, g, hd);
                    n = 0;
                }
            }
        if (n)
            run_group(op, lp, qp, first, last, n, kv, &sc, g, hd);
    }
}

#include "vec_gemm.h"
#include "vec_qgemm.h"

/* The bf16 split of activation rows: the ISA's own where it has one (the bf16 tiles run
 * only beside AVX-512), else the plain-C function. */
#ifndef V_BF16_ROWS
#define V_BF16_ROWS simd_qpack_bf16_rows
#endif

const simd_kernels SIMD_TABLE = {
    .name = SIMD_NAME,
    .rmsnorm = vec_rmsnorm,
    .rope = vec_rope,
    .silu_mul = vec_silu_mul,
    .gelu_mul = vec_gelu_mul,
    .softmax = vec_softmax,
    .f32_to_f16 = vec_f32_to_f16,
    .f16_to_f32 = vec_f16_to_f32,
    .attention = vec_attention,
    .gemm_nt = vec_gemm_nt,
    .gemm_nt_max_rows = GEMM_MAX_ROWS,
    .gemm_nn = vec_gemm_nn,
    .quantize_act = vec_quantize_act,
    .bf16_rows = V_BF16_ROWS,
    .qgemm = vec_qgemm,
};
