/* amx_emu.h: a plain-C emulation of the AMX tile instructions the int8 kernels use
 * (palette 1: LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TDPBSUD, TDPBSSD, TILERELEASE),
 * checking the configuration each instruction needs (tile sizes, the A / B / C shapes
 * agreeing).
 * Include after immintrin.h and before the kernels' sources: it replaces the intrinsics
 * with macros. The including program defines emu_t and emu_errors. */
#ifndef TESSERA_TESTS_AMX_EMU_H
#define TESSERA_TESTS_AMX_EMU_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct emu_tiles {
    int configured;
    int rows[8], colsb[8];
    uint8_t t[8][16][64];
} emu_tiles;
extern _Thread_local emu_tiles emu_t;
extern int emu_errors;

static inline void emu_fail(const char *what, int a, int b)
{
    fprintf(stderr, "AMX-EMU: %s (%d, %d)\n", what, a, b);
    emu_errors++;
}

static inline void emu_loadconfig(const void *cfg)
{
    const uint8_t *c = cfg;
    if (c[0] != 1) emu_fail("palette", c[0], 0);
    for (int i = 2; i < 16; i++) if (c[i]) emu_fail("reserved byte set", i, c[i]);
    for (int i = 0; i < 8; i++) {
        uint16_t cb; memcpy(&cb, c + 16 + 2 * i, 2);
        emu_t.colsb[i] = cb; emu_t.rows[i] = c[48 + i];
        if (cb > 64 || c[48 + i] > 16) emu_fail("tile too large", i, cb);
    }
    memset(emu_t.t, 0, sizeof emu_t.t);
    emu_t.configured = 1;
}
static inline void emu_release(void) { memset(&emu_t, 0, sizeof emu_t); }
static inline void emu_check(int t) { if (!emu_t.configured || emu_t.rows[t] == 0 || emu_t.colsb[t] == 0) emu_fail("tile not configured", t, 0); }
static inline void emu_zero(int t) { emu_check(t); memset(emu_t.t[t], 0, sizeof emu_t.t[t]); }
static inline void emu_loadd(int t, const void *base, long stride)
{
    emu_check(t);
    memset(emu_t.t[t], 0, sizeof emu_t.t[t]);
    for (int r = 0; r < emu_t.rows[t]; r++)
        memcpy(emu_t.t[t][r], (const uint8_t *)base + r * stride, emu_t.colsb[t]);
}
static inline void emu_stored(int t, void *base, long stride)
{
    emu_check(t);
    for (int r = 0; r < emu_t.rows[t]; r++)
        memcpy((uint8_t *)base + r * stride, emu_t.t[t][r], emu_t.colsb[t]);
}
/* C[m][n] += sum_k sum_i (int8)A[m][4k+i] * B[k][4n+i], B's bytes int8 (b_signed:
 * TDPBSSD) or uint8 (TDPBSUD) */
static inline void emu_dpbs(int c, int a, int b, int b_signed)
{
    emu_check(c), emu_check(a), emu_check(b);
    int K = emu_t.colsb[a] / 4, N = emu_t.colsb[c] / 4;
    if (emu_t.rows[b] != K) emu_fail("B rows != A colsb / 4", emu_t.rows[b], K);
    if (emu_t.colsb[b] != emu_t.colsb[c]) emu_fail("B colsb != C colsb", emu_t.colsb[b], emu_t.colsb[c]);
    if (emu_t.rows[a] != emu_t.rows[c]) emu_fail("A rows != C rows", emu_t.rows[a], emu_t.rows[c]);
    for (int m = 0; m < emu_t.rows[c]; m++)
        for (int n = 0; n < N; n++) {
            int32_t acc;
            memcpy(&acc, &emu_t.t[c][m][4 * n], 4);
            for (int k = 0; k < K; k++)
                for (int i = 0; i < 4; i++) {
                    uint8_t w = emu_t.t[b][k][4 * n + i];
                    acc += (int32_t)(int8_t)emu_t.t[a][m][4 * k + i] *
                           (b_signed ? (int32_t)(int8_t)w : (int32_t)w);
                }
            memcpy(&emu_t.t[c][m][4 * n], &acc, 4);
        }
}
#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbsud
#undef _tile_dpbssd
#define _tile_loadconfig emu_loadconfig
#define _tile_release emu_release
#define _tile_loadd(t, base, stride) emu_loadd(t, base, stride)
#define _tile_stored(t, base, stride) emu_stored(t, base, stride)
#define _tile_zero(t) emu_zero(t)
#define _tile_dpbsud(c, a, b) emu_dpbs(c, a, b, 0)
#define _tile_dpbssd(c, a, b) emu_dpbs(c, a, b, 1)
#endif
