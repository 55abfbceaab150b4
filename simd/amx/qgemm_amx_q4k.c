/* qgemm_amx_q4k.c: the GEMM on Q4_K packs with AMX int8 tiles, for steps of QP_TILE_MIN_M
 * rows or more, without a fold per sub-block. Each 6-bit sub-block scale is split as
 * sc = 8 sh + sl (sh, sl <= 7), and a unit's weights u (<= 15) become two B operands,
 * u sh and u sl (<= 105, unsigned bytes). Over a whole 256-element block, C1 = A . (u sh)
 * and C2 = A . (u sl) then accumulate in tiles (four K = 64 steps each), and 8 C1 + C2 =
 * sum_j sc[j] dot_j: the block's integer sum, exactly, as the vector kernel forms it. The
 * float terms are added with qp_f32_row: the twin's bits.
 *
 * The products u s are looked up with vpermi2b where the CPU reports AVX-512 VBMI
 * (simd_amx_qpack_gemm_q4k), and formed with two vpmaddubsw elsewhere
 * (simd_amx_qpack_gemm_q4k_bw). Every CPU with AMX has VBMI, but a hypervisor may leave a
 * CPUID bit out; the second costs 40 lines and ran as fast on the benchmark host. Both give
 * the same bytes, so the same sums.
 *
 * Work goes per 16-row weight group: each block's unit is unpacked once into the two B
 * operands (8 KiB), then every pair of 16-row activation tiles runs against it (tiles:
 * C1, C2 of each activation tile, its A, and the two B), its float sums kept per row in
 * acc (up to 256 rows x 16 lanes, on the stack: longer steps go in passes of 256 rows)
 * until the group's last block. */
#include "../qpack_x86.h"
#include "tiles.h"

enum { Q4K_ROWS = 256 }; /* activation rows a pass over the groups: their sums, 16 KiB */

/* S_TIMES_U[s * 16 + u] = s u for s < 8, u < 16: vpermi2b's 128 entries in two registers */
static const _Alignas(64) uint8_t S_TIMES_U[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
    0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45,
    0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60,
    0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75,
    0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90,
    0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 84, 91, 98, 105,
};
/* byte 4n + i of a B-row belongs to weight row n; within each 16-byte lane L (rows 4L ..
 * 4L + 3), vpshufb's index of that row's scale in a copy of the 16 scales */
static const _Alignas(64) uint8_t ROW_OF_BYTE[64] = {
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
    4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
    8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11,
    12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15,
};

typedef uint8_t q4k_bops[2][QK_K / 4][64]; /* b[0] = u sh, b[1] = u sl: 64 B-rows each */
typedef void (*q4k_operands_fn)(const simd_qpack *p, const uint8_t *unit, q4k_bops b);

/* Sub-block j's scales, each byte the scale of its weight row (AVX-512 BW only). */
static inline __m512i q4k_scales(const simd_qpack *p, const uint8_t *unit, int j)
{
    __m128i sc = _mm_loadu_si128((const __m128i *)(unit + p->off_sc + 16 * j));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(sc), _mm512_load_si512(ROW_OF_BYTE));
}

__attribute__((target("avx512vbmi")))
static void q4k_operands_vbmi(const simd_qpack *p, const uint8_t *unit, q4k_bops b)
{
    const __m512i tlo = _mm512_load_si512(S_TIMES_U), thi = _mm512_load_si512(S_TIMES_U + 64);
    __m512i sh[8], sl[8]; /* (sc >> 3) << 4 and (sc & 7) << 4, by sub-block */
    for (int j = 0; j < 8; j++) {
        __m512i sc = q4k_scales(p, unit, j);
        sh[j] = _mm512_and_si512(_mm512_slli_epi16(sc, 1), _mm512_set1_epi8((char)0x70));
        sl[j] = _mm512_and_si512(_mm512_slli_epi16(sc, 4), _mm512_set1_epi8((char)0x70));
    }
    for (int r = 0; r < 32; r++) { /* B-rows r (sub-block r / 8) and r + 32 (4 + r / 8) */
        __m512i lo, hi;
        qp_brows(p, unit, r, &lo, &hi, 4);
        int j = r / 8;
        _mm512_store_si512(b[0][r], _mm512_permutex2var_epi8(tlo, _mm512_or_si512(lo, sh[j]), thi));
        _mm512_store_si512(b[1][r], _mm512_permutex2var_epi8(tlo, _mm512_or_si512(lo, sl[j]), thi));
        _mm512_store_si512(b[0][r + 32],
                           _mm512_permutex2var_epi8(tlo, _mm512_or_si512(hi, sh[j + 4]), thi));
        _mm512_store_si512(b[1][r + 32],
                           _mm512_permutex2var_epi8(tlo, _mm512_or_si512(hi, sl[j + 4]), thi));
    }
}

/* u s byte by byte (u <= 15, s <= 7): vpmaddubsw of u with s kept in the even bytes
 * (se) gives the even products as words, with s kept in the odd bytes (so) the odd ones */
static inline __m512i q4k_times(__m512i u, __m512i se, __m512i so)
{
    return _mm512_or_si512(_mm512_maddubs_epi16(u, se),
                           _mm512_slli_epi16(_mm512_maddubs_epi16(u, so), 8));
}

static void q4k_operands_bw(const simd_qpack *p, const uint8_t *unit, q4k_bops b)
{
    const __m512i even = _mm512_set1_epi16(0x00FF), odd = _mm512_set1_epi16((short)0xFF00);
    for (int j = 0; j < 4; j++) { /* B-rows 8 j .. 8 j + 7 (sub-block j) and 32 more (j + 4) */
        __m512i s[2][2][2]; /* [sub-block j or j + 4][sh or sl][even or odd bytes] */
        for (int h = 0; h < 2; h++) {
            __m512i sc = q4k_scales(p, unit, j + 4 * h);
            __m512i hs = _mm512_and_si512(_mm512_srli_epi16(sc, 3), _mm512_set1_epi8(7));
            __m512i ls = _mm512_and_si512(sc, _mm512_set1_epi8(7));
            s[h][0][0] = _mm512_and_si512(hs, even), s[h][0][1] = _mm512_and_si512(hs, odd);
            s[h][1][0] = _mm512_and_si512(ls, even), s[h][1][1] = _mm512_and_si512(ls, odd);
        }
        for (int r = 8 * j; r < 8 * j + 8; r++) {
            __m512i lo, hi;
            qp_brows(p, unit, r, &lo, &hi, 4);
            for (int k = 0; k < 2; k++) {
                _mm512_store_si512(b[k][r], q4k_times(lo, s[0][k][0], s[0][k][1]));
                _mm512_store_si512(b[k][r + 32], q4k_times(hi, s[1][k][0], s[1][k][1]));
            }
        }
    }
}

/* C1 of activation tile i in tile 2i, C2 in 2i + 1, A in 4 + i, u sh in 6, u sl in 7. */
static void q4k_tiles(const uint8_t *xa, size_t xrow, int nm, q4k_bops b,
                        int32_t cbuf[4][QP_ROWS][QP_ROWS])
{
    _tile_zero(0);
    _tile_zero(1);
    if (nm > 1) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int c = 0; c < 4; c++) { /* K = 64 c .. 64 c + 63: B-rows 16 c .. 16 c + 15 */
        _tile_loadd(4, xa + 64 * c, (long)xrow);
        _tile_loadd(6, b[0][16 * c], 64);
        _tile_loadd(7, b[1][16 * c], 64);
        _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
        if (nm > 1) {
            _tile_loadd(5, xa + QP_ROWS * xrow + 64 * c, (long)xrow);
            _tile_dpbsud(2, 5, 6);
            _tile_dpbsud(3, 5, 7);
        }
    }
    _tile_stored(0, cbuf[0], QP_ROWS * 4);
    _tile_stored(1, cbuf[1], QP_ROWS * 4);
    if (nm > 1) {
        _tile_stored(2, cbuf[2], QP_ROWS * 4);
        _tile_stored(3, cbuf[3], QP_ROWS * 4);
    }
}

/* Rows [0, M) of xq (M <= Q4K_ROWS) against the groups of [n_begin, n_end). */
static void q4k_rows(float *out, size_t ldo, const uint8_t *xq, const simd_qpack *p, int M,
                     float beta, int n_begin, int n_end, q4k_operands_fn operands)
{
    _Alignas(64) q4k_bops b;
    _Alignas(64) int32_t cbuf[4][QP_ROWS][QP_ROWS];
    _Alignas(64) float acc[Q4K_ROWS][QP_ROWS];
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    int cur[2] = {0, 0};
    for (int g = n_begin / QP_ROWS; g * QP_ROWS < n_end; g++) {
        memset(acc, 0, sizeof(float) * QP_ROWS * (size_t)M);
        for (int bl = 0; bl < p->n_blk; bl++) {
            const uint8_t *unit = qpack_unit(p, g, bl);
            tiles_prefetch(p, unit);
            operands(p, unit, b);
            for (int m0 = 0; m0 < M; m0 += 2 * QP_ROWS) {
                int mr[2] = {M - m0 < QP_ROWS ? M - m0 : QP_ROWS, M - m0 - QP_ROWS};
                mr[1] = mr[1] < 0 ? 0 : mr[1] > QP_ROWS ? QP_ROWS : mr[1];
                int nm = mr[1] > 0 ? 2 : 1;
                if (mr[0] != cur[0] || mr[1] != cur[1]) {
                    tiles_config(mr, 64);
                    cur[0] = mr[0], cur[1] = mr[1];
                }
                const uint8_t *x0 = xq + (size_t)m0 * xrow;
                q4k_tiles(x0 + (size_t)bl * p->act_blk_bytes + p->act_qs_off, xrow, nm, b, cbuf);
                for (int i = 0; i < nm; i++)
                    for (int r = 0; r < mr[i]; r++) {
                        int m = m0 + QP_ROWS * i + r;
                        __m512i isum = _mm512_add_epi32(
                            _mm512_slli_epi32(_mm512_load_si512(cbuf[2 * i][r]), 3),
                            _mm512_load_si512(cbuf[2 * i + 1][r]));
                        const uint8_t *xb = xq + (size_t)m * xrow + (size_t)bl * p->act_blk_bytes;
                        _mm512_store_ps(acc[m], qp_f32_row(_mm512_load_ps(acc[m]), isum, p, unit, xb));
                    }
            }
        }
        int n0 = g * QP_ROWS;
        int lo = n_begin > n0 ? n_begin - n0 : 0;
        int hi = n_end < n0 + QP_ROWS ? n_end - n0 : QP_ROWS;
        for (int m0 = 0; m0 < M; m0 += QP_ROWS)
            tiles_write(out + (size_t)m0 * ldo + n0, ldo, (const float(*)[QP_ROWS])acc[m0],
                        M - m0 < QP_ROWS ? M - m0 : QP_ROWS, lo, hi, beta);
    }
}

static void q4k_gemm(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                     float beta, int n_begin, int n_end, q4k_operands_fn operands)
{
    if (M <= 0 || n_begin >= n_end)
        return;
    size_t xrow = (size_t)p->n_blk * p->act_blk_bytes;
    for (int m0 = 0; m0 < M; m0 += Q4K_ROWS) /* rows are independent: the same bits */
        q4k_rows(out + (size_t)m0 * ldo, ldo, (const uint8_t *)xq + (size_t)m0 * xrow, p,
                 M - m0 < Q4K_ROWS ? M - m0 : Q4K_ROWS, beta, n_begin, n_end, operands);
    _tile_release();
}

void simd_amx_qpack_gemm_q4k(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                             float beta, int n_begin, int n_end)
{
    q4k_gemm(out, ldo, xq, p, M, beta, n_begin, n_end, q4k_operands_vbmi);
}

void simd_amx_qpack_gemm_q4k_bw(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                                int M, float beta, int n_begin, int n_end)
{
    q4k_gemm(out, ldo, xq, p, M, beta, n_begin, n_end, q4k_operands_bw);
}
