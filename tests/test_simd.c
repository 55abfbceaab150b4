/* test_simd.c: dispatch, and every elementwise kernel of every ISA this CPU runs against
 * the reference (and the reference against llama2.c's formulas). */
#include <string.h>

#include "qpack.h"
#include "simd_check.h"

#define TOL 2e-6

static void check_dispatch(void)
{
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    SC_CHECK(ref != NULL && strcmp(ref->name, "ref") == 0, "the reference table is always there");
    SC_CHECK(simd_kernels_for(SIMD_ISA_COUNT) == NULL, "no table outside the enum");
    SC_CHECK(strcmp(simd_isa_name((simd_isa)99), "unknown") == 0, "name outside the enum");
    for (int i = 0; i < SIMD_ISA_COUNT; i++) {
        const simd_kernels *t = simd_kernels_for((simd_isa)i);
        if (t) {
            SC_CHECK(strcmp(t->name, simd_isa_name((simd_isa)i)) == 0, "table %d named %s", i, t->name);
            SC_CHECK(t->rmsnorm && t->rope && t->silu_mul && t->gelu_mul && t->softmax && t->f32_to_f16 &&
                         t->f16_to_f32 && t->attention && t->gemm_nt, "table %s complete", t->name);
        }
    }
    const simd_kernels *best = simd_init();
    SC_CHECK(best != NULL && best == simd_init(), "simd_init is idempotent");
    setenv("TESSERA_FORCE_REF", "1", 1);
    SC_CHECK(simd_init() == ref, "TESSERA_FORCE_REF=1 picks the reference");
    unsetenv("TESSERA_FORCE_REF");
    SC_CHECK(simd_init() == best, "back to %s without the variable", best->name);
    printf("dispatch picks %s\n", best->name);
}

/* llama2.c run.c's rmsnorm, transcribed. */
static void llama2c_rmsnorm(float *o, const float *x, const float *weight, int size)
{
    float ss = 0.0f;
    for (int j = 0; j < size; j++)
        ss += x[j] * x[j];
    ss /= size;
    ss += 1e-5f;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < size; j++)
        o[j] = weight[j] * (ss * x[j]);
}

static void check_rmsnorm(void)
{
    static const int sizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257, 1000};
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    enum { ROWS = 3 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *x = malloc(sizeof(float) * ROWS * n), *w = malloc(sizeof(float) * n);
        float *want = malloc(sizeof(float) * ROWS * n), *got = malloc(sizeof(float) * ROWS * n);
        sc_fill(x, (size_t)ROWS * n, -3.0f, 3.0f);
        sc_fill(w, (size_t)n, 0.5f, 1.5f);
        ref->rmsnorm(want, x, w, ROWS, n, 1e-5f);
        for (int r = 0; r < ROWS; r++) {
            llama2c_rmsnorm(got + r * n, x + r * n, w, n);
            SC_CHECK(memcmp(got + r * n, want + r * n, sizeof(float) * n) == 0,
                     "ref rmsnorm equals llama2.c bit for bit, n=%d", n);
        }
        for (int i = 0; i < n_isa; i++) {
            isas[i]->rmsnorm(got, x, w, ROWS, n, 1e-5f);
            double e = sc_norm_err(got, want, (size_t)ROWS * n);
            SC_CHECK(e < TOL, "%s rmsnorm n=%d err %g", isas[i]->name, n, e);
            memcpy(got, x, sizeof(float) * ROWS * n); /* in place */
            isas[i]->rmsnorm(got, got, w, ROWS, n, 1e-5f);
            e = sc_norm_err(got, want, (size_t)ROWS * n);
            SC_CHECK(e < TOL, "%s rmsnorm in place n=%d err %g", isas[i]->name, n, e);
        }
        free(x), free(w), free(want), free(got);
    }
}

/* llama2.c run.c's RoPE over one vector of dim floats (heads of head_size), transcribed. */
static void llama2c_rope(float *vec, int dim, int head_size, int pos)
{
    for (int i = 0; i < dim; i += 2) {
        int head_dim = i % head_size;
        float freq = 1.0f / powf(10000.0f, head_dim / (float)head_size);
        float val = pos * freq;
        float fcr = cosf(val);
        float fci = sinf(val);
        float v0 = vec[i];
        float v1 = vec[i + 1];
        vec[i] = v0 * fcr - v1 * fci;
        vec[i + 1] = v0 * fci + v1 * fcr;
    }
}

/* NeoX pairing written from its definition, rotating in double by the same float angle
 * (pos * 1/base^(2i/head_dim)) that llama2.c's formula produces. */
static void neox_rope(float *v, int head_dim, int pos, float base)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        double theta = pos * (1.0f / powf(base, (float)(2 * i) / (float)head_dim));
        double a = v[i], b = v[i + half];
        v[i] = (float)(a * cos(theta) - b * sin(theta));
        v[i + half] = (float)(a * sin(theta) + b * cos(theta));
    }
}

static void check_rope(void)
{
    static const int dims[] = {2, 6, 10, 18, 48, 64, 80, 128, 130, 256, 300};
    static const int32_t pos[] = {0, 1, 17, 1000, 4095};
    enum { ROWS = 5, HEADS = 3 };
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        int hd = dims[di];
        size_t stride = (size_t)HEADS * hd + 5; /* rows of a wider qkv buffer */
        size_t n = ROWS * stride;
        float *x = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n);
        float *got = malloc(sizeof(float) * n);
        float *table = malloc(sizeof(float) * ROWS * SIMD_ROPE_TABLE_FLOATS(hd));
        float *freq = malloc(sizeof(float) * (size_t)(hd / 2));
        sc_fill(x, n, -1.0f, 1.0f);
        for (int style = SIMD_ROPE_NORMAL; style <= SIMD_ROPE_NEOX; style++) {
            float base = style == SIMD_ROPE_NORMAL ? 10000.0f : 500000.0f;
            for (int i = 0; i < hd / 2; i++) /* the unscaled frequencies, as llama2.c has them */
                freq[i] = 1.0f / powf(base, (float)(2 * i) / (float)hd);
            simd_rope_table(table, pos, ROWS, hd, freq, (simd_rope_style)style);
            memcpy(want, x, sizeof(float) * n);
            ref->rope(want, table, ROWS, stride, HEADS, hd, (simd_rope_style)style);
            memcpy(got, x, sizeof(float) * n);
            for (int r = 0; r < ROWS; r++) {
                if (style == SIMD_ROPE_NORMAL)
                    llama2c_rope(got + r * stride, HEADS * hd, hd, pos[r]);
                else
                    for (int h = 0; h < HEADS; h++)
                        neox_rope(got + r * stride + h * hd, hd, pos[r], base);
            }
            if (style == SIMD_ROPE_NORMAL)
                SC_CHECK(memcmp(got, want, sizeof(float) * n) == 0,
                         "ref rope equals llama2.c bit for bit, hd=%d", hd);
            else
                SC_CHECK(sc_norm_err(want, got, n) < 1e-6, "ref neox rope hd=%d err %g", hd,
                         sc_norm_err(want, got, n));
            for (int i = 0; i < n_isa; i++) {
                memcpy(got, x, sizeof(float) * n);
                isas[i]->rope(got, table, ROWS, stride, HEADS, hd, (simd_rope_style)style);
                double e = sc_norm_err(got, want, n);
                SC_CHECK(e < TOL, "%s rope style %d hd=%d err %g", isas[i]->name, style, hd, e);
                for (int r = 0; r < ROWS; r++) /* the gap after the heads is untouched */
                    SC_CHECK(memcmp(got + r * stride + HEADS * hd, x + r * stride + HEADS * hd,
                                    5 * sizeof(float)) == 0, "%s rope stays in its heads", isas[i]->name);
            }
        }
        free(x), free(want), free(got), free(table), free(freq);
    }
}

static void check_silu_softmax(void)
{
    static const int sizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 100, 1000, 5632};
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = (size_t)sizes[s];
        float *g = malloc(sizeof(float) * n), *u = malloc(sizeof(float) * n);
        float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
        sc_fill(g, n, -20.0f, 20.0f);
        sc_fill(u, n, -2.0f, 2.0f);
        ref->silu_mul(want, g, u, n);
        for (size_t i = 0; i < n; i++) {
            double gi = g[i], expect = gi / (1.0 + exp(-gi)) * u[i];
            SC_CHECK(fabs(want[i] - expect) <= 1e-5 * (1.0 + fabs(expect)), "ref silu n=%zu", n);
        }
        for (int i = 0; i < n_isa; i++) {
            isas[i]->silu_mul(got, g, u, n);
            double e = sc_norm_err(got, want, n);
            SC_CHECK(e < TOL, "%s silu_mul n=%zu err %g", isas[i]->name, n, e);
            memcpy(got, g, sizeof(float) * n);
            isas[i]->silu_mul(got, got, u, n);
            SC_CHECK(sc_norm_err(got, want, n) < TOL, "%s silu_mul in place n=%zu", isas[i]->name, n);
        }

        /* GeGLU (Gemma): tanh GELU, against the formula in double */
        ref->gelu_mul(want, g, u, n);
        for (size_t i = 0; i < n; i++) {
            double gi = g[i];
            double expect = 0.5 * gi * (1.0 + tanh(0.7978845608028654 * (gi + 0.044715 * gi * gi * gi))) * u[i];
            SC_CHECK(fabs(want[i] - expect) <= 1e-5 * (1.0 + fabs(expect)), "ref gelu n=%zu", n);
        }
        for (int i = 0; i < n_isa; i++) {
            isas[i]->gelu_mul(got, g, u, n);
            double e = sc_norm_err(got, want, n);
            SC_CHECK(e < TOL, "%s gelu_mul n=%zu err %g", isas[i]->name, n, e);
            memcpy(got, u, sizeof(float) * n);
            isas[i]->gelu_mul(got, g, got, n);
            SC_CHECK(sc_norm_err(got, want, n) < TOL, "%s gelu_mul in place n=%zu", isas[i]->name, n);
        }

        sc_fill(g, n, -15.0f, 15.0f);
        memcpy(want, g, sizeof(float) * n);
        ref->softmax(want, n);
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
            sum += want[i];
        SC_CHECK(fabs(sum - 1.0) < 1e-4, "ref softmax sums to 1, n=%zu: %g", n, sum);
        for (int i = 0; i < n_isa; i++) {
            memcpy(got, g, sizeof(float) * n);
            isas[i]->softmax(got, n);
            double e = sc_norm_err(got, want, n);
            SC_CHECK(e < 1e-5, "%s softmax n=%zu err %g", isas[i]->name, n, e);
        }
        free(g), free(u), free(want), free(got);
    }
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_f16(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF);
    static const struct { float f; uint16_t h; } known[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff},
        {65519.0f, 0x7bff}, {65520.0f, 0x7c00}, {1e10f, 0x7c00}, {0x1p-14f, 0x0400},
        {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.8p-25f, 0x0001}, {0x1.8p-24f, 0x0002},
        {0x1p-26f, 0x0000}, {0.1f, 0x2e66}, {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02},
        {0x1.ffcp-15f, 0x0400}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
    };
    enum { NK = sizeof known / sizeof known[0] };
    float kf[NK];
    uint16_t kh[NK];
    for (int i = 0; i < NK; i++)
        kf[i] = known[i].f;
    ref->f32_to_f16(kh, kf, NK);
    for (int i = 0; i < NK; i++)
        SC_CHECK(kh[i] == known[i].h, "ref %a -> %04x, want %04x", (double)known[i].f, kh[i], known[i].h);
    for (int i = 0; i < n_isa; i++) {
        uint16_t h[NK];
        isas[i]->f32_to_f16(h, kf, NK);
        SC_CHECK(memcmp(h, kh, sizeof h) == 0, "%s known f32->f16 values", isas[i]->name);
    }

    /* every half: ref decodes exactly and round-trips; each ISA decodes identically */
    enum { NH = 65536 };
    uint16_t *all = malloc(sizeof(uint16_t) * NH), *back = malloc(sizeof(uint16_t) * NH);
    float *want = malloc(sizeof(float) * NH), *got = malloc(sizeof(float) * NH);
    for (int i = 0; i < NH; i++)
        all[i] = (uint16_t)i;
    ref->f16_to_f32(want, all, NH);
    ref->f32_to_f16(back, want, NH);
    int bad = 0;
    for (int i = 0; i < NH; i++) {
        int e = (i >> 10) & 0x1f, m = i & 0x3ff;
        double expect = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
        expect = (i & 0x8000) ? -expect : expect;
        int nan = e == 31 && m;
        if (nan ? !isnan(want[i]) : (double)want[i] != expect || !signbit(want[i]) != !signbit(expect))
            bad++;
        if (nan ? (back[i] & 0x7fff) <= 0x7c00 || (back[i] & 0x8000) != (i & 0x8000) : back[i] != i)
            bad++;
    }
    SC_CHECK(bad == 0, "ref f16 decode/round trip: %d wrong", bad);
    for (int k = 0; k < n_isa; k++) {
        isas[k]->f16_to_f32(got, all, NH);
        bad = 0;
        for (int i = 0; i < NH; i++)
            if (isnan(want[i]) ? !isnan(got[i]) : bits_of(got[i]) != bits_of(want[i]))
                bad++;
        SC_CHECK(bad == 0, "%s f16->f32 differs from ref on %d values", isas[k]->name, bad);
    }

    /* f32 -> f16 over every exponent: random mantissas and exact midpoints */
    enum { NF = 1 << 16 };
    float *src = malloc(sizeof(float) * NF);
    uint16_t *hw = malloc(sizeof(uint16_t) * NF), *hg = malloc(sizeof(uint16_t) * NF);
    for (int i = 0; i < NF; i++) {
        uint32_t exp_bits = 95 + (uint32_t)(i % 50); /* 2^-32 .. 2^17: subnormal to overflow */
        uint32_t mant = (uint32_t)(sc_uniform(0.0f, 1.0f) * 8388607.0f);
        if (i % 3 == 0)
            mant = (mant & ~0x1fffu) | 0x1000u; /* a tie at normal half precision */
        uint32_t sign = (i & 1u) << 31;
        src[i] = float_of(sign | exp_bits << 23 | mant);
    }
    src[0] = NAN;
    src[1] = -NAN;
    ref->f32_to_f16(hw, src, NF);
    for (int k = 0; k < n_isa; k++) {
        for (size_t n = 1; n <= 40; n++) { /* tails: nothing written past n */
            uint16_t sentinel[48];
            memset(sentinel, 0xab, sizeof sentinel);
            isas[k]->f32_to_f16(sentinel, src + 7, n);
            SC_CHECK(memcmp(sentinel, hw + 7, n * 2) == 0 && sentinel[n] == 0xabab,
                     "%s f32->f16 tail n=%zu", isas[k]->name, n);
        }
        isas[k]->f32_to_f16(hg, src, NF);
        bad = 0;
        for (int i = 0; i < NF; i++) {
            int nan = isnan(src[i]);
            if (nan ? (hg[i] & 0x7fff) <= 0x7c00 : hg[i] != hw[i])
                bad++;
        }
        SC_CHECK(bad == 0, "%s f32->f16 differs from ref on %d values", isas[k]->name, bad);
    }
    free(all), free(back), free(want), free(got), free(src), free(hw), free(hg);
}

/* The bf16 tiles' activation rows: the plain-C split on known values (hi the nearest bf16,
 * ties to even; lo the nearest bf16 of the rest; a NaN quiet, lo 0 where the rest is not
 * finite), hi + lo within 2^-16 of x, and each table's bf16_rows bit for bit the same,
 * over every exponent, with rows apart (lda > K) and a K that ends in a partial vector. */
static void check_bf16_rows(void)
{
    static const struct { uint32_t x; uint16_t hi, lo; } known[] = {
        {0x3f800000, 0x3f80, 0x0000},       /* 1 */
        {0x3f808000, 0x3f80, 0x3b80},       /* 1 + 2^-8: a tie, to the even 1; lo 2^-8 */
        {0x3f818000, 0x3f82, 0xbb80},       /* 1 + 3 * 2^-8: a tie, to the even 1 + 2^-6 */
        {0x3f808001, 0x3f81, 0xbb80},       /* just above the tie: up; lo the rest, -2^-8 */
        {0x80000000, 0x8000, 0x0000},       /* -0 */
        {0x00000001, 0x0000, 0x0000},       /* the least subnormal: hi 0, lo rounds to 0 */
        {0x00010000, 0x0001, 0x0000},       /* a subnormal bf16 holds it exactly */
        {0x7f7fffff, 0x7f80, 0x0000},       /* FLT_MAX rounds to inf: the rest is not finite */
        {0xff800000, 0xff80, 0x0000},       /* -inf */
        {0x7fc00001, 0x7fc0, 0x0000},       /* a quiet NaN */
        {0x7f800001, 0x7fc0, 0x0000},       /* a signalling NaN, made quiet */
    };
    enum { NK = sizeof known / sizeof known[0] };
    float kx[NK];
    uint16_t kb[2 * NK];
    for (int i = 0; i < NK; i++)
        kx[i] = float_of(known[i].x);
    simd_qpack_bf16_rows(kb, kx, NK, 1, NK);
    for (int i = 0; i < NK; i++)
        SC_CHECK(kb[i] == known[i].hi && kb[NK + i] == known[i].lo,
                 "bf16 split of %08x: %04x %04x, want %04x %04x", known[i].x, kb[i], kb[NK + i],
                 known[i].hi, known[i].lo);

    enum { M = 67, K = 104, LDA = 109 }; /* K: six vectors and a half */
    float *x = malloc(sizeof(float) * M * LDA);
    size_t bytes = sizeof(uint16_t) * 2 * M * K;
    uint16_t *want = malloc(bytes), *got = malloc(bytes);
    for (int i = 0; i < M * LDA; i++) {
        uint32_t exp_bits = (uint32_t)(i % 256); /* every exponent: subnormals to inf / NaN */
        uint32_t mant = (uint32_t)(sc_uniform(0.0f, 1.0f) * 8388607.0f);
        if (i % 5 == 0)
            mant = (mant & ~0xffffu) | 0x8000u; /* a tie at bf16 */
        x[i] = float_of((uint32_t)(i & 1) << 31 | exp_bits << 23 | mant);
    }
    x[0] = kx[NK - 1];
    simd_qpack_bf16_rows(want, x, LDA, M, K);
    int far = 0;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            float v = x[m * LDA + k];
            double sum = (double)float_of((uint32_t)want[m * 2 * K + k] << 16) +
                         float_of((uint32_t)want[m * 2 * K + K + k] << 16);
            if (isfinite(v) && fabsf(v) < 0x1p126f && fabsf(v) > 0x1p-100f &&
                fabs(sum - v) > 0x1p-16 * fabsf(v))
                far++;
        }
    SC_CHECK(far == 0, "bf16 hi + lo off x by more than 2^-16 on %d values", far);
    const simd_kernels *isas[SIMD_ISA_COUNT];
    int n_isa = sc_simd_tables(isas);
    for (int t = 0; t < n_isa; t++) {
        memset(got, 0xab, bytes);
        isas[t]->bf16_rows(got, x, LDA, M, K);
        SC_CHECK(memcmp(got, want, bytes) == 0,
                 "%s bf16_rows differs from the plain-C split", isas[t]->name);
    }
    free(x), free(want), free(got);
}

#define CHECKS(X)                                                                          \
    X(check_dispatch) X(check_rmsnorm) X(check_rope) X(check_silu_softmax) X(check_f16)      \
    X(check_bf16_rows)
SC_MAIN("simd", CHECKS)
