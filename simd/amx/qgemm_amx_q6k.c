/* qgemm_amx_q6k.c: the GEMM on Q6_K packs with AMX int8 tiles, for steps of the pack's
 * tile_min_m rows or more, without a fold per sub-block (the loop: tiles_split.h).
 *
 * Each weight's scale is multiplied in first: w = sc q, with q = u - 32 in [-32, 31] and
 * its sub-block's scale sc in [-128, 127], so w is in [-4064, 4096] (the ends: 127 x -32
 * and -128 x -32). w is split as w = 128 h + l, l = w & 127 in [0, 127] (an unsigned
 * byte) and h = w >> 7 (arithmetic) in [-32, 32] (a signed byte). Over a whole
 * 256-element block, C0 = A . h (TDPBSSD, signed x signed) and C1 = A . l (TDPBSUD) then
 * accumulate in tiles, and
 *     isum = sum_e x_e sc q_e = 128 C0 + C1
 * exactly: the block's integer sum as the twin forms it (sum_j sc[j] dot_j), with no
 * offset term, q being signed already. Bounds, with |x| <= 128 (quantize_act gives 127):
 * |C0| <= 256 x 128 x 32 = 2^20 and |C1| <= 256 x 128 x 127 < 2^23, so |128 C0 + C1| <
 * 2^28: int32 throughout. The float terms are added with qp_f32_row (no minimums): the
 * twin's bits. */
#include "tiles_split.h"

/* One B-row's 64 weights u (unsigned bytes, <= 63) times their scales, split into B0 = h
 * (signed bytes) and B1 = l. vpmaddubsw (unsigned u x signed s) of u with the scales kept
 * in the even bytes (s[0], odd bytes 0) gives the even bytes' products u sc as words
 * (|u sc| <= 63 x 128: no saturation), with them in the odd bytes (s[1]) the odd ones';
 * less c = 32 sc (the same instruction on 32s) they are w. Both words then go back to
 * their bytes in place, so the B-row keeps its order: an even byte is the low byte of its
 * word, an odd byte's is moved up 8 bits, or its w >> 7 up by a shift of 1. */
static inline void q6k_split(__m512i u, const __m512i s[2], const __m512i c[2], uint8_t *b0,
                             uint8_t *b1)
{
    const __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
    __m512i we = _mm512_sub_epi16(_mm512_maddubs_epi16(u, s[0]), c[0]);
    __m512i wo = _mm512_sub_epi16(_mm512_maddubs_epi16(u, s[1]), c[1]);
    __m512i h = _mm512_mask_blend_epi8(odd, _mm512_srai_epi16(we, 7), _mm512_slli_epi16(wo, 1));
    __m512i w8 = _mm512_mask_blend_epi8(odd, we, _mm512_slli_epi16(wo, 8)); /* w mod 256 */
    _mm512_store_si512(b0, h);
    _mm512_store_si512(b1, _mm512_and_si512(w8, _mm512_set1_epi8(127)));
}

/* A unit's B0, B1: B-row r holds elements 4r .. 4r + 3, so sub-block r / 4 (16 elements,
 * 4 B-rows); qp_brows gives B-rows r and r + 32 together (sub-blocks r / 4 and 8 + r / 4). */
static void q6k_operands(const simd_qpack *p, const uint8_t *unit, split_bops b)
{
    const __m512i even = _mm512_set1_epi16(0x00FF), v32 = _mm512_set1_epi8(32);
    for (int j = 0; j < 8; j++) { /* B-rows 4 j .. 4 j + 3 (sub-block j) and 32 more (j + 8) */
        __m512i s[2][2], c[2][2]; /* [sub-block j or j + 8][even or odd bytes] */
        for (int h = 0; h < 2; h++) {
            __m512i sc = split_scales(p, unit, j + 8 * h);
            s[h][0] = _mm512_and_si512(sc, even);
            s[h][1] = _mm512_andnot_si512(even, sc);
            c[h][0] = _mm512_maddubs_epi16(v32, s[h][0]);
            c[h][1] = _mm512_maddubs_epi16(v32, s[h][1]);
        }
        for (int r = 4 * j; r < 4 * j + 4; r++) {
            __m512i lo, hi;
            qp_brows(p, unit, r, &lo, &hi, 6);
            q6k_split(lo, s[0], c[0], b[0][r], b[1][r]);
            q6k_split(hi, s[1], c[1], b[0][r + 32], b[1][r + 32]);
        }
    }
}

static const split_kind Q6K = {.operands = q6k_operands, .shift = 7, .b0_signed = true};

void simd_amx_qpack_gemm_q6k(float *out, size_t ldo, const void *xq, const simd_qpack *p, int M,
                             float beta, int n_begin, int n_end)
{
    split_gemm(out, ldo, xq, p, M, beta, n_begin, n_end, &Q6K);
}
