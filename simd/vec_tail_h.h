/* vec_tail_h.h: partial f16 loads and stores and partial int8 loads through a stack
 * buffer, for vector sets without masked moves of those (AVX2, NEON). Include after
 * defining V, VW, v_load_h, v_store_h and v_load_i8. */
#ifndef TESSERA_SIMD_VEC_TAIL_H_H
#define TESSERA_SIMD_VEC_TAIL_H_H

#include <string.h>

/* The first n (< VW) halves at p, zeros after. */
static inline V v_loadn_h(const uint16_t *p, size_t n)
{
    uint16_t t[VW] = {0};
    memcpy(t, p, n * sizeof *p);
    return v_load_h(t);
}

/* Stores the first n (< VW) lanes of v at p as halves; nothing past them. */
static inline void v_storen_h(uint16_t *p, V v, size_t n)
{
    uint16_t t[VW];
    v_store_h(t, v);
    memcpy(p, t, n * sizeof *p);
}

/* The first n (< VW) int8 values at p as f32 lanes, zeros after. */
static inline V v_loadn_i8(const int8_t *p, size_t n)
{
    int8_t t[VW] = {0};
    memcpy(t, p, n);
    return v_load_i8(t);
}

#endif
