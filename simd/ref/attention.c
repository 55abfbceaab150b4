/* attention.c: reference paged attention, one query head and row at a time, one pass
 * with an online (running-max) softmax, over all earlier positions or a sliding window. */
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
            int last = shape->pos0 + j, first = 0;
            if (shape->window > 0 && last - shape->window + 1 > 0)
                first = last - shape->window + 1;
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
        }
    }
}
