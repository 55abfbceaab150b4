/* qgemm_amx_q4k.c: the GEMM on Q4_K packs with AMX int8 tiles, for steps of the pack's
 * tile_min_m rows or more, without a fold per sub-block (the loop: tiles_split.h). Each
 * 6-bit sub-block scale is split as sc = 8 sh + sl (sh, sl <= 7), and a unit's weights u
 * (<= 15) become two B operands, B0 = u sh and B1 = u sl (<= 105, unsigned bytes). Over a
 * whole 256-element block, C0 = A . (u sh) and C1 = A . (u sl) then accumulate in tiles,
 * and 8 C0 + C1 = sum_j sc[j] dot_j: the block's integer sum, exactly, as the vector
 * kernel forms it (|C0|, |C1| <= 256 x 127 x 105 < 2^23).
 *
 * The products u s are looked up with vpermi2b where the CPU reports AVX-512 VBMI
 * (simd_amx_qpack_gemm_q4k), and formed with two vpmaddubsw elsewhere
 * (simd_amx_qpack_gemm_q4k_bw). Every CPU with AMX has VBMI, but a hypervisor may leave a
 * CPUID bit out; the second costs 40 lines and ran as fast on a 16-core Xeon. Both give
 * the same bytes, so the same sums. */
#include "tiles_split.h"

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

__attribute__((target("avx512vbmi")))
static void q4k_operands_vbmi(const simd_qpack *p, const uint8_t *unit, split_bops b)
{
    const __m512i tlo = _mm512_load_si512(S_TIMES_U), thi = _mm512_load_si512(S_TIMES_U + 64);
    __m512i sh[8], sl[8]; /* (sc >> 3) << 4 and (sc & 7) << 4, by sub-block */
    for (int j = 0; j < 8; j++) {
        __m512i sc = split_scales(p, unit, j);
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

static void q4k_operands_bw(const simd_qpack *p, const uint8_t *unit, split_bops b)
{
    const __m512i even = _mm512_set1_epi16(0x00FF), odd = _mm512_set1_epi16((short)0xFF00);
    for (int j = 0; j < 4; j++) { /* B-rows 8 j .. 8 j + 7 (sub-block j) and 32 more (j + 4) */
        __m512i s[2][2][2]; /* [sub-block j or j + 4][sh or sl][even or odd bytes] */
        for (int h = 0; h < 2; h++) {
            __m512i sc = split_scales(p, unit, j + 4 * h);
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

static const split_kind Q4K_VBMI = {.operands = q4k_operands_vbmi, .shift = 3, .has_min = true},
                        Q4K_BW = {.operands = q4k_operands_bw, .shift = 3, .has_min = true};

void simd_amx_qpack_gemm_q4k(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                             float beta, int n_begin, int n_end)
{
    split_gemm(out, ldo, xq, p, M, beta, n_begin, n_end, &Q4K_VBMI);
}

void simd_amx_qpack_gemm_q4k_bw(float *out, size_t ldo, const void *xq, const simd_qpack *p,
                                int M, float beta, int n_begin, int n_end)
{
    split_gemm(out, ldo, xq, p, M, beta, n_begin, n_end, &Q4K_BW);
}
