/* qgemm.c: the reference activation quantization and quantized GEMM, one output and one
 * block at a time in plain C: the twin every ISA's qgemm is tested against. */
#include "qunpack.h"

static void ref_quantize_row(void *out, const float *x, int K, qact a)
{
    float r[QK_K];
    if (a == QACT_F32) {
        memcpy(out, x, sizeof(float) * (size_t)K);
        return;
    }
    int bs = a == QACT_Q8_32 ? QK_32 : QK_K;
    for (int b = 0; b < K / bs; b++) {
        const float *xb = x + (size_t)b * bs;
        float amax = 0.0f, inv;
        for (int i = 0; i < bs; i++)
            amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
        float dq = qg_act_scale(amax, &inv);
        for (int i = 0; i < bs; i++)
            r[i] = rintf(xb[i] * inv); /* the default rounding: to nearest, ties to even */
        if (a == QACT_Q8_32) {
            qa_q8_32 *o = (qa_q8_32 *)out + b;
            o->d = dq;
            o->sum = qg_act_store(o->qs, r, bs);
        } else {
            qa_q8_k *o = (qa_q8_k *)out + b;
            o->d = dq;
            memset(o->pad, 0, sizeof o->pad);
            for (int j = 0; j < QK_K / 16; j++)
                o->bsums[j] = (int16_t)qg_act_store(o->qs + 16 * j, r + 16 * j, 16);
            qa_q8_k_sums32(o);
        }
    }
}

void simd_ref_quantize_act(void *out, const float *x, size_t lda, int M, int K, qact a)
{
    /* x (M, lda); row m of out at out + m * qact_row_bytes(a, K) */
    size_t rb = qact_row_bytes(a, K);
    for (int m = 0; m < M; m++)
        ref_quantize_row((char *)out + (size_t)m * rb, x + (size_t)m * lda, K, a);
}

/* One output: weight row w (nb blocks of type) . activation row xa. */
static float ref_dot_q(const void *w, uint32_t type, int nb, const void *xa)
{
    qg_traits t = qg_traits_of(type);
    const qtype_info *info = qtype_get(type);
    int8_t q[QK_K];
    int16_t sc[16] = {0}, mn[16] = {0};
    float d[QK_K / QK_32] = {0}, m[QK_K / QK_32] = {0};
    float acc = 0.0f;
    for (int b = 0; b < nb; b++) {
        qg_unpack(q, sc, mn, d, m, (const char *)w + (size_t)b * info->block_bytes, type, 1);
        if (t.fblk == QK_32) {
            const qa_q8_32 *a = (const qa_q8_32 *)xa + b;
            int isum = 0;
            for (int i = 0; i < QK_32; i++)
                isum += q[i] * a->qs[i];
            acc += d[0] * a->d * (float)isum;
            if (t.min == QG_MIN_FLOAT)
                acc += m[0] * qa32_s(a);
        } else {
            const qa_q8_k *a = (const qa_q8_k *)xa + b;
            int isum = 0, imin = 0;
            for (int i = 0; i < QK_K; i++)
                isum += sc[i / 16] * q[i] * a->qs[i];
            for (int j = 0; j < QK_K / 16; j++)
                imin += mn[j] * a->bsums[j];
            if (t.min == QG_MIN_SAME_D)
                isum -= imin;
            acc += d[0] * a->d * (float)isum;
            if (t.min == QG_MIN_DMIN)
                acc -= m[0] * a->d * (float)imin;
        }
    }
    return acc;
}

static float ref_half(uint16_t h, uint32_t type)
{
    if (type == QT_F16)
        return simd_f16_to_f32_scalar(h);
    uint32_t bits = (uint32_t)h << 16; /* bf16: the high half of an f32 */
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void simd_ref_qgemm(float *out, size_t ldo, const void *xq, const simd_qmat *w, int M,
                    float beta, int n_begin, int n_end)
{
    /* out (M, ldo); xq M rows of qact_row_bytes(act, K); w (N, K) in its blocks */
    int K = w->K;
    if (w->type == QT_F32) {
        simd_ref_gemm_nt(out, ldo, xq, (size_t)K, w->data, M, w->N, K, beta, n_begin, n_end);
        return;
    }
    const qtype_info *info = qtype_get(w->type);
    size_t rb = qact_row_bytes(info->act, K);
    for (int m = 0; m < M; m++) {
        const void *xa = (const char *)xq + (size_t)m * rb;
        for (int n = n_begin; n < n_end; n++) {
            const void *wr = (const char *)w->data + (size_t)n * w->row_bytes;
            float s = 0.0f;
            if (w->type == QT_F16 || w->type == QT_BF16) {
                for (int k = 0; k < K; k++)
                    s += ((const float *)xa)[k] * ref_half(((const uint16_t *)wr)[k], w->type);
            } else {
                s = ref_dot_q(wr, w->type, K / (int)info->block_elems, xa);
            }
            float *o = out + (size_t)m * ldo + n;
            *o = beta == 0.0f ? s : s + beta * *o; /* beta 0 never reads out */
        }
    }
}
