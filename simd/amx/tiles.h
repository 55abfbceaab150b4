/* tiles.h: the tile configuration and the units' prefetch of the AMX kernels (int8,
 * qgemm_amx.c and tiles_split.h, and bf16, qgemm_amx_bf16.c); their output rows go out
 * with qp_store_rows (qpack_x86.h). */
#ifndef TESSERA_SIMD_AMX_TILES_H
#define TESSERA_SIMD_AMX_TILES_H

#include <immintrin.h>
#include <string.h>

#include "../qpack_x86.h"

typedef struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

/* Tiles of a 2 x 2 block: C[i][h] = 2i + h (activation tile i, weight group h), A[i] =
 * 4 + i, B[h] = 6 + h. Activation tile i has mr[i] rows (0: unused) of a_bytes bytes; B
 * has a_bytes / 4 rows of 64 bytes (the VNNI order of 4 int8 or 2 bf16 per int32). */
static inline void tiles_config(const int mr[2], int a_bytes)
{
    tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 2; i++) {
        int rows = mr[i] > 0 ? mr[i] : 1;
        c.rows[2 * i] = c.rows[2 * i + 1] = c.rows[4 + i] = (uint8_t)rows;
        c.colsb[2 * i] = c.colsb[2 * i + 1] = QP_ROWS * 4;
        c.colsb[4 + i] = (uint16_t)a_bytes;
        c.rows[6 + i] = (uint8_t)(a_bytes / 4);
        c.colsb[6 + i] = QP_ROWS * 4;
    }
    _tile_loadconfig(&c);
}

/* The unit QP_PF bytes after unit, asked for as a kernel starts on unit. */
static inline void tiles_prefetch(const simd_qpack *p, const uint8_t *unit)
{
    for (size_t off = 0; off < p->unit_bytes; off += 64)
        qp_prefetch(unit + off);
}

#endif
