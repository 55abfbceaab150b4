/* test_simd_qgemm.c: activation quantization and the quantized GEMM of every weight type on
 * every ISA this CPU runs plus the reference: the same activation bytes on every ISA,
 * results within a per-type bound of the f32 GEMM on the dequantized weights (ref-vs-ISA
 * much tighter), beta 0 over NaN and beta 1, n ranges, and each row's result bit for bit
 * the same alone as among 67. Builds stand-alone too (TS_SIMD_STANDALONE). */
#include <string.h>

#include "simd_check.h"

typedef struct type_case {
    uint32_t type;
    double tol; /* max over outputs of |got - want| / sum_k |w_k x_k|, want the f32 GEMM on
                 * the dequantized weights: robust where an output's terms cancel */
} type_case;

/* Bounds from the measured error (activation quantization dominates) with margin; the
 * f32-activation types only see summation order. */
static const type_case types[] = {
    {QT_F32, 2e-6},  {QT_F16, 2e-6},  {QT_BF16, 2e-6},  {QT_Q8_0, 1e-2},   {QT_Q4_0, 1e-2},
    {QT_Q4_1, 1e-2}, {QT_Q5_0, 1e-2}, {QT_Q5_1, 1e-2},  {QT_Q2_K, 5e-3},   {QT_Q3_K, 5e-3},
    {QT_Q4_K, 5e-3}, {QT_Q5_K, 5e-3}, {QT_Q6_K, 5e-3},  {QT_IQ4_NL, 1e-2}, {QT_IQ4_XS, 5e-3},
};
#define N_TYPES (int)(sizeof types / sizeof types[0])
#define ISA_TOL 4e-6 /* ISA against the reference on the same quantized activations */

static double measured[N_TYPES], measured_isa; /* worst errors, printed at the end */

static uint16_t f16_of(float f)
{
    uint16_t h;
    simd_kernels_for(SIMD_ISA_REF)->f32_to_f16(&h, &f, 1);
    return h;
}

/* Random bytes in every block, then sane f16 scales (random ones may be inf or NaN). */
static void fill_weights(uint8_t *w, uint32_t type, int N, int K)
{
    const qtype_info *info = qtype_get(type);
    size_t row = qtype_row_bytes(type, K), nblk = (size_t)N * (K / info->block_elems);
    for (size_t i = 0; i < (size_t)N * row; i++)
        w[i] = (uint8_t)(sc_uniform(0.0f, 256.0f));
    if (type == QT_F32 || type == QT_F16 || type == QT_BF16) {
        for (size_t i = 0; i < (size_t)N * K; i++) {
            float f = sc_uniform(-1.0f, 1.0f);
            if (type == QT_F32)
                memcpy(w + 4 * i, &f, 4);
            else if (type == QT_F16)
                ((uint16_t *)w)[i] = f16_of(f);
            else {
                uint32_t bits;
                memcpy(&bits, &f, 4);
                ((uint16_t *)w)[i] = (uint16_t)(bits >> 16);
            }
        }
        return;
    }
    for (size_t b = 0; b < nblk; b++) {
        void *p = w + b * info->block_bytes;
        uint16_t d = f16_of(sc_uniform(0.002f, 0.02f)), m = f16_of(sc_uniform(-0.05f, 0.05f));
        switch (type) {
        case QT_Q4_1:
            ((qb_q4_1 *)p)->d = d, ((qb_q4_1 *)p)->m = m;
            break;
        case QT_Q5_1:
            ((qb_q5_1 *)p)->d = d, ((qb_q5_1 *)p)->m = m;
            break;
        case QT_Q5_0:
            ((qb_q5_0 *)p)->d = d;
            break;
        case QT_Q2_K:
            ((qb_q2_k *)p)->d = d, ((qb_q2_k *)p)->dmin = f16_of(sc_uniform(0.0f, 0.01f));
            break;
        case QT_Q3_K:
            ((qb_q3_k *)p)->d = d;
            break;
        case QT_Q4_K:
            ((qb_q4_k *)p)->d = d, ((qb_q4_k *)p)->dmin = f16_of(sc_uniform(0.0f, 0.01f));
            break;
        case QT_Q5_K:
            ((qb_q5_k *)p)->d = d, ((qb_q5_k *)p)->dmin = f16_of(sc_uniform(0.0f, 0.01f));
            break;
        case QT_Q6_K:
            ((qb_q6_k *)p)->d = d;
            break;
        case QT_IQ4_XS:
            ((qb_iq4_xs *)p)->d = d;
            break;
        default: /* Q4_0, Q8_0, IQ4_NL: d first */
            memcpy(p, &d, 2);
            break;
        }
    }
}

typedef struct qcase {
    uint32_t type;
    int M, N, K;
    uint8_t *w;    /* (N, row_bytes) */
    float *x;      /* (M, K) */
    void *xq;      /* M quantized rows, the reference's */
    double *want;  /* (M, N) the f32 GEMM on the dequantized weights, in double */
    double *mag;   /* (M, N) sum_k |w_k x_k|, the scale of each output's terms */
    simd_qmat mat;
} qcase;

static void qcase_make(qcase *c, uint32_t type, int M, int N, int K)
{
    const qtype_info *info = qtype_get(type);
    *c = (qcase){.type = type, .M = M, .N = N, .K = K};
    size_t row = qtype_row_bytes(type, K);
    c->w = malloc((size_t)N * row);
    c->x = malloc(sizeof(float) * (size_t)M * K);
    c->xq = malloc(qact_row_bytes(info->act, K) * (size_t)M);
    c->want = malloc(sizeof(double) * (size_t)M * N);
    c->mag = malloc(sizeof(double) * (size_t)M * N);
    fill_weights(c->w, type, N, K);
    sc_fill(c->x, (size_t)M * K, -1.0f, 1.0f);
    simd_kernels_for(SIMD_ISA_REF)->quantize_act(c->xq, c->x, (size_t)K, M, K, info->act);
    float *wf = malloc(sizeof(float) * (size_t)K);
    for (int n = 0; n < N; n++) {
        qtype_dequant_row(wf, c->w + (size_t)n * row, type, K);
        for (int m = 0; m < M; m++) {
            double s = 0.0, a = 0.0;
            for (int k = 0; k < K; k++) {
                s += (double)wf[k] * c->x[(size_t)m * K + k];
                a += fabs((double)wf[k] * c->x[(size_t)m * K + k]);
            }
            c->want[(size_t)m * N + n] = s;
            c->mag[(size_t)m * N + n] = a > 1e-30 ? a : 1e-30;
        }
    }
    free(wf);
    c->mat = (simd_qmat){.type = type, .N = N, .K = K, .row_bytes = row, .data = c->w};
}

static void qcase_free(qcase *c)
{
    free(c->w), free(c->x), free(c->xq), free(c->want), free(c->mag);
}

/* out (M, N) from NaN (beta 0) or from 1.0 everywhere (beta 1), columns [nb, ne). */
static void run(float *out, const simd_kernels *k, const qcase *c, float beta, int nb, int ne)
{
    for (size_t i = 0; i < (size_t)c->M * c->N; i++)
        out[i] = beta == 0.0f ? NAN : 1.0f;
    k->qgemm(out, (size_t)c->N, c->xq, &c->mat, c->M, beta, nb, ne);
}

/* One case on the reference and every ISA: the error bounds and the untouched columns. */
static void check_case(int ti, int M, int N, int K)
{
    const simd_kernels *isas[SIMD_ISA_COUNT + 1];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    qcase c;
    qcase_make(&c, types[ti].type, M, N, K);
    const char *tn = qtype_get(c.type)->name;
    size_t n_out = (size_t)M * N;
    float *want = malloc(sizeof(float) * n_out), *got = malloc(sizeof(float) * n_out);
    float beta = (float)((M + N) % 2);
    run(want, ref, &c, beta, 0, N);
    double err = 0.0;
    for (size_t i = 0; i < n_out; i++) {
        double e = fabs(want[i] - (c.want[i] + beta)) / c.mag[i];
        err = isnan(want[i]) ? 1e30 : e > err ? e : err;
    }
    measured[ti] = err > measured[ti] ? err : measured[ti];
    SC_CHECK(err <= types[ti].tol, "ref %s M=%d N=%d K=%d beta=%g: error %g > %g", tn, M, N, K,
             beta, err, types[ti].tol);
    for (int i = 0; i < n_isa; i++) {
        int nb = N / 3, ne = N - N / 4; /* a middle range; the rest must stay as it was */
        run(got, isas[i], &c, beta, nb, ne);
        int touched = 0;
        double ierr = 0.0;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                size_t j = (size_t)m * N + n;
                if (n < nb || n >= ne) {
                    touched += beta == 0.0f ? !isnan(got[j]) : got[j] != 1.0f;
                    continue;
                }
                double e = fabs((double)got[j] - want[j]) / c.mag[j];
                ierr = isnan(got[j]) ? 1e30 : e > ierr ? e : ierr;
            }
        measured_isa = ierr > measured_isa ? ierr : measured_isa;
        SC_CHECK(ierr <= ISA_TOL, "%s %s M=%d N=%d K=%d beta=%g n [%d, %d): vs ref %g",
                 isas[i]->name, tn, M, N, K, beta, nb, ne, ierr);
        SC_CHECK(touched == 0, "%s %s M=%d N=%d K=%d: %d values outside [%d, %d) written",
                 isas[i]->name, tn, M, N, K, touched, nb, ne);
    }
    free(want), free(got);
    qcase_free(&c);
}

static void check_types(void)
{
    static const int ms[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 67};
    static const int ns[] = {1, 7, 37};
    int n_ms = SC_SANITIZED ? 6 : (int)(sizeof ms / sizeof ms[0]);
    for (int t = 0; t < N_TYPES; t++) {
        int be = (int)qtype_get(types[t].type)->block_elems;
        int bs = be == 1 ? 37 : be; /* the f32-activation types: odd lengths instead */
        for (int a = 0; a < n_ms; a++)
            for (int kb = 1; kb <= 3; kb++)
                for (int b = 0; b < 3; b++)
                    check_case(t, ms[a], ns[b], kb * bs + (be == 1 ? kb - 1 : 0));
        /* K past one unpacked chunk (2048 elements), a partial last chunk */
        check_case(t, 5, 9, be == 1 ? 2500 : 9 * (be == 32 ? 8 * be : be) + be);
    }
    for (int t = 0; t < N_TYPES; t++)
        printf("  %-7s worst error vs dequantized f32 GEMM %.2e (bound %.0e)\n",
               qtype_get(types[t].type)->name, measured[t], types[t].tol);
    printf("  worst ISA-vs-ref error %.2e (bound %.0e)\n", measured_isa, ISA_TOL);
}

/* Every ISA writes the reference's bytes for all three forms, including all-zero blocks,
 * exact .5 ties and a block whose largest element is negative. */
static void check_quantize_bytes(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    enum { M = 5, K = 1024, LDA = K + 3 };
    float *x = malloc(sizeof(float) * M * LDA);
    sc_fill(x, (size_t)M * LDA, -3.0f, 3.0f);
    for (int k = 0; k < 256; k++)
        x[k] = 0.0f; /* row 0: a zero Q8_K block and 8 zero Q8_32 blocks */
    for (int k = 0; k < 256; k++) /* row 1: Q8_K scale exactly 1, halves to round to even */
        x[LDA + k] = k == 0 ? -127.0f : (float)((k % 254) - 127) + 0.5f * (k % 2);
    x[2 * LDA + 7] = -50.0f;
    static const qact forms[] = {QACT_F32, QACT_Q8_32, QACT_Q8_K};
    for (int f = 0; f < 3; f++) {
        size_t bytes = qact_row_bytes(forms[f], K) * M;
        uint8_t *want = malloc(bytes), *got = malloc(bytes);
        ref->quantize_act(want, x, LDA, M, K, forms[f]);
        for (int i = 0; i < n_isa; i++) {
            memset(got, 0xA5, bytes);
            isas[i]->quantize_act(got, x, LDA, M, K, forms[f]);
            SC_CHECK(memcmp(got, want, bytes) == 0, "%s quantize_act form %d differs from ref",
                     isas[i]->name, f);
        }
        if (forms[f] == QACT_Q8_32) { /* the reference itself: qs * d reproduces x */
            const qa_q8_32 *b = (const qa_q8_32 *)want;
            SC_CHECK(b[0].d == 0.0f && b[0].sum == 0 && b[0].qs[5] == 0, "zero block");
            int bad = 0;
            for (int j = 0; j < K / 32; j++) {
                const qa_q8_32 *bj = (const qa_q8_32 *)(want + qact_row_bytes(QACT_Q8_32, K) * 2) + j;
                int sum = 0;
                for (int e = 0; e < 32; e++) {
                    float xe = x[2 * LDA + 32 * j + e];
                    bad += fabsf(xe - bj->qs[e] * bj->d) > 0.5f * bj->d * 1.0001f;
                    sum += bj->qs[e];
                }
                bad += bj->sum != sum;
            }
            SC_CHECK(bad == 0, "%d Q8_32 elements off by more than half a step", bad);
        }
        if (forms[f] == QACT_Q8_K) {
            const qa_q8_k *b = (const qa_q8_k *)(want + qact_row_bytes(QACT_Q8_K, K) * 2);
            int sum = 0;
            for (int e = 0; e < 16; e++)
                sum += b->qs[e];
            SC_CHECK(b->bsums[0] == sum, "bsums[0] %d != %d", b->bsums[0], sum);
            for (int e = 16; e < 32; e++)
                sum += b->qs[e];
            SC_CHECK(b->sums32[0] == sum, "sums32[0] %d != %d", b->sums32[0], sum);
            int bad = 0;
            for (int j = 0; j < QK_K / 32; j++)
                bad += b->sums32[j] != b->bsums[2 * j] + b->bsums[2 * j + 1];
            SC_CHECK(bad == 0, "%d of the sums of 32 differ from their pairs of bsums", bad);
            SC_CHECK(b->qs[7] == -127, "the block's largest magnitude maps to -127: %d", b->qs[7]);
        }
        free(want), free(got);
    }
    free(x);
}

/* Rows of an M = 67 call equal the same rows in calls of 1 to 4 (the direct tile's
 * shapes; 1 over two n ranges), bit for bit, on the reference and every ISA, for every
 * type; K short, and K past the kernels' 2048-element chunks. */
static void check_batch_invariance(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT + 1];
    int n_isa = sc_simd_tables(isas);
    isas[n_isa++] = simd_kernels_for(SIMD_ISA_REF);
    enum { M = 67, N = 13 };
    for (int t = 0; t < N_TYPES; t++)
        for (int long_k = 0; long_k < (SC_SANITIZED ? 1 : 2); long_k++) {
            int be = (int)qtype_get(types[t].type)->block_elems;
            int K = be == 1 ? 300 : be == 32 ? 8 * be : 2 * be;
            if (long_k)
                K = be == 1 ? 2048 + 300 : 2048 + 2 * be;
            qcase c;
            qcase_make(&c, types[t].type, M, N, K);
            size_t rb = qact_row_bytes(qtype_get(c.type)->act, K);
            float *all = malloc(sizeof(float) * M * N), *few = malloc(sizeof(float) * 4 * N);
            for (int i = 0; i < n_isa; i++) {
                isas[i]->qgemm(all, N, c.xq, &c.mat, M, 0.0f, 0, N);
                int bad = 0;
                for (int m = 0; m < M; m++) {
                    const void *xm = (const char *)c.xq + (size_t)m * rb;
                    isas[i]->qgemm(few, N, xm, &c.mat, 1, 0.0f, 0, 6);
                    isas[i]->qgemm(few, N, xm, &c.mat, 1, 0.0f, 6, N);
                    bad += memcmp(few, all + (size_t)m * N, sizeof(float) * N) != 0;
                }
                for (int rows = 2; rows <= 4; rows++)
                    for (int m = 0; m + rows <= M; m += 11) {
                        isas[i]->qgemm(few, N, (const char *)c.xq + (size_t)m * rb, &c.mat, rows,
                                       0.0f, 0, N);
                        bad += memcmp(few, all + (size_t)m * N, sizeof(float) * N * rows) != 0;
                    }
                SC_CHECK(bad == 0, "%s %s K=%d: %d calls of 1-4 rows differ from those rows "
                         "among 67", isas[i]->name, qtype_get(c.type)->name, K, bad);
            }
            free(all), free(few);
            qcase_free(&c);
        }
}

#define CHECKS(X) X(check_quantize_bytes) X(check_types) X(check_batch_invariance)
SC_MAIN("simd_qgemm", CHECKS)
