/* quant_internal.h: the scale searches the row quantizers share: one block on a grid of
 * levels (uniform integers or IQ4's 16 values), with or without an offset, and the
 * two-level super-blocks of the K types whose sub-block scales are themselves integers. */
#ifndef TESSERA_QUANT_INTERNAL_H
#define TESSERA_QUANT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* The levels a block's values are rounded to, in units of the block's scale: index i
 * stands for lo + i (uniform), or for vals[i] (a sorted codebook of n values). */
typedef struct quant_grid {
    int n;
    float lo;
    const int8_t *vals;
    float mid[16];     /* codebook: midpoints between neighbours */
    uint8_t near[256]; /* codebook: the level nearest c, for c in [-128, 127] at [c + 128] */
} quant_grid;

void quant__grid_uniform(quant_grid *g, int qmin, int qmax);
void quant__grid_codebook(quant_grid *g, const int8_t *vals, int n);

/* Rounds each x[i] / s to the nearest level (q, len indices); returns the squared error. */
float quant__grid_round(uint8_t *q, const float *x, int len, float s, const quant_grid *g);

/* Symmetric block: x[i] ~ d * value(q[i]). Searches d (either sign) for the least squared
 * error; writes the indices q (n) and d; returns the error. */
float quant__fit_sym(uint8_t *q, float *d, const float *x, int n, const quant_grid *g);

/* Affine block: x[i] ~ a * q[i] + b with q in [0, nmax] and a >= 0; b <= 0 when
 * b_nonpos (the K types subtract a non-negative minimum). Returns the error. */
float quant__fit_affine(uint8_t *q, float *a, float *b, const float *x, int n, int nmax,
                        bool b_nonpos);

/* A super-block of n_sub sub-blocks of len values, x ~ d * sc[k] * value(q) with integer
 * sub-block scales sc in [smin, smax] and d an f16 (*d is its decoded value). */
float quant__ksym(uint8_t *q, int *sc, float *d, const float *x, int n_sub, int len,
                  const quant_grid *g, int smin, int smax);

/* A super-block x ~ d * sc[k] * q - dmin * mn[k] with q in [0, nmax], sc and mn in
 * [0, smax], d and dmin f16s (*d, *dmin are their decoded values). */
float quant__kaffine(uint8_t *q, int *sc, int *mn, float *d, float *dmin, const float *x,
                     int n_sub, int len, int nmax, int smax);

/* f32 to the nearest f16 and back: the value an f16 field will decode to. */
float quant__f16_round(float x);

#endif /* TESSERA_QUANT_INTERNAL_H */
