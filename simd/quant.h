/* quant.h: ggml's tensor types as GGUF files store them (block layouts), the activation
 * blocks each type multiplies with, and the contract of the quantized GEMM. The layouts
 * follow the GGUF/ggml documentation; every field is little-endian, f16 fields are IEEE
 * binary16. Nothing here knows files or models: src/gguf reads tensors, src/model owns
 * weights, and the kernels in simd/ multiply them. */
#ifndef TESSERA_SIMD_QUANT_H
#define TESSERA_SIMD_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tensor element types, numbered as in ggml and GGUF. The ones tessera computes on are
 * listed; qtype_name() names every number ggml used, so other types are refused by name. */
typedef enum qtype {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q4_0 = 2,
    QT_Q4_1 = 3,
    QT_Q5_0 = 6,
    QT_Q5_1 = 7,
    QT_Q8_0 = 8,
    QT_Q2_K = 10,
    QT_Q3_K = 11,
    QT_Q4_K = 12,
    QT_Q5_K = 13,
    QT_Q6_K = 14,
    QT_IQ4_NL = 20,
    QT_IQ4_XS = 23,
    QT_BF16 = 30,
} qtype;

enum {
    QK_32 = 32,   /* elements per block of the _0/_1 types, Q8_0 and IQ4_NL */
    QK_K = 256,   /* elements per super-block of the K types and IQ4_XS */
    K_SCALE_SIZE = 12,
};

/* ---- weight blocks (sizes checked with static asserts in quant_types.c) ---- */

typedef struct qb_q4_0 { uint16_t d; uint8_t qs[QK_32 / 2]; } qb_q4_0;            /* 18 B */
typedef struct qb_q4_1 { uint16_t d, m; uint8_t qs[QK_32 / 2]; } qb_q4_1;         /* 20 B */
typedef struct qb_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK_32 / 2]; } qb_q5_0; /* 22 B */
typedef struct qb_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK_32 / 2]; } qb_q5_1; /* 24 B */
typedef struct qb_q8_0 { uint16_t d; int8_t qs[QK_32]; } qb_q8_0;                 /* 34 B */
typedef struct qb_iq4_nl { uint16_t d; uint8_t qs[QK_32 / 2]; } qb_iq4_nl;        /* 18 B */

typedef struct qb_q2_k {
    uint8_t scales[QK_K / 16]; /* low 4 bits scale, high 4 bits min, per 16 elements */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;          /* super-block scales of the scales and of the mins */
} qb_q2_k;                     /* 84 B */

typedef struct qb_q3_k {
    uint8_t hmask[QK_K / 8];     /* high bit of each quant */
    uint8_t qs[QK_K / 4];        /* low 2 bits */
    uint8_t scales[K_SCALE_SIZE]; /* 16 6-bit scales */
    uint16_t d;
} qb_q3_k;                       /* 110 B */

typedef struct qb_q4_k {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins */
    uint8_t qs[QK_K / 2];
} qb_q4_k;                        /* 144 B */

typedef struct qb_q5_k {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} qb_q5_k; /* 176 B */

typedef struct qb_q6_k {
    uint8_t ql[QK_K / 2];      /* low 4 bits */
    uint8_t qh[QK_K / 4];      /* high 2 bits */
    int8_t scales[QK_K / 16];  /* 8-bit scales */
    uint16_t d;
} qb_q6_k;                     /* 210 B */

typedef struct qb_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} qb_iq4_xs; /* 136 B */

/* The 16 values an IQ4_NL / IQ4_XS nibble stands for (times the block scale). */
extern const int8_t qt_iq4nl_values[16];

/* ---- activation blocks ---- */

/* How a step's activations are held for one weight type: f32 as they are (F32, F16,
 * BF16 weights), int8 blocks of 32 (the _0/_1 types, Q8_0, IQ4_NL), or int8 super-blocks
 * of 256 with the sums of each 16 (the K types, IQ4_XS). */
typedef enum qact {
    QACT_F32,
    QACT_Q8_32,
    QACT_Q8_K,
} qact;

/* x[i] ~= d * qs[i]; sum = sum(qs): the packs' unsigned weights subtract their offset
 * times it, and the _1 types' minimums multiply qa32_s() = d * sum. */
typedef struct qa_q8_32 { float d; int32_t sum; int8_t qs[QK_32]; } qa_q8_32;
static inline float qa32_s(const qa_q8_32 *a) { return a->d * (float)a->sum; }
/* x[i] ~= d * qs[i]; bsums[j] = sum of qs[16j .. 16j + 15]; sums32[j] = the sum of 32,
 * bsums[2j] + bsums[2j + 1] (qa_q8_k_sums32), which the packed kernels' minimum terms read
 * two at a time as one broadcast dword; pad zero. qs starts 64 bytes in, so in a row of
 * blocks from a 64-byte boundary every 64 quants are one cache line: an AMX tile row reads
 * one line, not two. */
typedef struct qa_q8_k {
    float d;
    int16_t bsums[QK_K / 16];
    int16_t sums32[QK_K / 32];
    uint8_t pad[12];
    int8_t qs[QK_K];
} qa_q8_k;

/* b's sums32 from its bsums (|sum| <= 32 x 127: an int16) */
static inline void qa_q8_k_sums32(qa_q8_k *b)
{
    for (int j = 0; j < QK_K / 32; j++)
        b->sums32[j] = (int16_t)(b->bsums[2 * j] + b->bsums[2 * j + 1]);
}

/* ---- type table ---- */

typedef struct qtype_info {
    const char *name;     /* "Q4_K", ... */
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
    qact act;             /* the activation blocks it multiplies with */
} qtype_info;

/* The layout of a type tessera computes on, or NULL for any other number. */
const qtype_info *qtype_get(uint32_t type);
/* "Q4_K", "IQ2_XXS", ...: every type number ggml used; NULL for a number it never used. */
const char *qtype_name(uint32_t type);
/* Bytes of one row of k elements of a supported type; 0 when k is not a whole number of
 * blocks or the type is unsupported. */
size_t qtype_row_bytes(uint32_t type, int64_t k);
/* Bits per weight (block bytes * 8 / block elements); 0 for an unsupported type. */
double qtype_bits_per_weight(uint32_t type);

/* Bytes of one row of k activations held as a (k a multiple of the block size for the
 * quantized forms). */
size_t qact_row_bytes(qact a, int64_t k);

/* Decodes one row of k elements (a whole number of blocks) of a supported type into out:
 * exactly the values llama.cpp's dequantisation gives. Plain C; the embedding lookup and
 * the GGUF reader use it. */
void qtype_dequant_row(float *out, const void *row, uint32_t type, int64_t k);

/* ---- the quantized GEMM ---- */

struct simd_qmat;
struct simd_qpack;

/* The three kernel shapes a weight matrix can be multiplied by (simd.h's table holds the
 * first two per ISA; qpack.h's kernels the third). */
typedef void (*simd_gemm_nt_fn)(float *out, size_t ldo, const float *x, size_t lda,
                                const float *w, int M, int N, int K, float beta, int n_begin,
                                int n_end);
typedef void (*simd_qgemm_fn)(float *out, size_t ldo, const void *xq, const struct simd_qmat *w,
                              int M, float beta, int n_begin, int n_end);
typedef void (*simd_qpack_fn)(float *out, size_t ldo, const void *xq, const struct simd_qpack *p,
                              int M, float beta, int n_begin, int n_end);

/* How a matrix is multiplied: filled once, at load, by simd_qmat_plan() (qmat.h, decided
 * in dispatch.c); simd_qmat_gemm() follows it for every chunk of every step. */
typedef enum simd_mul_how {
    SIMD_MUL_F32,    /* f32 weights: gemm_nt on the activation rows as they are */
    SIMD_MUL_BLOCKS, /* the file's blocks: qgemm on quantized activations */
    SIMD_MUL_PACK,   /* the pack (qpack.h): its kernel below tile_min_m rows, tiles from there */
} simd_mul_how;

typedef struct simd_qmul {
    simd_mul_how how;
    int act;                 /* the activation form it multiplies (qmat.h's SIMD_ACT_*) */
    int n_align;             /* a chunk of rows of N is best a multiple of this many */
    int tile_min_m;          /* PACK: rows from which `tiles` runs (INT_MAX: never) */
    simd_gemm_nt_fn gemm_nt; /* F32 */
    simd_qgemm_fn qgemm;     /* BLOCKS */
    simd_qpack_fn gemm;      /* PACK: steps of fewer than tile_min_m rows */
    simd_qpack_fn tiles;     /* PACK: from tile_min_m rows, or NULL */
    const char *isa;         /* the kernels' instruction set, for people: "avx2", "AVX-512 VNNI" */
} simd_qmul;

/* A weight matrix of N rows of K inputs as the file stores it: row n is row_bytes bytes at
 * data + n * row_bytes, in type's blocks. data is borrowed (a mapping, or a buffer the
 * model owns). simd_qmat_plan() may repack it once at load (qpack.h), which then serves
 * every step in place of data, and records in mul how it is multiplied. */
typedef struct simd_qmat {
    uint32_t type; /* qtype */
    int N, K;
    size_t row_bytes;
    const void *data;
    struct simd_qpack *pack; /* NULL, or data repacked (qpack.h): the GEMM then reads only
                              * the pack, for every M; its owner frees it */
    simd_qmul mul;           /* simd_qmat_plan()'s choice; zero until planned */
} simd_qmat;

#endif /* TESSERA_SIMD_QUANT_H */
