/* kv_q8.c: q8_0 rows for the KV cache (int8 values, one f16 scale per 32), the plain C
 * every instruction set's stores and the attention kernels' reads agree with. */
#include <math.h>

#include "simd_internal.h"

void simd_kv_q8_quantize(int8_t *q, uint16_t *scales, const float *x, int n)
{
    for (int g0 = 0; g0 < n; g0 += SIMD_KV_Q8_GROUP) {
        int g1 = g0 + SIMD_KV_Q8_GROUP < n ? g0 + SIMD_KV_Q8_GROUP : n;
        float amax = 0.0f;
        for (int d = g0; d < g1; d++)
            amax = fabsf(x[d]) > amax ? fabsf(x[d]) : amax; /* NaN never wins */
        float scale = amax / 127.0f;
        float inv = scale > 0.0f ? 1.0f / scale : 0.0f; /* an infinite max gives zeros */
        for (int d = g0; d < g1; d++) {
            float v = fminf(fmaxf(x[d] * inv, -127.0f), 127.0f); /* NaN becomes -127 */
            q[d] = (int8_t)lrintf(v);
        }
        scales[g0 / SIMD_KV_Q8_GROUP] = simd_f32_to_f16_scalar(scale);
    }
}

void simd_kv_q8_dequantize(float *out, const int8_t *q, const uint16_t *scales, int n)
{
    for (int d = 0; d < n; d++)
        out[d] = (float)q[d] * simd_f16_to_f32_scalar(scales[d / SIMD_KV_Q8_GROUP]);
}
