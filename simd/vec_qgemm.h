/* vec_qgemm.h: activation quantization and the quantized GEMM in the vector vocabulary
 * plus a small int8 dot-product vocabulary; included by vec_kernels.h after vec_gemm.h.
 * Each ISA file defines, besides the float vocabulary:
 *   QI qi_load(const int8_t *p)             32 int8
 *   QW qw_prep(QI w, sgn)                   a weight vector made ready for qs_dot (once per
 *                                           weight row and group, reused for every activation row)
 *   QS qs_zero() qs_sub(a, b)               int32 lanes
 *   QS qs_dot(QS acc, QW w, QI a, sgn)      acc + w . a spread over lanes (sgn: w may be
 *                                           negative, else 0 <= w <= 63)
 *   QC qc_make(const int16_t *sc)           the scales of elements 0..15 and 16..31 (sc[0], sc[1])
 *                                           in the form qs_dot_sc multiplies by
 *   QS qs_dot_sc(acc, w, a, QC c, sgn)      the same as qs_dot, each product times its scale
 *   QS qs_mins(const int16_t *mn, const int16_t *bs)   16 products mn[j] * bs[j] over lanes
 *   QF qf_zero() qf_fma(QF acc, float x, QS s) = acc + x * float(s)   float qf_reduce(QF)
 *   qi_store(int8_t *p, QI) qi_or(a, b)     the unpacking helpers: 32 int8 at p;
 *   QI qi_nibbles16(const uint8_t *p)       16 bytes' low nibbles then their high nibbles
 *   QI qi_load_u(const uint8_t *p)          32 bytes
 *   QI qi_bits(QI v, s, mask)               (v >> s) & mask in each byte
 *   QI qi_shl(QI v, s)                      v << s in each byte, for v < 2^(8 - s)
 *   QI qi_iq4(QI v)                         qt_iq4nl_values[v] for v in 0..15
 *   QG_NR, QG_MR                            the tile: weight rows x activation rows
 * and may define a wider set for the 256-element types (QG_KW elements a vector: QIW QWW
 * QSW QCW QFW, qiw_load qww_prep qcw_make qsw_zero qsw_sub qsw_dot_sc qsw_mins qfw_zero
 * qfw_fma qfw_reduce, as above with qcw_make reading QG_KW / 16 scales); by default the
 * 32-element set.
 *
 * A tile of QG_NR weight rows is unpacked (qunpack.h) once per QG_KC elements of K into a
 * buffer in L1, then multiplied with every activation row, QG_MR at a time. Integer block
 * dots are exact; the float terms of an output are added block by block in K order with
 * the same operations in every tile shape (rows past nr are zero and not stored; each
 * MR instance runs the same per-output sequence), so a row's result does not depend on M
 * or the n range. K past QG_KC is done in chunks fixed by K alone, each chunk's sum added
 * to out. */
#include "qunpack.h"

#ifndef QG_KW
#define QG_KW 32
typedef QI QIW;
typedef QW QWW;
typedef QS QSW;
typedef QC QCW;
typedef QF QFW;
#define qiw_load qi_load
#define qww_prep qw_prep
#define qcw_make qc_make
#define qsw_zero qs_zero
#define qsw_sub qs_sub
#define qsw_dot_sc qs_dot_sc
#define qsw_mins qs_mins
#define qfw_zero qf_zero
#define qfw_fma qf_fma
#define qfw_reduce qf_reduce
#endif

#define QG_KC 2048 /* elements of K unpacked at a time */

typedef struct qg_buf {
    int8_t q[QG_NR][QG_KC];
    int16_t sc[QG_NR][QG_KC / 16];
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
            V vinv = v_set1(inv), lo = v_set1(-127.0f), hi = v_set1(127.0f);
            /* each value rounded, clamped as qg_act_store does and stored; a group's sum
             * (Q8_32's one of 32, Q8_K's bsums of 16) adds integers under 2^24: exact */
            int8_t *qs;
            int32_t *sum32 = NULL;
            int16_t *bsums = NULL;
            if (a == QACT_Q8_32) {
                qa_q8_32 *ob = (qa_q8_32 *)o + b;
                ob->d = dq;
                qs = ob->qs;
                sum32 = &ob->sum;
            } else {
                qa_q8_k *ob = (qa_q8_k *)o + b;
                ob->d = dq;
                memset(ob->pad, 0, sizeof ob->pad);
                qs = ob->qs;
                bsums = ob->bsums;
            }
            int group = sum32 ? QK_32 : 16;
            for (int g = 0; g < bs; g += group) {
                V sum = v_zero();
                for (int i = g; i < g + group; i += VW) {
                    V q = v_min(v_max(v_round(v_mul(v_load(xb + i), vinv)), lo), hi);
                    v_store_i8(qs + i, q);
                    sum = v_add(sum, q);
                }
                if (sum32)
                    *sum32 = (int32_t)v_reduce_add(sum);
                else
                    bsums[g / 16] = (int16_t)v_reduce_add(sum);
            }
            if (bsums)
                qa_q8_k_sums32((qa_q8_k *)o + b);
        }
    }
}

/* ---- unpacking ------------------------------------------------------------------------ */

/* qg_unpack_values (qunpack.h) in the vocabulary for the common types: the same bytes.
 * Block b; type is a constant after inlining. */
ALWAYS_INLINE void qg_values_block(int8_t *restrict q, const void *restrict src, uint32_t type,
                                   int b)
{
    {
        switch (type) {
        case QT_Q8_0:
            qi_store(q + 32 * b, qi_load(((const qb_q8_0 *)src)[b].qs));
            break;
        case QT_Q4_0:
            qi_store(q + 32 * b, qi_nibbles16(((const qb_q4_0 *)src)[b].qs));
            break;
        case QT_Q4_1:
            qi_store(q + 32 * b, qi_nibbles16(((const qb_q4_1 *)src)[b].qs));
            break;
        case QT_IQ4_NL:
            qi_store(q + 32 * b, qi_iq4(qi_nibbles16(((const qb_iq4_nl *)src)[b].qs)));
            break;
        case QT_IQ4_XS:
            for (int g = 0; g < 8; g++)
                qi_store(q + 256 * b + 32 * g,
                         qi_iq4(qi_nibbles16(((const qb_iq4_xs *)src)[b].qs + 16 * g)));
            break;
        case QT_Q2_K:
        case QT_Q3_K: {
            const uint8_t *qs = type == QT_Q2_K ? ((const qb_q2_k *)src)[b].qs : ((const qb_q3_k *)src)[b].qs;
            QI hm = type == QT_Q3_K ? qi_load_u(((const qb_q3_k *)src)[b].hmask) : qi_bits(qi_load_u(qs), 0, 0);
            for (int h = 0; h < 2; h++) {
                QI v = qi_load_u(qs + 32 * h);
                for (int j = 0; j < 4; j++) {
                    QI o = qi_bits(v, 2 * j, 3);
                    if (type == QT_Q3_K)
                        o = qi_or(o, qi_shl(qi_bits(hm, 4 * h + j, 1), 2));
                    qi_store(q + 256 * b + 128 * h + 32 * j, o);
                }
            }
            break;
        }
        case QT_Q4_K:
        case QT_Q5_K: {
            const uint8_t *qs = type == QT_Q4_K ? ((const qb_q4_k *)src)[b].qs : ((const qb_q5_k *)src)[b].qs;
            for (int c = 0; c < 4; c++) {
                QI v = qi_load_u(qs + 32 * c);
                QI lo = qi_bits(v, 0, 0xF), hi = qi_bits(v, 4, 0xF);
                if (type == QT_Q5_K) {
                    QI h = qi_load_u(((const qb_q5_k *)src)[b].qh);
                    lo = qi_or(lo, qi_shl(qi_bits(h, 2 * c, 1), 4));
                    hi = qi_or(hi, qi_shl(qi_bits(h, 2 * c + 1, 1), 4));
                }
                qi_store(q + 256 * b + 64 * c, lo);
                qi_store(q + 256 * b + 64 * c + 32, hi);
            }
            break;
        }
        case QT_Q6_K: {
            const qb_q6_k *x = (const qb_q6_k *)src + b;
            for (int h = 0; h < 2; h++) {
                QI l0 = qi_load_u(x->ql + 64 * h), l1 = qi_load_u(x->ql + 64 * h + 32);
                QI hb = qi_load_u(x->qh + 32 * h);
                int8_t *o = q + 256 * b + 128 * h;
                qi_store(o, qi_or(qi_bits(l0, 0, 0xF), qi_shl(qi_bits(hb, 0, 3), 4)));
                qi_store(o + 32, qi_or(qi_bits(l1, 0, 0xF), qi_shl(qi_bits(hb, 2, 3), 4)));
                qi_store(o + 64, qi_or(qi_bits(l0, 4, 0xF), qi_shl(qi_bits(hb, 4, 3), 4)));
                qi_store(o + 96, qi_or(qi_bits(l1, 4, 0xF), qi_shl(qi_bits(hb, 6, 3), 4)));
            }
            break;
        }
        default:
            qg_unpack_values(q + (size_t)b * qtype_get(type)->block_elems,
                             (const char *)src + (size_t)b * qtype_get(type)->block_bytes, type, 1);
            break;
        }
    }
}

/* The values of nb blocks, the type switch outside the block loop. */
static void qg_values(int8_t *restrict q, const void *restrict src, uint32_t type, int nb)
{
    switch (type) {
#define QG_VALUES(T)                         \
    case T:                                  \
        for (int b = 0; b < nb; b++)         \
            qg_values_block(q, src, T, b);   \
        break;
        QG_VALUES(QT_Q8_0)
        QG_VALUES(QT_Q4_0)
        QG_VALUES(QT_Q4_1)
        QG_VALUES(QT_IQ4_NL)
        QG_VALUES(QT_IQ4_XS)
        QG_VALUES(QT_Q2_K)
        QG_VALUES(QT_Q3_K)
        QG_VALUES(QT_Q4_K)
        QG_VALUES(QT_Q5_K)
        QG_VALUES(QT_Q6_K)
#undef QG_VALUES
    default:
        qg_unpack_values(q, src, type, nb);
        break;
    }
}

#include "vec_qdirect.h"

/* ---- the tile ------------------------------------------------------------------------- */

/* Where a tile's NR weight rows come from: the unpacked buffer (B, rows r0 ..), or, for the
 * direct tile, the blocks themselves (row r's first block at w[r], bb bytes a block). */
typedef struct qg_src {
    const qg_buf *B;
    int r0;
    const char *w[QG_NR];
    size_t bb;
} qg_src;

#ifndef QG_PF_BYTES
#define QG_PF_BYTES 1024
#endif
/* The direct tile's weight rows QG_PF_BYTES ahead of block b: every line of the block
 * that far on, into L1. */
ALWAYS_INLINE void qg_prefetch(const qg_src *S, const int NR, int b)
{
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
        for (size_t o = 0; o < S->bb; o += 64)
            __builtin_prefetch(S->w[r] + (size_t)b * S->bb + QG_PF_BYTES + o, 0, 3);
}

/* out (MR, ldo) columns [0, nr) += or = NR weight rows . MR activation rows (xrb bytes
 * apart, at xa) over float blocks [fb0, fb0 + nfb) of the row, the weights from S (block
 * 0 of S is float block fb0). first: the chunk at K = 0, which applies beta; later chunks
 * add. FB, SGN, MIN: qg_traits of the type; 256-element blocks have sub-block scales. DT:
 * the type, unpacked directly, or 0 to read the buffer. */
ALWAYS_INLINE void qg_tile(float *out, size_t ldo, const char *xa, size_t xrb, const qg_src *S,
                           int nr, int nfb, int fb0, float beta, int first, const int FB,
                           const int SGN, const int MIN, const int MR, const int NR,
                           const uint32_t DT)
{
    const qg_buf *B = S->B;
    const int r0 = S->r0;
    QF acc[QG_NR][QG_MR];   /* 32-element types */
    QFW accw[QG_NR][QG_MR]; /* 256-element types */
    float fm[QG_NR][QG_MR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            acc[r][i] = qf_zero(), accw[r][i] = qfw_zero(), fm[r][i] = 0.0f;
    if (FB == QK_32) {
        const qa_q8_32 *a[QG_MR];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            a[i] = (const qa_q8_32 *)(xa + (size_t)i * xrb) + fb0;
        for (int b = 0; b < nfb; b++) {
            QW w[QG_NR];
            float d[QG_NR], m[QG_NR];
            if (DT)
                qg_prefetch(S, NR, b);
#pragma GCC unroll 8
            for (int r = 0; r < NR; r++) {
                if (DT) {
                    const char *x = S->w[r] + (size_t)b * S->bb;
                    w[r] = qw_prep(qg_values32(x, DT), SGN);
                    qg_scales32(x, DT, &d[r], &m[r]);
                } else {
                    w[r] = qw_prep(qi_load(B->q[r0 + r] + QK_32 * b), SGN);
                    d[r] = B->d[r0 + r][b], m[r] = B->m[r0 + r][b];
                }
            }
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) {
                QI av = qi_load(a[i][b].qs);
                float da = a[i][b].d, sa = MIN == QG_MIN_FLOAT ? qa32_s(&a[i][b]) : 0.0f;
#pragma GCC unroll 8
                for (int r = 0; r < NR; r++) {
                    acc[r][i] = qf_fma(acc[r][i], d[r] * da, qs_dot(qs_zero(), w[r], av, SGN));
                    if (MIN == QG_MIN_FLOAT)
                        fm[r][i] += m[r] * sa;
                }
            }
        }
    } else {
        const qa_q8_k *a[QG_MR];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            a[i] = (const qa_q8_k *)(xa + (size_t)i * xrb) + fb0;
        for (int b = 0; b < nfb; b++) {
            QSW s[QG_NR][QG_MR], mins[QG_NR][QG_MR];
            float d[QG_NR], m[QG_NR];
            if (DT)
                qg_prefetch(S, NR, b);
#ifdef QG_DIRECT
            qg_kscales ks[QG_NR];
            if (DT)
#pragma GCC unroll 8
                for (int r = 0; r < NR; r++)
                    ks[r] = qg_kscales_of(S->w[r] + (size_t)b * S->bb, DT);
#endif
#pragma GCC unroll 8
            for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
                for (int i = 0; i < MR; i++)
                    s[r][i] = qsw_zero();
#pragma GCC unroll 8
            for (int g = 0; g < QK_K / QG_KW; g++) {
                QWW w[QG_NR];
                QCW c[QG_NR];
#pragma GCC unroll 8
                for (int r = 0; r < NR; r++) {
#ifdef QG_DIRECT
                    if (DT) {
                        w[r] = qww_prep(qg_kvalues(S->w[r] + (size_t)b * S->bb, DT, g), SGN);
                        c[r] = qcw_pick(ks[r].sc, g);
                        continue;
                    }
#endif
                    w[r] = qww_prep(qiw_load(B->q[r0 + r] + QK_K * b + QG_KW * g), SGN);
                    c[r] = qcw_make(B->sc[r0 + r] + 16 * b + QG_KW / 16 * g);
                }
#pragma GCC unroll 8
                for (int i = 0; i < MR; i++) {
                    QIW av = qiw_load(a[i][b].qs + QG_KW * g);
#pragma GCC unroll 8
                    for (int r = 0; r < NR; r++)
                        s[r][i] = qsw_dot_sc(s[r][i], w[r], av, c[r], SGN);
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < NR; r++) {
#ifdef QG_DIRECT
                if (DT) {
                    d[r] = ks[r].d, m[r] = ks[r].m;
                    if (MIN != QG_MIN_NONE)
#pragma GCC unroll 8
                        for (int i = 0; i < MR; i++)
                            mins[r][i] = qsw_mins_r(ks[r].mn, a[i][b].bsums);
                    continue;
                }
#endif
                d[r] = B->d[r0 + r][b], m[r] = B->m[r0 + r][b];
                if (MIN != QG_MIN_NONE)
#pragma GCC unroll 8
                    for (int i = 0; i < MR; i++)
                        mins[r][i] = qsw_mins(B->mn[r0 + r] + 16 * b, a[i][b].bsums);
            }
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
                for (int r = 0; r < NR; r++) {
                    float da = a[i][b].d;
                    QSW si = s[r][i];
                    if (MIN == QG_MIN_SAME_D)
                        si = qsw_sub(si, mins[r][i]);
                    accw[r][i] = qfw_fma(accw[r][i], d[r] * da, si);
                    if (MIN == QG_MIN_DMIN)
                        accw[r][i] = qfw_fma(accw[r][i], -(m[r] * da), mins[r][i]);
                }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        for (int r = 0; r < NR && r < nr; r++) {
            float v = (FB == QK_32 ? qf_reduce(acc[r][i]) : qfw_reduce(accw[r][i])) + fm[r][i];
            float *o = out + (size_t)i * ldo + r;
            *o = !first ? *o + v : beta == 0.0f ? v : v + beta * *o; /* beta 0 never reads out */
        }
}

/* The buffered tile's shape for a type: QG_NR rows for the 32-element types; for the
 * 256-element ones half as many, whose integer and float accumulators (two per output)
 * then fit the registers beside the weights. */
#define QG_NR_OF(FB) ((FB) == QK_32 ? QG_NR : QG_NR / 2)

/* Every activation row against the unpacked buffer, QG_MR rows at a time. */
ALWAYS_INLINE void qg_tiles(float *out, size_t ldo, const char *xq, size_t xrb, const qg_buf *B,
                            int M, int nr, int nfb, int fb0, float beta, int first, const int FB,
                            const int SGN, const int MIN)
{
    const int NR = QG_NR_OF(FB);
    for (int r0 = 0; r0 < nr; r0 += NR) {
        qg_src S = {.B = B, .r0 = r0};
        float *o = out + r0;
        int m0 = 0;
        for (; m0 + QG_MR <= M; m0 += QG_MR)
            qg_tile(o + (size_t)m0 * ldo, ldo, xq + (size_t)m0 * xrb, xrb, &S, nr - r0, nfb, fb0,
                    beta, first, FB, SGN, MIN, QG_MR, NR, 0);
        switch (M - m0) {
#define QG_TAIL(MR)                                                                           \
    case MR:                                                                                  \
        if ((MR) < QG_MR)                                                                     \
            qg_tile(o + (size_t)m0 * ldo, ldo, xq + (size_t)m0 * xrb, xrb, &S, nr - r0, nfb,  \
                    fb0, beta, first, FB, SGN, MIN, MR, NR, 0);                               \
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
                    qg_values(B.q[r], src, w->type, kn / be);
                    qg_unpack_scales(B.sc[r], B.mn[r], B.d[r], B.m[r], src, w->type, kn / be);
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

/* The direct tile over rows [n_begin, n_end) for M <= QG_MR rows, NR weight rows at a
 * time, K in the buffered path's chunks (the same sums). */
ALWAYS_INLINE void qg_run_direct_mr(float *out, size_t ldo, const void *xq, const simd_qmat *w,
                                    float beta, int n_begin, int n_end, const uint32_t T,
                                    const int MR, const int NR)
{
    const qtype_info *info = qtype_get(T);
    const qg_traits t = qg_traits_of(T);
    size_t xrb = qact_row_bytes(info->act, w->K);
    int be = (int)info->block_elems;
    for (int n0 = n_begin; n0 < n_end; n0 += NR) {
        int nr = n_end - n0 < NR ? n_end - n0 : NR;
        for (int k0 = 0; k0 < w->K; k0 += QG_KC) {
            int kn = w->K - k0 < QG_KC ? w->K - k0 : QG_KC;
            qg_src S = {.bb = info->block_bytes};
            for (int r = 0; r < NR; r++) /* rows past the matrix repeat the last; not stored */
                S.w[r] = (const char *)w->data + (size_t)(n0 + (r < nr ? r : nr - 1)) * w->row_bytes +
                         (size_t)(k0 / be) * info->block_bytes;
            qg_tile(out + n0, ldo, xq, xrb, &S, nr, kn / t.fblk, k0 / t.fblk, beta, k0 == 0,
                    t.fblk, t.sgn, t.min, MR, NR, T);
        }
    }
}

#ifndef QG_DNR
#define QG_DNR 1
#endif
#ifndef QG_DNR4
#define QG_DNR4 1
#endif
/* The direct tile's shape: QG_NR weight rows for one or two activation rows, fewer beside
 * more (the accumulators, two per output for the 256-element types, share the registers). */
ALWAYS_INLINE void qg_run_direct(float *out, size_t ldo, const void *xq, const simd_qmat *w, int M,
                                 float beta, int n_begin, int n_end, const uint32_t T)
{
    switch (M) {
#define QG_DIRECT_M(MR)                                                                      \
    case MR:                                                                                 \
        if ((MR) <= QG_MR)                                                                   \
            qg_run_direct_mr(out, ldo, xq, w, beta, n_begin, n_end, T, MR,                   \
                             (MR) <= 2 ? QG_DNR : QG_DNR4);                                 \
        break;
        QG_DIRECT_M(1)
        QG_DIRECT_M(2)
        QG_DIRECT_M(3)
        QG_DIRECT_M(4)
#undef QG_DIRECT_M
    default:
        break;
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
    _Static_assert(QG_MR <= 4, "qg_run_direct takes 1-4 rows");
    if (M <= QG_MR && qg_direct_type(w->type)) {
        switch (w->type) { /* the type a constant in each */
#define QG_DIRECT_T(T)                                                  \
    case T:                                                             \
        qg_run_direct(out, ldo, xq, w, M, beta, n_begin, n_end, T);     \
        return;
            QG_DIRECT_T(QT_Q8_0)
            QG_DIRECT_T(QT_Q4_0)
            QG_DIRECT_T(QT_Q4_1)
            QG_DIRECT_T(QT_IQ4_NL)
#ifdef QG_DIRECT
            QG_DIRECT_T(QT_Q4_K)
            QG_DIRECT_T(QT_Q5_K)
            QG_DIRECT_T(QT_Q6_K)
#endif
#undef QG_DIRECT_T
        default:
            break;
        }
    }
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
