/* kv_half.c: f32 <-> IEEE binary16 conversion for f16 pools, in plain C. The SIMD
 * engineer's F16C / NEON version can replace these two functions as they are. */
#include <string.h>

#include "kv/kv.h"

static uint16_t f32_to_f16_one(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;

    if (exp == 0xffu) /* inf or nan (keep a quiet nan) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) /* overflow -> inf */
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++; /* round to nearest even; a carry into the exponent is still correct */
    return (uint16_t)(sign | half);
}

static float f16_to_f32_one(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;

    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    } else if (man == 0) {
        x = sign;
    } else { /* subnormal: normalize */
        int32_t e = -14;
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        man &= 0x3ffu;
        x = sign | ((uint32_t)(e + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

void kv_f32_to_f16(uint16_t *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f32_to_f16_one(in[i]);
}

void kv_f16_to_f32(float *out, const uint16_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f16_to_f32_one(in[i]);
}
