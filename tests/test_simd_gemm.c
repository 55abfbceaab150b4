/* test_simd_gemm.c: the skinny GEMM of every ISA against the reference and the reference
 * against cblas_sgemm (not in the stand-alone build, which has no BLAS): odd shapes, K
 * tails, beta 0 over NaN and beta 1, n ranges, padded strides, row independence; and
 * gemm_nn (out = x . w), every table bit for bit the reference, the reference against a
 * double-precision sum. */
#include <string.h>

#include "simd_check.h"

#ifndef TS_SIMD_STANDALONE
#include <cblas.h>
#endif

#define TOL 2e-5

typedef struct gemm_case {
    int M, N, K;
    size_t lda, ldo; /* lda >= K, ldo >= N */
} gemm_case;

typedef struct gemm_data {
    float *x, *w, *out0; /* x (M, lda), w (N, K), out0 (M, ldo): beta-1 initial contents */
} gemm_data;

static void data_make(gemm_data *d, const gemm_case *c)
{
    d->x = malloc(sizeof(float) * (size_t)c->M * c->lda);
    d->w = malloc(sizeof(float) * (size_t)c->N * c->K + 1);
    d->out0 = malloc(sizeof(float) * (size_t)c->M * c->ldo);
    sc_fill(d->x, (size_t)c->M * c->lda, -1.0f, 1.0f);
    sc_fill(d->w, (size_t)c->N * c->K, -1.0f, 1.0f);
    sc_fill(d->out0, (size_t)c->M * c->ldo, -2.0f, 2.0f);
    for (int m = 0; m < c->M; m++) /* padding of x is never read: NaN would show */
        for (size_t k = (size_t)c->K; k < c->lda; k++)
            d->x[(size_t)m * c->lda + k] = NAN;
}

static void data_free(gemm_data *d) { free(d->x), free(d->w), free(d->out0); }

/* out = the kernel over columns [nb, ne), starting from NaN (beta 0) or out0 (beta 1). */
static void run_kernel(float *out, const simd_kernels *t, const gemm_case *c, const gemm_data *d,
                       float beta, int nb, int ne)
{
    size_t n_out = (size_t)c->M * c->ldo;
    if (beta == 0.0f)
        for (size_t i = 0; i < n_out; i++)
            out[i] = NAN;
    else
        memcpy(out, d->out0, sizeof(float) * n_out);
    t->gemm_nt(out, c->ldo, d->x, c->lda, d->w, c->M, c->N, c->K, beta, nb, ne);
}

/* max relative error over the columns [nb, ne) of rows of got vs want; columns outside
 * the range must be untouched (bit for bit, NaN included). */
static double range_err(const float *got, const float *want, const float *before,
                        const gemm_case *c, int nb, int ne, int *touched)
{
    double num = 0.0, den = 0.0;
    *touched = 0;
    for (int m = 0; m < c->M; m++)
        for (int n = 0; n < (int)c->ldo; n++) {
            size_t i = (size_t)m * c->ldo + n;
            if (n < nb || n >= ne) {
                *touched += memcmp(&got[i], &before[i], sizeof(float)) != 0;
                continue;
            }
            if (isnan(got[i]) || isnan(want[i]))
                return 1e30;
            double e = fabs((double)got[i] - want[i]);
            num = e > num ? e : num;
            den = fabs((double)want[i]) > den ? fabs((double)want[i]) : den;
        }
    return den > 0.0 ? num / den : num;
}

/* Every table on one case, both betas, the whole range and a split into three ranges. */
static void check_case(const gemm_case *c)
{
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    gemm_data d;
    data_make(&d, c);
    size_t n_out = (size_t)c->M * c->ldo;
    float *want = malloc(sizeof(float) * n_out), *got = malloc(sizeof(float) * n_out);
    float *before = malloc(sizeof(float) * n_out);
    for (int b = 0; b < 2; b++) {
        float beta = (float)b;
        run_kernel(want, ref, c, &d, beta, 0, c->N);
        int touched;
        /* the reference against a double-precision sum */
        double num = 0.0, den = 0.0;
        for (int m = 0; m < c->M; m++)
            for (int n = 0; n < c->N; n++) {
                double s = b ? d.out0[(size_t)m * c->ldo + n] : 0.0;
                for (int k = 0; k < c->K; k++)
                    s += (double)d.x[(size_t)m * c->lda + k] * d.w[(size_t)n * c->K + k];
                double e = fabs(want[(size_t)m * c->ldo + n] - s);
                num = e > num ? e : num;
                den = fabs(s) > den ? fabs(s) : den;
            }
        SC_CHECK(num <= TOL * (den > 1.0 ? den : 1.0), "ref M=%d N=%d K=%d beta=%d err %g", c->M,
                 c->N, c->K, b, num);
        for (int i = 0; i < n_isa; i++) {
            int cuts[4] = {0, c->N / 3, c->N - c->N / 4, c->N};
            for (int part = 0; part < 4; part++) {
                int nb = part < 3 ? cuts[part] : 0, ne = part < 3 ? cuts[part + 1] : c->N;
                run_kernel(before, ref, c, &d, beta, 0, 0); /* the untouched state */
                run_kernel(got, isas[i], c, &d, beta, nb, ne);
                double e = range_err(got, want, before, c, nb, ne, &touched);
                SC_CHECK(e < TOL, "%s M=%d N=%d K=%d beta=%d n [%d, %d) err %g", isas[i]->name,
                         c->M, c->N, c->K, b, nb, ne, e);
                SC_CHECK(touched == 0, "%s M=%d N=%d K=%d writes %d values outside [%d, %d)",
                         isas[i]->name, c->M, c->N, c->K, touched, nb, ne);
            }
        }
#ifndef TS_SIMD_STANDALONE
        if (c->ldo == (size_t)c->N) { /* cblas wants ldc >= N; ours is the whole row */
            memcpy(got, d.out0, sizeof(float) * n_out);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->M, c->N, c->K, 1.0f, d.x,
                        (int)c->lda, d.w, c->K, beta, got, c->N);
            double e = sc_norm_err(want, got, n_out);
            SC_CHECK(e < TOL, "ref vs cblas_sgemm M=%d N=%d K=%d beta=%d err %g", c->M, c->N,
                     c->K, b, e);
        }
#endif
    }
    free(want), free(got), free(before);
    data_free(&d);
}

static void check_shapes(void)
{
    static const int ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64, 70};
    static const int ks[] = {1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257, 300};
    static const int ns[] = {1, 2, 3, 4, 5, 9, 13, 16, 37};
    int step = SC_SANITIZED ? 3 : 1;
    int idx = 0;
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b += (size_t)step) {
            idx++;
            gemm_case c = {.M = ms[a], .K = ks[b], .N = ns[idx % (int)(sizeof ns / sizeof ns[0])]};
            c.lda = (size_t)c.K + (idx % 3 == 0 ? 5 : 0);
            c.ldo = (size_t)c.N + (idx % 4 == 0 ? 3 : 0);
            check_case(&c);
        }
}

/* A row's result is bit-for-bit the same alone and among 70, 12, 33 or 25 rows, at any
 * tile position. */
static void check_row_independence(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT + 1];
    int n_isa = sc_simd_tables(isas);
    isas[n_isa++] = simd_kernels_for(SIMD_ISA_REF);
    gemm_case c = {.M = 70, .N = 45, .K = 2011, .lda = 2011, .ldo = 45};
    gemm_data d;
    data_make(&d, &c);
    float *all = malloc(sizeof(float) * c.M * c.ldo), *one = malloc(sizeof(float) * c.ldo);
    /* the 70 rows as one step, then as steps of 12, 33 and 25 */
    static const int steps[2][4] = {{70}, {12, 33, 25}};
    for (int i = 0; i < 2 * n_isa; i++) {
        const simd_kernels *k = isas[i % n_isa];
        for (int j = 0, m0 = 0; j < 4 && steps[i / n_isa][j]; m0 += steps[i / n_isa][j++])
            k->gemm_nt(all + (size_t)m0 * c.ldo, c.ldo, d.x + (size_t)m0 * c.lda, c.lda, d.w,
                       steps[i / n_isa][j], c.N, c.K, 0.0f, 0, c.N);
        int bad = 0;
        for (int m = 0; m < c.M; m++) {
            k->gemm_nt(one, c.ldo, d.x + (size_t)m * c.lda, c.lda, d.w, 1, c.N, c.K, 0.0f, 0, 5);
            k->gemm_nt(one, c.ldo, d.x + (size_t)m * c.lda, c.lda, d.w, 1, c.N, c.K, 0.0f, 5,
                       c.N);
            bad += memcmp(one, all + (size_t)m * c.ldo, sizeof(float) * c.N) != 0;
        }
        SC_CHECK(bad == 0, "%s, steps of %d..: %d of %d rows differ from the same row alone",
                 k->name, steps[i / n_isa][0], bad, c.M);
    }
    free(all), free(one);
    data_free(&d);
}

/* The reference never asks to be preferred to BLAS; the vector tables cover decode. */
static void check_max_rows(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    SC_CHECK(simd_kernels_for(SIMD_ISA_REF)->gemm_nt_max_rows == 0, "ref gemm_nt_max_rows");
    for (int i = 0; i < n_isa; i++)
        SC_CHECK(isas[i]->gemm_nt_max_rows >= 16, "%s gemm_nt_max_rows %d", isas[i]->name,
                 isas[i]->gemm_nt_max_rows);
}

/* Empty ranges and M = 0 write nothing. */
static void check_empty(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT + 1];
    int n_isa = sc_simd_tables(isas);
    isas[n_isa++] = simd_kernels_for(SIMD_ISA_REF);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < n_isa; i++) {
        float out[2] = {42.0f, 42.0f};
        isas[i]->gemm_nt(out, 2, x, 4, w, 2, 2, 4, 0.0f, 1, 1);
        isas[i]->gemm_nt(out, 2, x, 4, w, 0, 2, 4, 0.0f, 0, 2);
        SC_CHECK(out[0] == 42.0f && out[1] == 42.0f, "%s wrote on an empty call", isas[i]->name);
        isas[i]->gemm_nt(out, 2, x, 4, w, 1, 2, 4, 1.0f, 0, 2);
        SC_CHECK(out[0] == 52.0f && out[1] == 52.0f, "%s 42 + 1+2+3+4 = %g, %g", isas[i]->name,
                 out[0], out[1]);
    }
}

/* gemm_nn on shapes around the tables' tiles (rows 1-9 and more, column tails of every
 * lane count, K 1 to 300, padded strides): the reference within TOL of a double sum,
 * every table the reference's bits, and nothing written past N in a padded out row. */
static void check_nn(void)
{
    static const int ms[] = {1, 2, 3, 5, 8, 9, 17, 64};
    static const int ns[] = {1, 3, 7, 16, 17, 32, 33, 63, 64, 65, 100, 257};
    static const int ks[] = {1, 2, 7, 32, 64, 257, 300};
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    int idx = 0;
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            int M = ms[a], N = ns[b], K = ks[idx++ % (int)(sizeof ks / sizeof ks[0])];
            size_t lda = (size_t)K + (size_t)(idx % 3), ldw = (size_t)N + (size_t)(idx % 5);
            size_t ldo = (size_t)N + 2, n_out = (size_t)M * ldo;
            float *x = malloc(sizeof(float) * M * lda), *w = malloc(sizeof(float) * K * ldw);
            float *want = malloc(sizeof(float) * n_out), *got = malloc(sizeof(float) * n_out);
            sc_fill(x, (size_t)M * lda, -1.0f, 1.0f);
            sc_fill(w, (size_t)K * ldw, -1.0f, 1.0f);
            for (size_t i = 0; i < n_out; i++)
                want[i] = -7.0f;
            ref->gemm_nn(want, ldo, x, lda, w, ldw, M, N, K);
            double num = 0.0, den = 0.0;
            int pad = 0;
            for (int m = 0; m < M; m++) {
                for (int n = 0; n < N; n++) {
                    double s = 0.0;
                    for (int k = 0; k < K; k++)
                        s += (double)x[(size_t)m * lda + k] * w[(size_t)k * ldw + n];
                    double e = fabs(want[(size_t)m * ldo + n] - s);
                    num = e > num ? e : num;
                    den = fabs(s) > den ? fabs(s) : den;
                }
                pad += want[(size_t)m * ldo + N] != -7.0f || want[(size_t)m * ldo + N + 1] != -7.0f;
            }
            SC_CHECK(num <= TOL * (den > 1.0 ? den : 1.0) && pad == 0,
                     "ref gemm_nn M=%d N=%d K=%d err %g, %d padded rows written", M, N, K, num, pad);
            for (int i = 0; i < n_isa; i++) {
                for (size_t j = 0; j < n_out; j++)
                    got[j] = -7.0f;
                isas[i]->gemm_nn(got, ldo, x, lda, w, ldw, M, N, K);
                SC_CHECK(memcmp(got, want, sizeof(float) * n_out) == 0,
                         "%s gemm_nn M=%d N=%d K=%d differs from the reference's bits",
                         isas[i]->name, M, N, K);
            }
            free(x), free(w), free(want), free(got);
        }
}

#define CHECKS(X) \
    X(check_shapes) X(check_row_independence) X(check_empty) X(check_max_rows) X(check_nn)
SC_MAIN("simd_gemm", CHECKS)
