/* vec_qdirect.h: what the direct tile of vec_qgemm.h (1-4 activation rows) unpacks
 * straight from a file's blocks into registers: which types it takes, and each type's
 * values and scales in the buffered tile's form (qunpack.h), so both give the same bits.
 * Included by vec_qgemm.h, after its vocabulary. */

/* With few activation rows, unpacking into the buffer and reading it back costs more than
 * the multiplications: the direct tile unpacks each block of the file into registers as it
 * multiplies it, streaming every weight row once from start to end. It forms the same
 * integer lanes and runs the same float operations per output as the buffered tile, so a
 * row's result is the same bits whichever path M takes. The 32-element types need only
 * the common vocabulary; the 256-element ones the direct set (QG_DIRECT). */
static inline int qg_direct_type(uint32_t type)
{
    switch (type) {
    case QT_Q8_0:
    case QT_Q4_0:
    case QT_Q4_1:
    case QT_IQ4_NL:
        return 1;
#ifdef QG_DIRECT
    case QT_Q4_K:
    case QT_Q5_K:
    case QT_Q6_K:
        return 1;
#endif
    default:
        return 0;
    }
}

/* The values of a 32-element block x of type T, as qg_values_block stores them. */
ALWAYS_INLINE QI qg_values32(const void *x, const uint32_t T)
{
    switch (T) {
    case QT_Q8_0:
        return qi_load(((const qb_q8_0 *)x)->qs);
    case QT_Q4_0:
        return qi_nibbles16(((const qb_q4_0 *)x)->qs);
    case QT_Q4_1:
        return qi_nibbles16(((const qb_q4_1 *)x)->qs);
    default: /* QT_IQ4_NL */
        return qi_iq4(qi_nibbles16(((const qb_iq4_nl *)x)->qs));
    }
}

/* d and m of a 32-element block x of type T, as qg_scales_block gives them. */
ALWAYS_INLINE void qg_scales32(const void *x, const uint32_t T, float *d, float *m)
{
    uint16_t h[2];
    memcpy(h, x, T == QT_Q4_1 ? 4 : 2);
    *d = qg_h(h[0]);
    *m = T == QT_Q4_1 ? qg_h(h[1]) : T == QT_Q4_0 ? -8.0f * *d : 0.0f;
}

#ifdef QG_DIRECT
/* One weight row's 256-element block as the tile multiplies it: the 16 sub-block scales
 * and minimum multipliers, d and m, as qg_scales_block unpacks them. */
typedef struct qg_kscales {
    QSC sc, mn;
    float d, m;
} qg_kscales;

ALWAYS_INLINE qg_kscales qg_kscales_of(const void *x, const uint32_t T)
{
    qg_kscales k;
    if (T == QT_Q6_K) {
        const qb_q6_k *y = x;
        k.sc = qsc_i8(y->scales);
        k.mn = qsc_shl(k.sc, 5); /* 32 * scale */
        k.d = qg_h(y->d), k.m = 0.0f;
        return k;
    }
    const qb_q4_k *y = x; /* Q5_K: d, dmin and scales at the same offsets */
    uint32_t u[3]; /* the 6-bit fields as in qg_scales_block, eight bytes each */
    memcpy(u, y->scales, sizeof u);
    uint64_t sv = (uint64_t)(u[0] & 0x3f3f3f3fu) |
                  (uint64_t)((u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4) << 32;
    uint64_t mv = (uint64_t)(u[1] & 0x3f3f3f3fu) |
                  (uint64_t)(((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4) << 32;
    k.sc = qsc_pairs(sv), k.mn = qsc_pairs(mv);
    k.d = qg_h(y->d), k.m = qg_h(y->dmin);
    return k;
}

/* Elements QG_KW * g .. of 256-element block x of type T, as qg_values_block stores them. */
ALWAYS_INLINE QIW qg_kvalues(const void *x, const uint32_t T, int g)
{
    _Static_assert(QG_KW == 64, "the direct set unpacks 64 elements at a time");
    if (T == QT_Q6_K) { /* half h: low nibbles of ql, then high; two bits of qh each */
        const qb_q6_k *y = x;
        int h = g / 2, q = g % 2;
        QIW lo = qiw_bits(qiw_load_u(y->ql + 64 * h), 4 * q, 0xF);
        return qiw_or(lo, qiw_shl(qiw_dup_bits(y->qh + 32 * h, 4 * q, 4 * q + 2, 3), 4));
    }
    const uint8_t *qs = T == QT_Q4_K ? ((const qb_q4_k *)x)->qs : ((const qb_q5_k *)x)->qs;
    QIW v = qiw_dup_bits(qs + 32 * g, 0, 4, 0xF);
    if (T == QT_Q5_K)
        v = qiw_or(v, qiw_shl(qiw_dup_bits(((const qb_q5_k *)x)->qh, 2 * g, 2 * g + 1, 1), 4));
    return v;
}
#endif

