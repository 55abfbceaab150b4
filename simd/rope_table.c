/* rope_table.c: the cos/sin terms of RoPE for the positions of a step, shared by every
 * kernel table. */
#include <math.h>

#include "simd.h"

void simd_rope_table(float *table, const int32_t *pos, int rows, int head_dim, const float *freq,
                     simd_rope_style style)
{
    int half = head_dim / 2;
    for (int r = 0; r < rows; r++) {
        float *tc = table + (size_t)r * SIMD_ROPE_TABLE_FLOATS(head_dim), *ts = tc + head_dim;
        for (int i = 0; i < half; i++) {
            float val = pos[r] * freq[i];
            float c = cosf(val), s = sinf(val);
            if (style == SIMD_ROPE_NEOX) {
                tc[i] = c;
                ts[i] = s;
            } else { /* interleaved so that out = x * tc + swap_pairs(x) * ts */
                tc[2 * i] = tc[2 * i + 1] = c;
                ts[2 * i] = -s;
                ts[2 * i + 1] = s;
            }
        }
    }
}
