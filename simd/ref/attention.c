/* attention.c: reference paged attention, one query head and row at a time, one pass
 * with an online (running-max) softmax, over all earlier positions or a sliding window
 * (within a span of the context); and the merge of a row's spans, which every kernel set
 * shares. */
#include <math.h>
#include <string.h>

#include "simd_internal.h"

/* Element d of the K (or V, by offset) row of kv head g at position t. */
static float kv_at(const simd_kv_view *kv, size_t offset, int g, int t, int d, int head_dim)
{
    size_t run = (size_t)kv->block_table[t / TS_KV_BLOCK] * kv->block_stride + offset +
                 (size_t)g * kv->head_stride;
    size_t i = run + (size_t)(t % TS_KV_BLOCK) * head_dim + d;
    if (kv->type == SIMD_KV_Q8_0) { /* the row's scales follow the run's values */
        const uint8_t *p = kv->pool;
        uint16_t h;
        memcpy(&h, p + run + (size_t)TS_KV_BLOCK * head_dim +
                       ((size_t)(t % TS_KV_BLOCK) * SIMD_KV_Q8_GROUPS(head_dim) +
                        (size_t)d / SIMD_KV_Q8_GROUP) * 2,
               sizeof h);
        return (float)(int8_t)p[i] * simd_f16_to_f32_scalar(h);
    }
    if (kv->type == SIMD_KV_F16)
        return simd_f16_to_f32_scalar(((const uint16_t *)kv->pool)[i]);
    return ((const float *)kv->pool)[i];
}

void simd_ref_attention(float *out, const float *q, const simd_kv_view *kv,
                        const simd_attn_shape *shape, int head_begin, int head_end)
{
    /* q (n_rows, q_stride), out (n_rows, out_stride), each holding (n_heads, head_dim) */
    int hd = shape->head_dim;
    int group = shape->n_heads / shape->n_kv_heads;
    float scale = shape->scale > 0.0f ? shape->scale : 1.0f / sqrtf((float)hd);
    float cap = shape->softcap;
    for (int h = head_begin; h < head_end; h++) {
        int g = h / group;
        for (int j = 0; j < shape->n_rows; j++) {
            const float *qh = q + (size_t)j * shape->q_stride + (size_t)h * hd;
            float *o = out + (size_t)j * shape->out_stride + (size_t)h * hd;
            for (int d = 0; d < hd; d++)
                o[d] = 0.0f;
            float m = -INFINITY, l = 0.0f;
            int first, last;
            simd_attn_positions(shape, j, &first, &last);
            float *lse = shape->lse ? shape->lse + (size_t)j * shape->n_heads + h : NULL;
            if (first > last) { /* no position in the span: a zero row */
                if (lse)
                    *lse = -INFINITY;
                continue;
            }
            for (int t = first; t <= last; t++) {
                float s = 0.0f;
                for (int d = 0; d < hd; d++)
                    s += qh[d] * kv_at(kv, kv->k_offset, g, t, d, hd);
                s *= scale;
                if (cap > 0.0f)
                    s = cap * tanhf(s / cap);
                float m_new = s > m ? s : m;
                float alpha = expf(m - m_new), p = expf(s - m_new);
                l = l * alpha + p;
                for (int d = 0; d < hd; d++)
                    o[d] = o[d] * alpha + p * kv_at(kv, kv->v_offset, g, t, d, hd);
                m = m_new;
            }
            for (int d = 0; d < hd; d++)
                o[d] /= l;
            if (lse)
                *lse = m + logf(l);
        }
    }
}

void simd_attn_merge(float *out, const float *parts, const float *lse, int n_parts,
                     int n_heads, int head_dim, int head_begin, int head_end)
{
    size_t row = (size_t)n_heads * head_dim;
    for (int h = head_begin; h < head_end; h++) {
        float top = -INFINITY;
        for (int p = 0; p < n_parts; p++)
            top = lse[(size_t)p * n_heads + h] > top ? lse[(size_t)p * n_heads + h] : top;
        float *o = out + (size_t)h * head_dim;
        for (int d = 0; d < head_dim; d++)
            o[d] = 0.0f;
        float sum = 0.0f;
        for (int p = 0; p < n_parts; p++) {
            float l = lse[(size_t)p * n_heads + h];
            if (l == -INFINITY)
                continue; /* a span with none of the row's positions */
            float w = expf(l - top);
            const float *x = parts + (size_t)p * row + (size_t)h * head_dim;
            for (int d = 0; d < head_dim; d++)
                o[d] += w * x[d];
            sum += w;
        }
        float inv = 1.0f / sum;
        for (int d = 0; d < head_dim; d++)
            o[d] *= inv;
    }
}
