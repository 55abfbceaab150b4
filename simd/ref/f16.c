/* f16.c: scalar IEEE binary16 <-> binary32 conversion, the reference for F16C/NEON. */
#include <string.h>

#include "simd_internal.h"

uint16_t simd_f32_to_f16_scalar(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf stays inf; NaN is quieted, top payload bits kept */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
    if (absx >= 0x477ff000u) /* at or past the midpoint above 65504: rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absx < 0x38800000u) { /* below 2^-14: a half subnormal (or zero) */
        uint32_t e = absx >> 23;
        if (e < 102) /* below 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* value in units of 2^-24 is mant >> shift */
        uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t h = (absx - 0x38000000u) >> 13; /* rebias the exponent from 127 to 15 */
    uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is the right answer */
    return (uint16_t)(sign | h);
}

float simd_f16_to_f32_scalar(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0) {
        float f = (float)m * 0x1p-24f; /* zero or subnormal, exact */
        return sign ? -f : f;
    }
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else
        x = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
