/* vec_qgemm.h: activation quantization and the quantized GEMM in the vector vocabulary
 * plus a small int8 dot-product vocabulary; included by vec_kernels.h after vec_gemm.h.
 * Each ISA file defines, besides the float vocabulary:
 *   QI qi_load(const int8_t *p)             32 int8
 *   QW qw_prep(QI w, sgn)                   a weight vector made ready for qs_dot (once per
 *                                           weight row and group, reused for every activation row)
 *   QS qs_zero() qs_sub(a, b)               int32 lanes
 *   QS qs_dot(QS acc, QW w, QI a, sgn)      acc + w . a spread over lanes (sgn: w may be
 *                                           negative, else 0 <= w <= 63)
 *   QS qs_dot_sc(acc, w, a, sc, sgn)        the same, each product times its sub-block scale
 *                                           (sc: 16 int16, 8 times the scale of elements 0..15
 *                                           then of 16..31, see qunpack.h)
 *   QS qs_mins(const int16_t *mn, const int16_t *bs)   16 products mn[j] * bs[j] over lanes
 *   QF qf_zero() qf_fma(QF acc, float x, QS s) = acc + x * float(s)   float qf_reduce(QF)
 *   QG_NR, QG_MR                            the tile: weight rows x activation rows
 *
 * A tile of QG_NR weight rows is unpacked (qunpack.h) once per QG_KC elements of K into a
 * buffer in L1, then multiplied with every activation row, QG_MR at a time. Integer block
 * dots are exact; the float terms of an output are added block by block in K order with
 * the same operations in every tile shape (rows past nr are zero and not stored; each
 * MR instance runs the same per-output sequence), so a row's result does not depend on M
 * or the n range. K past QG_KC is done in chunks fixed by K alone, each chunk's sum added
 * to out. */
#include "qunpack.h"

#define QG_KC 2048 /* elements of K unpacked at a time */

typedef struct qg_buf {
    int8_t q[QG_NR][QG_KC];
    int16_t sc[QG_NR][QG_KC / 2];
    int16_t mn[QG_NR][QG_KC / 16];
    float d[QG_NR][QG_KC / QK_32], m[QG_NR][QG_KC / QK_32];
} qg_buf;

/* ---- activations ---------------------------------------------------------------------- */

static void vec_quantize_act(void *out, const float *x, size_t lda, int M, int K, qact a)
{
    /* x (M, lda); row m of out at out + m * qact_row_bytes(a, K). The rounding is the
     * reference's (qunpack.h): max |x| and one multiplication by the same inverse, then
     * round to nearest even, so every ISA writes the same bytes. */
    size_t rb = qact_row_bytes(a, K);
    float r[QK_K];
    for (int mi = 0; mi < M; mi++) {
        const float *xm = x + (size_t)mi * lda;
        char *o = (char *)out + (size_t)mi * rb;
        if (a == QACT_F32) {
            memcpy(o, xm, sizeof(float) * (size_t)K);
            continue;
        }
        int bs = a == QACT_Q8_32 ? QK_32 : QK_K;
        for (int b = 0; b < K / bs; b++) {
            const float *xb = xm + (size_t)b * bs;
            V vmax = v_zero();
            for (int i = 0; i < bs; i += VW) {
                V v = v_load(xb + i);
                vmax = v_max(vmax, v_max(v, v_sub(v_zero(), v)));
            }
            float amax = v_reduce_max(vmax), inv;
            amax = amax > 0.0f ? amax : 0.0f; /* +0, never -0, as fabsf gives */
            float dq = qg_act_scale(amax, &inv);
            V vinv = v_set1(inv);
            for (int i = 0; i < bs; i += VW)
                v_store(r + i, v_round(v_mul(v_load(xb + i), vinv)));
            if (a == QACT_Q8_32) {
                qa_q8_32 *ob = (qa_q8_32 *)o + b;
                ob->d = dq;
                ob->s = dq * (float)qg_act_store(ob->qs, r, bs);
            } else {
                qa_q8_k *ob = (qa_q8_k *)o + b;
                ob->d = dq;
                for (int j = 0; j < QK_K / 16; j++)
                    ob->bsums[j] = (int16_t)qg_act_store(ob->qs + 16 * j, r + 16 * j, 16);
            }
        }
    }
}

/* ---- the tile ------------------------------------------------------------------------- */

/* out (MR, ldo) columns [0, nr) += or = the tile's rows . MR activation rows (xrb bytes
 * apart, at xa) over float blocks [fb0, fb0 + nfb) of the row, unpacked in B from block
 * fb0 on. first: the chunk at K = 0, which applies beta; later chunks add. FB, SGN, MIN:
 * qg_traits of the type; 256-element blocks have sub-block scales. */
ALWAYS_INLINE void qg_tile(float *out, size_t ldo, const char *xa, size_t xrb, const qg_buf *B,
                           int nr, int nfb, int fb0, float beta, int first, const int FB,
                           const int SGN, const int MIN, const int MR)
{
    QF acc[QG_NR][QG_MR];
    float fm[QG_NR][QG_MR];
#pragma GCC unroll 8
    for (int r = 0; r < QG_NR; r++)
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            acc[r][i] = qf_zero(), fm[r][i] = 0.0f;
    if (FB == QK_32) {
        const qa_q8_32 *a[QG_MR];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            a[i] = (const qa_q8_32 *)(xa + (size_t)i * xrb) + fb0;
        for (int b = 0; b < nfb; b++) {
            QW w[QG_NR];
#pragma GCC unroll 8
            for (int r = 0; r < QG_NR; r++)
                w[r] = qw_prep(qi_load(B->q[r] + QK_32 * b), SGN);
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) {
                QI av = qi_load(a[i][b].qs);
                float da = a[i][b].d;
#pragma GCC unroll 8
                for (int r = 0; r < QG_NR; r++) {
                    acc[r][i] = qf_fma(acc[r][i], B->d[r][b] * da, qs_dot(qs_zero(), w[r], av, SGN));
                    if (MIN == QG_MIN_FLOAT)
                        fm[r][i] += B->m[r][b] * a[i][b].s;
                }
            }
        }
    } else {
        const qa_q8_k *a[QG_MR];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            a[i] = (const qa_q8_k *)(xa + (size_t)i * xrb) + fb0;
        for (int b = 0; b < nfb; b++) {
            QS s[QG_NR][QG_MR];
#pragma GCC unroll 8
            for (int r = 0; r < QG_NR; r++)
#pragma GCC unroll 8
                for (int i = 0; i < MR; i++)
                    s[r][i] = qs_zero();
            for (int g = 0; g < QK_K / 32; g++) {
                QW w[QG_NR];
#pragma GCC unroll 8
                for (int r = 0; r < QG_NR; r++)
                    w[r] = qw_prep(qi_load(B->q[r] + QK_K * b + 32 * g), SGN);
#pragma GCC unroll 8
                for (int i = 0; i < MR; i++) {
                    QI av = qi_load(a[i][b].qs + 32 * g);
#pragma GCC unroll 8
                    for (int r = 0; r < QG_NR; r++)
                        s[r][i] = qs_dot_sc(s[r][i], w[r], av, B->sc[r] + QK_K / 2 * b + 16 * g, SGN);
                }
            }
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
                for (int r = 0; r < QG_NR; r++) {
                    float da = a[i][b].d;
                    QS si = s[r][i];
                    if (MIN == QG_MIN_SAME_D)
                        si = qs_sub(si, qs_mins(B->mn[r] + 16 * b, a[i][b].bsums));
                    acc[r][i] = qf_fma(acc[r][i], B->d[r][b] * da, si);
                    if (MIN == QG_MIN_DMIN)
                        acc[r][i] = qf_fma(acc[r][i], -(B->m[r][b] * da),
                                           qs_mins(B->mn[r] + 16 * b, a[i][b].bsums));
                }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        for (int r = 0; r < nr; r++) {
            float v = qf_reduce(acc[r][i]) + fm[r][i];
            float *o = out + (size_t)i * ldo + r;
            *o = !first ? *o + v : beta == 0.0f ? v : v + beta * *o; /* beta 0 never reads out */
        }
}

/* Every activation row against the unpacked tile, QG_MR rows at a time. */
ALWAYS_INLINE void qg_tiles(float *out, size_t ldo, const char *xq, size_t xrb, const qg_buf *B,
                            int M, int nr, int nfb, int fb0, float beta, int first, const int FB,
                            const int SGN, const int MIN)
{
    int m0 = 0;
    for (; m0 + QG_MR <= M; m0 += QG_MR)
        qg_tile(out + (size_t)m0 * ldo, ldo, xq + (size_t)m0 * xrb, xrb, B, nr, nfb, fb0, beta,
                first, FB, SGN, MIN, QG_MR);
    switch (M - m0) {
#define QG_TAIL(MR)                                                                          \
    case MR:                                                                                 \
        if ((MR) < QG_MR)                                                                    \
            qg_tile(out + (size_t)m0 * ldo, ldo, xq + (size_t)m0 * xrb, xrb, B, nr, nfb, fb0, \
                    beta, first, FB, SGN, MIN, MR);                                          \
        break;
        QG_TAIL(1)
        QG_TAIL(2)
        QG_TAIL(3)
        QG_TAIL(4)
        QG_TAIL(5)
        QG_TAIL(6)
        QG_TAIL(7)
#undef QG_TAIL
    default:
        break;
    }
}

ALWAYS_INLINE void qg_run(float *out, size_t ldo, const void *xq, const simd_qmat *w, int M,
                          float beta, int n_begin, int n_end, const int FB, const int SGN,
                          const int MIN)
{
    /* out (M, ldo); xq M rows of qact_row_bytes; w (N, K) in its blocks */
    const qtype_info *info = qtype_get(w->type);
    size_t xrb = qact_row_bytes(info->act, w->K);
    int be = (int)info->block_elems;
    qg_buf B __attribute__((aligned(64)));
    for (int n0 = n_begin; n0 < n_end; n0 += QG_NR) {
        int nr = n_end - n0 < QG_NR ? n_end - n0 : QG_NR;
        for (int k0 = 0; k0 < w->K; k0 += QG_KC) {
            int kn = w->K - k0 < QG_KC ? w->K - k0 : QG_KC;
            for (int r = 0; r < QG_NR; r++) {
                if (r < nr) {
                    const char *src = (const char *)w->data + (size_t)(n0 + r) * w->row_bytes +
                                      (size_t)(k0 / be) * info->block_bytes;
                    qg_unpack(B.q[r], B.sc[r], B.mn[r], B.d[r], B.m[r], src, w->type, kn / be);
                } else { /* rows past the matrix multiply as zeros and are not stored */
                    memset(B.q[r], 0, (size_t)kn);
                    memset(B.sc[r], 0, sizeof B.sc[r]);
                    memset(B.mn[r], 0, sizeof B.mn[r]);
                    memset(B.d[r], 0, sizeof B.d[r]);
                    memset(B.m[r], 0, sizeof B.m[r]);
                }
            }
            qg_tiles(out + n0, ldo, xq, xrb, &B, M, nr, kn / FB, k0 / FB, beta, k0 == 0, FB,
                     SGN, MIN);
        }
    }
}

/* F16 / BF16 weights: GEMM_NR rows at a time widened to f32 (a chunk of K at a time), then
 * the f32 skinny GEMM, whose sums do not depend on the rows beside them. */
static void qg_half(float *out, size_t ldo, const float *x, const simd_qmat *w, int M,
                    float beta, int n_begin, int n_end)
{
    float buf[GEMM_NR * QG_KC] __attribute__((aligned(64)));
    size_t K = (size_t)w->K;
    for (int n0 = n_begin; n0 < n_end; n0 += GEMM_NR) {
        int nr = n_end - n0 < GEMM_NR ? n_end - n0 : GEMM_NR;
        for (size_t k0 = 0; k0 < K; k0 += QG_KC) {
            size_t kn = K - k0 < QG_KC ? K - k0 : QG_KC;
            for (int r = 0; r < nr; r++) {
                const uint16_t *src = (const uint16_t *)((const char *)w->data +
                                                         (size_t)(n0 + r) * w->row_bytes) + k0;
                float *dst = buf + (size_t)r * kn;
                if (w->type == QT_F16) {
                    for (size_t i = 0; i < kn; i += VW)
                        st(dst + i, ld_h(src + i, LANES(i, kn)), LANES(i, kn));
                } else {
                    for (size_t i = 0; i < kn; i++) {
                        uint32_t bits = (uint32_t)src[i] << 16;
                        memcpy(dst + i, &bits, sizeof bits);
                    }
                }
            }
            vec_gemm_nt(out + n0, ldo, x + k0, K, buf, M, nr, (int)kn, k0 == 0 ? beta : 1.0f, 0,
                        nr);
        }
    }
}

static void vec_qgemm(float *out, size_t ldo, const void *xq, const simd_qmat *w, int M,
                      float beta, int n_begin, int n_end)
{
    switch (w->type) {
    case QT_F32:
        vec_gemm_nt(out, ldo, xq, (size_t)w->K, w->data, M, w->N, w->K, beta, n_begin, n_end);
        break;
    case QT_F16:
    case QT_BF16:
        qg_half(out, ldo, xq, w, M, beta, n_begin, n_end);
        break;
    case QT_Q8_0:
    case QT_IQ4_NL:
        qg_run(out, ldo, xq, w, M, beta, n_begin, n_end, QK_32, 1, QG_MIN_NONE);
        break;
    case QT_Q4_0:
    case QT_Q4_1:
    case QT_Q5_0:
    case QT_Q5_1:
        qg_run(out, ldo, xq, w, M, beta, n_begin, n_end, QK_32, 0, QG_MIN_FLOAT);
        break;
    case QT_Q2_K:
    case QT_Q4_K:
    case QT_Q5_K:
        qg_run(out, ldo, xq, w, M, beta, n_begin, n_end, QK_K, 0, QG_MIN_DMIN);
        break;
    case QT_Q3_K:
    case QT_Q6_K:
        qg_run(out, ldo, xq, w, M, beta, n_begin, n_end, QK_K, 0, QG_MIN_SAME_D);
        break;
    case QT_IQ4_XS:
        qg_run(out, ldo, xq, w, M, beta, n_begin, n_end, QK_K, 1, QG_MIN_NONE);
        break;
    default:
        break;
    }
}
