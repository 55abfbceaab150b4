/* kv_half.c: f32 <-> IEEE binary16 conversion for f16 pools: the SIMD library's plain-C
 * reference (the engine hands the pool its best table's instead, kv_config.to_f16; both
 * round to nearest even, so the bits are the same). */
#include "kv/kv.h"
#include "simd.h"

void kv_f32_to_f16(uint16_t *out, const float *in, size_t n)
{
    simd_kernels_for(SIMD_ISA_REF)->f32_to_f16(out, in, n);
}

void kv_f16_to_f32(float *out, const uint16_t *in, size_t n)
{
    simd_kernels_for(SIMD_ISA_REF)->f16_to_f32(out, in, n);
}
