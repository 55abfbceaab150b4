/* test_simd_amx.c: the GEMM on packed quantized weights (simd/qpack.h): the plain-C twin
 * against a double-precision product of qtype_dequant_row's values on every packable type,
 * and the AMX tile kernel against the twin bit for bit on odd shapes (skipped, saying so,
 * where AMX is absent). Builds stand-alone too (-DTS_SIMD_STANDALONE). */
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "qmat.h"
#include "qpack_data.h"
#include "qpack_internal.h"
#include "simd_check.h"

static const uint32_t TYPES[] = {QT_Q8_0, QT_Q4_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])

static const char *type_name(uint32_t t)
{
    switch (t) {
    case QT_Q8_0: return "Q8_0";
    case QT_Q4_0: return "Q4_0";
    case QT_Q4_K: return "Q4_K";
    case QT_Q5_K: return "Q5_K";
    case QT_Q6_K: return "Q6_K";
    case QT_F16: return "F16";
    default: return "BF16";
    }
}

/* One problem: weights, their pack, activations and the double-precision answer. */
typedef struct problem {
    uint32_t type;
    int M, N, K;
    uint8_t *w, *xq;
    float *want; /* (M, N) */
    simd_qmat qm; /* the weights, planned on a pack (their kernels in qm.mul) */
    simd_qpack *pack; /* qm.pack */
} problem;

/* Packs qm whatever the CPU and records the kernels dispatch.c picks for it; the pack. */
static simd_qpack *plan_pack(simd_qmat *qm)
{
    simd_qmat_plan(qm, simd_kernels_for(SIMD_ISA_REF), SIMD_PACK_ALWAYS);
    return qm->pack;
}

/* The kernel simd_qmat_gemm runs for M rows of qm (a pack). */
static simd_qpack_fn planned(const simd_qmat *qm, int M)
{
    return M >= qm->mul.tile_min_m ? qm->mul.tiles : qm->mul.gemm;
}

static void problem_make(problem *p, uint32_t type, int M, int N, int kblocks, int want)
{
    size_t wrow, xrow;
    p->type = type, p->M = M, p->N = N, p->K = kblocks * qd_block_elems(type);
    p->w = qd_weights(type, N, p->K, &wrow);
    float *xf = want ? malloc(sizeof(float) * (size_t)M * p->K) : NULL;
    p->xq = qd_acts(type, M, p->K, xf, &xrow);
    p->qm = (simd_qmat){.type = type, .N = N, .K = p->K, .row_bytes = wrow, .data = p->w};
    p->pack = plan_pack(&p->qm);
    p->want = NULL;
    if (!want)
        return;
    float *wf = malloc(sizeof(float) * (size_t)N * p->K);
    for (int n = 0; n < N; n++) /* llama.cpp's values (test_quant_formats checks it) */
        qtype_dequant_row(wf + (size_t)n * p->K, p->w + (size_t)n * wrow, type, p->K);
    p->want = malloc(sizeof(float) * (size_t)M * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0.0;
            for (int k = 0; k < p->K; k++)
                s += (double)xf[(size_t)m * p->K + k] * wf[(size_t)n * p->K + k];
            p->want[(size_t)m * N + n] = (float)s;
        }
    free(wf), free(xf);
}

static void problem_free(problem *p)
{
    free(p->w), free(p->xq), free(p->want);
    simd_qpack_free(p->pack);
}

/* Whether p has a pack; without one the failure is counted and p freed. */
static bool problem_packed(problem *p)
{
    SC_CHECK(p->pack != NULL, "%s pack", type_name(p->type));
    if (!p->pack)
        problem_free(p);
    return p->pack != NULL;
}

typedef simd_qpack_fn gemm_fn;

/* out (M, ldo = N + 3): the gemm over [0, N) in three ranges cut at odd columns, from NaN
 * (beta 0) or from before (beta 1). The padding columns must stay NaN. */
static void run_split(float *out, gemm_fn f, const problem *p, float beta, const float *before)
{
    size_t ldo = (size_t)p->N + 3, n_out = (size_t)p->M * ldo;
    for (size_t i = 0; i < n_out; i++)
        out[i] = beta == 0.0f ? NAN : before[i];
    int c1 = p->N / 3 | 1, c2 = c1 + (p->N - c1) / 2;
    f(out, ldo, p->xq, p->pack, p->M, beta, 0, c1);
    f(out, ldo, p->xq, p->pack, p->M, beta, c1, c2);
    f(out, ldo, p->xq, p->pack, p->M, beta, c2, p->N);
}

/* The twin (every CPU) against the dequantized product, and beta 1 adding to out. */
static void check_twin(void)
{
    static const int shapes[][3] = {{1, 5, 1}, {3, 37, 2}, {17, 16, 3}, {5, 33, 1}, {2, 70, 2}};
    for (int t = 0; t < N_TYPES; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            problem p;
            problem_make(&p, TYPES[t], shapes[s][0], shapes[s][1], shapes[s][2], 1);
            if (!problem_packed(&p))
                continue;
            size_t ldo = (size_t)p.N + 3, n_out = (size_t)p.M * ldo;
            float *out = malloc(sizeof(float) * n_out), *before = malloc(sizeof(float) * n_out);
            float *got = malloc(sizeof(float) * (size_t)p.M * p.N);
            for (size_t i = 0; i < n_out; i++)
                before[i] = qd_unit(-1.0f, 1.0f);
            run_split(out, simd_qpack_gemm_ref, &p, 0.0f, before);
            int pad_bad = 0;
            for (int m = 0; m < p.M; m++) {
                memcpy(got + (size_t)m * p.N, out + m * ldo, sizeof(float) * p.N);
                for (int n = p.N; n < (int)ldo; n++)
                    pad_bad += !isnan(out[m * ldo + n]);
            }
            double err = sc_norm_err(got, p.want, (size_t)p.M * p.N);
            SC_CHECK(err < 1e-5, "%s M=%d N=%d K=%d: twin error %g", type_name(p.type), p.M,
                     p.N, p.K, err);
            SC_CHECK(pad_bad == 0, "%s: %d columns past N written", type_name(p.type), pad_bad);
            run_split(out, simd_qpack_gemm_ref, &p, 1.0f, before);
            int bad = 0;
            for (int m = 0; m < p.M; m++)
                for (int n = 0; n < p.N; n++)
                    bad += out[m * ldo + n] !=
                           fmaf(1.0f, before[m * ldo + n], got[(size_t)m * p.N + n]);
            SC_CHECK(bad == 0, "%s beta 1: %d outputs are not before + product",
                     type_name(p.type), bad);
            free(out), free(before), free(got);
            problem_free(&p);
        }
}

/* Which kernels run here besides the twin (a Q8_0 pack's), saying which are skipped. */
static void kernels_here(const char *check, bool *vector, bool *tiles)
{
    problem probe;
    problem_make(&probe, QT_Q8_0, 1, 16, 1, 0);
    *vector = probe.pack && probe.qm.mul.gemm != simd_qpack_gemm_ref;
    *tiles = probe.pack && probe.qm.mul.tiles;
    problem_free(&probe);
    if (!*vector)
        printf("[  SKIPPED ] %s, vector kernel on packs: this CPU has no AVX-512 VNNI\n", check);
    if (!*tiles)
        printf("[  SKIPPED ] %s, AMX tile kernels: this CPU or kernel has no AMX (or it was "
               "refused)\n", check);
}

/* The kernels to check on p: the vector kernel where it runs, and from QP_TILE_MIN_M rows
 * every tile kernel of p that runs here (Q4_K's with and without VBMI), also below the
 * pack's own tile_min_m (Q4_K's), so that it may be lowered; how many. */
static int kernels_of(const problem *p, bool vector, gemm_fn fns[3])
{
    int n = 0;
    if (vector)
        fns[n++] = p->qm.mul.gemm;
    if (p->M >= QP_TILE_MIN_M)
        n += qpack_tile_kernels(p->pack, fns + n);
    return n;
}

static const char *kernel_name(const problem *p, gemm_fn f)
{
    return f == p->qm.mul.gemm ? "vector" : f == p->qm.mul.tiles ? "tiles" : "other tiles";
}

/* The pack's kernels equal the twin bit for bit: the vector kernel at every M (where the
 * CPU has AVX-512 VNNI) and the tile kernels from QP_TILE_MIN_M rows (where AMX runs); M
 * over and around multiples of 16 and 4, and the vector kernel's tiles of 8 rows (alone, 8,
 * and with one of 4 after them, 12), K of one to three blocks, N not a multiple of 16,
 * ranges cut inside 16-row groups. */
static void check_kernels(void)
{
    bool vector, tiles;
    kernels_here("kernels", &vector, &tiles);
    if (!vector && !tiles)
        return;
    static const int Ms[] = {16, 17, 31, 32, 48, 67, 100, 1, 2, 3, 5, 8, 12};
    for (int t = 0; t < N_TYPES; t++)
        for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++) {
            int kb = 1 + (int)((i + t) % 3), N = i % 2 ? 53 : 40;
            problem p;
            problem_make(&p, TYPES[t], Ms[i], N, kb, 0);
            if (!problem_packed(&p))
                continue;
            size_t n_out = (size_t)p.M * (p.N + 3);
            float *a = malloc(sizeof(float) * n_out), *b = malloc(sizeof(float) * n_out);
            float *before = malloc(sizeof(float) * n_out);
            for (size_t k = 0; k < n_out; k++)
                before[k] = qd_unit(-1.0f, 1.0f);
            gemm_fn kernels[3];
            int n_kernels = kernels_of(&p, vector, kernels);
            for (int kernel = 0; kernel < n_kernels; kernel++) {
                gemm_fn f = kernels[kernel];
                for (int beta = 0; beta < 2; beta++) {
                    run_split(a, f, &p, (float)beta, before);
                    run_split(b, simd_qpack_gemm_ref, &p, (float)beta, before);
                    int bad = 0;
                    for (size_t k = 0; k < n_out; k++)
                        bad += memcmp(&a[k], &b[k], sizeof(float)) != 0;
                    SC_CHECK(bad == 0, "%s %s M=%d N=%d K=%d beta %d: %d of %zu outputs differ",
                             type_name(p.type), kernel_name(&p, f), p.M, p.N, p.K, beta, bad,
                             n_out);
                }
            }
            free(a), free(b), free(before);
            problem_free(&p);
        }
}

/* qd_extreme's values (the largest integers every field can hold), packed again. */
static void make_extreme(problem *p)
{
    qd_extreme(p->type, p->w, p->N, p->K, p->xq, p->M);
    simd_qpack_free(p->pack);
    int be = qd_block_elems(p->type);
    p->qm = (simd_qmat){.type = p->type, .N = p->N, .K = p->K,
                        .row_bytes = qd_block_bytes(p->type) * (size_t)(p->K / be), .data = p->w};
    p->pack = plan_pack(&p->qm);
}

/* Edges of the shapes and values, every kernel against the twin bit for bit: N of 1 and 16,
 * ranges inside one 16-row group, and the extreme values above. */
static void check_edges(void)
{
    bool vector, tiles;
    kernels_here("edges", &vector, &tiles);
    if (!vector && !tiles)
        return; /* the twin against itself could not fail */
    static const int cases[][5] = { /* M, N, K blocks, n_begin, n_end */
        {1, 1, 1, 0, 1}, {3, 16, 2, 3, 9}, {5, 7, 1, 0, 7}, {17, 16, 3, 0, 16},
        {33, 20, 1, 15, 17}, {16, 1, 2, 0, 1}};
    for (int t = 0; t < N_TYPES; t++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int extreme = 0; extreme < 2; extreme++) {
                problem p;
                problem_make(&p, TYPES[t], cases[c][0], cases[c][1], cases[c][2], 0);
                if (extreme)
                    make_extreme(&p);
                if (!problem_packed(&p))
                    continue;
                size_t ldo = (size_t)p.N + 2, n_out = (size_t)p.M * ldo;
                float *a = malloc(sizeof(float) * n_out), *b = malloc(sizeof(float) * n_out);
                gemm_fn kernels[3];
                int n_kernels = kernels_of(&p, vector, kernels);
                for (int k = 0; k < n_kernels; k++) {
                    for (size_t i = 0; i < n_out; i++)
                        a[i] = b[i] = NAN;
                    kernels[k](a, ldo, p.xq, p.pack, p.M, 0.0f, cases[c][3], cases[c][4]);
                    simd_qpack_gemm_ref(b, ldo, p.xq, p.pack, p.M, 0.0f, cases[c][3], cases[c][4]);
                    int bad = 0, nan = 0;
                    for (size_t i = 0; i < n_out; i++) {
                        bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
                        size_t n = i % ldo;
                        nan += (n >= (size_t)cases[c][3] && n < (size_t)cases[c][4]) == isnan(a[i]);
                    }
                    SC_CHECK(bad == 0 && nan == 0, "%s M=%d N=%d [%d, %d)%s, %s: %d outputs differ "
                             "from the twin, %d written outside the range or not within",
                             type_name(p.type), p.M, p.N, cases[c][3], cases[c][4],
                             extreme ? " extreme" : "", kernel_name(&p, kernels[k]), bad, nan);
                }
                free(a), free(b);
                problem_free(&p);
            }
}

/* Batch invariance: each row of a 67-row call equals that row computed alone. */
static void check_rows_alone(void)
{
    for (int t = 0; t < N_TYPES; t++) {
        problem p;
        problem_make(&p, TYPES[t], 67, 35, 2, 0);
        if (!problem_packed(&p))
            continue;
        size_t xrow = (size_t)(p.K / qd_block_elems(p.type)) *
                      (qd_block_elems(p.type) == 32 ? sizeof(qa_q8_32) : sizeof(qa_q8_k));
        float *all = malloc(sizeof(float) * (size_t)p.M * p.N), one[35];
        simd_qmat_gemm(all, (size_t)p.N, p.xq, 0, &p.qm, p.M, 0.0f, 0, p.N);
        int bad = 0;
        for (int m = 0; m < p.M; m++) {
            simd_qmat_gemm(one, (size_t)p.N, p.xq + (size_t)m * xrow, 0, &p.qm, 1, 0.0f, 0, p.N);
            bad += memcmp(one, all + (size_t)m * p.N, sizeof one) != 0;
        }
        SC_CHECK(bad == 0, "%s: %d of 67 rows differ from the row alone", type_name(p.type),
                 bad);
        free(all);
        problem_free(&p);
    }
}

/* Refusals, and the sizes qpack.h states per 16-row unit. */
static void check_make(void)
{
    static const size_t unit[] = {576, 576, 2368, 2880, 3392};
    for (int t = 0; t < N_TYPES; t++) {
        size_t wrow;
        int K = 2 * qd_block_elems(TYPES[t]), N = 33;
        uint8_t *w = qd_weights(TYPES[t], N, K, &wrow);
        simd_qmat qm = {.type = TYPES[t], .N = N, .K = K, .row_bytes = wrow, .data = w};
        simd_qpack *p = plan_pack(&qm);
        SC_CHECK(simd_qpack_supports(TYPES[t]), "%s supported", type_name(TYPES[t]));
        /* tiles wherever AMX-INT8 runs, for every int8 type but Q5_K */
        bool tiles = (qpack_amx_caps() & QP_CAP_INT8) && TYPES[t] != QT_Q5_K;
        SC_CHECK(p && (qm.mul.tiles != NULL) == tiles && qm.mul.tile_min_m >= QP_TILE_MIN_M,
                 "%s: tiles %s (want %s), from %d rows", type_name(TYPES[t]),
                 qm.mul.tiles ? "set" : "unset", tiles ? "set" : "unset", qm.mul.tile_min_m);
        qm.pack = NULL;
        SC_CHECK(simd_qpack_bytes(p) == 3 * 2 * unit[t], "%s: %zu bytes", type_name(TYPES[t]),
                 simd_qpack_bytes(p));
        simd_qpack_free(p);
        qm.K = K + 16; /* not whole blocks */
        SC_CHECK(simd_qpack_make(&qm) == NULL, "%s K %d", type_name(TYPES[t]), qm.K);
        qm.K = K, qm.row_bytes = wrow + 1;
        SC_CHECK(simd_qpack_make(&qm) == NULL, "%s row bytes", type_name(TYPES[t]));
        qm.row_bytes = wrow, qm.N = 0;
        SC_CHECK(simd_qpack_make(&qm) == NULL, "%s N 0", type_name(TYPES[t]));
        free(w);
    }
    uint8_t junk[64] = {0};
    simd_qmat q41 = {.type = QT_Q4_1, .N = 1, .K = 32, .row_bytes = 20, .data = junk};
    SC_CHECK(!simd_qpack_supports(QT_Q4_1) && simd_qpack_make(&q41) == NULL, "Q4_1 refused");
    uint16_t hw[33 * 64] = {0};
    simd_qmat h = {.type = QT_BF16, .N = 33, .K = 64, .row_bytes = 128, .data = hw};
    simd_qpack *hp = simd_qpack_make(&h);
    SC_CHECK(simd_qpack_bytes(hp) == 3 * 2 * 1024, "BF16: %zu bytes", simd_qpack_bytes(hp));
    simd_qpack_free(hp);
    h.type = QT_F16, h.K = 48, h.row_bytes = 96; /* K not a multiple of 32 */
    SC_CHECK(simd_qpack_make(&h) == NULL, "F16 K 48 refused");
    simd_qpack_free(NULL);
    SC_CHECK(simd_qpack_bytes(NULL) == 0, "bytes of NULL");
}

/* The pack's GEMM (tiles where AMX runs, else the twin) against every kernel table's
 * qgemm on the file's blocks, the activations quantized by quantize_act: the same sums up
 * to float rounding. Their float terms are added in other orders (the vector kernels split
 * each block's integer dot over lanes), so equal bits are not expected: the count of equal
 * outputs is printed. */
static void check_vs_qgemm(void)
{
    const simd_kernels *isas[SIMD_ISA_COUNT + 1];
    int n_isa = sc_simd_tables(isas);
    isas[n_isa++] = simd_kernels_for(SIMD_ISA_REF);
    for (int t = 0; t < N_TYPES; t++) {
        int M = 33, N = 45, K = 2 * qd_block_elems(TYPES[t]);
        size_t wrow;
        uint8_t *w = qd_weights(TYPES[t], N, K, &wrow);
        float *x = malloc(sizeof(float) * (size_t)M * K);
        for (size_t i = 0; i < (size_t)M * K; i++)
            x[i] = qd_unit(-1.0f, 1.0f);
        qact a = qtype_get(TYPES[t])->act;
        uint8_t *xq = malloc(qact_row_bytes(a, K) * M);
        isas[n_isa - 1]->quantize_act(xq, x, (size_t)K, M, K, a);
        simd_qmat qm = {.type = TYPES[t], .N = N, .K = K, .row_bytes = wrow, .data = w};
        simd_qmat packed = qm;
        simd_qpack *p = plan_pack(&packed);
        float *got = malloc(sizeof(float) * (size_t)M * N), *want = malloc(sizeof(float) * M * N);
        simd_qmat_gemm(got, (size_t)N, xq, 0, &packed, M, 0.0f, 0, N);
        for (int i = 0; i < n_isa; i++) {
            isas[i]->qgemm(want, (size_t)N, xq, &qm, M, 0.0f, 0, N);
            double err = sc_norm_err(got, want, (size_t)M * N);
            int same = 0;
            for (int k = 0; k < M * N; k++)
                same += memcmp(&got[k], &want[k], sizeof(float)) == 0;
            printf("         %s: pack (%s) vs %s qgemm: error %.2g, %d of %d outputs equal\n",
                   type_name(TYPES[t]), planned(&packed, M) == simd_qpack_gemm_ref ? "twin"
                                        : M >= packed.mul.tile_min_m ? "tiles" : "vector",
                   isas[i]->name,
                   err, same, M * N);
            SC_CHECK(err < 1e-5, "%s: pack vs %s qgemm error %g", type_name(TYPES[t]),
                     isas[i]->name, err);
        }
        simd_qpack_free(p);
        free(w), free(x), free(xq), free(got), free(want);
    }
}

/* ---- F16 / BF16 weights on bf16 tiles ---- */

typedef struct bf_problem {
    uint32_t type;
    int M, N, K;
    float *x;      /* (M, K) */
    uint16_t *w;   /* (N, K) f16 or bf16 bits */
    uint16_t *xb;  /* (M, 2K) simd_qpack_bf16_rows(x) */
    simd_qmat qm;  /* the weights, planned on a pack */
    simd_qpack *pack; /* qm.pack */
} bf_problem;

static float bf_weight(uint32_t type, uint16_t h)
{
    if (type == QT_F16)
        return simd_f16_to_f32_scalar(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void bf_make(bf_problem *p, uint32_t type, int M, int N, int K)
{
    p->type = type, p->M = M, p->N = N, p->K = K;
    p->x = malloc(sizeof(float) * (size_t)M * K);
    p->w = malloc(sizeof(uint16_t) * (size_t)N * K);
    p->xb = malloc(sizeof(uint16_t) * (size_t)M * 2 * K);
    for (size_t i = 0; i < (size_t)M * K; i++)
        p->x[i] = qd_unit(-1.0f, 1.0f);
    for (size_t i = 0; i < (size_t)N * K; i++) {
        float f = qd_unit(-1.0f, 1.0f);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        p->w[i] = type == QT_F16 ? simd_f32_to_f16_scalar(f) : (uint16_t)(u >> 16);
    }
    simd_qpack_bf16_rows(p->xb, p->x, (size_t)K, M, K);
    p->qm = (simd_qmat){.type = type, .N = N, .K = K, .row_bytes = (size_t)K * 2, .data = p->w};
    p->pack = plan_pack(&p->qm);
}

static void bf_free(bf_problem *p)
{
    free(p->x), free(p->w), free(p->xb);
    simd_qpack_free(p->pack);
}

/* The bf16 twin against the f32 product of the file's weights: within 1e-4, where bf16
 * alone (no lo parts) would be off by about 3e-3: the lo parts are seen. */
static void check_bf16_twin(void)
{
    static const uint32_t types[] = {QT_F16, QT_BF16};
    static const int shapes[][3] = {{1, 20, 32}, {5, 37, 96}, {17, 16, 64}};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 3; s++) {
            bf_problem p;
            bf_make(&p, types[t], shapes[s][0], shapes[s][1], shapes[s][2]);
            SC_CHECK(p.pack != NULL, "%s pack", types[t] == QT_F16 ? "F16" : "BF16");
            if (!p.pack) {
                bf_free(&p);
                continue;
            }
            float *got = malloc(sizeof(float) * (size_t)p.M * p.N);
            float *want = malloc(sizeof(float) * (size_t)p.M * p.N);
            simd_qpack_gemm_ref(got, (size_t)p.N, p.xb, p.pack, p.M, 0.0f, 0, p.N);
            for (int m = 0; m < p.M; m++)
                for (int n = 0; n < p.N; n++) {
                    double acc = 0.0;
                    for (int k = 0; k < p.K; k++)
                        acc += (double)p.x[(size_t)m * p.K + k] *
                               bf_weight(p.type, p.w[(size_t)n * p.K + k]);
                    want[(size_t)m * p.N + n] = (float)acc;
                }
            double err = sc_norm_err(got, want, (size_t)p.M * p.N);
            SC_CHECK(err < 1e-4, "%s M=%d N=%d K=%d: error %g", type_name(p.type), p.M, p.N,
                     p.K, err);
            free(got), free(want);
            bf_free(&p);
        }
}

/* The bf16 tiles against the twin (f32 accumulation against double: a tolerance). */
static void check_bf16_tiles(void)
{
    if (!(qpack_amx_caps() & QP_CAP_BF16)) {
        printf("[  SKIPPED ] AMX bf16 tiles: this CPU or kernel has no AMX-BF16 (or it was "
               "refused)\n");
        return;
    }
    static const int Ms[] = {16, 17, 31, 32, 48, 67, 100, 1};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++) {
            bf_problem p;
            bf_make(&p, t ? QT_BF16 : QT_F16, Ms[i], i % 2 ? 53 : 40, 32 * (1 + (int)(i % 3)));
            SC_CHECK(p.pack && p.qm.mul.tiles && planned(&p.qm, 1) == p.qm.mul.tiles,
                     "bf16 pack on tiles");
            if (!p.pack) {
                bf_free(&p);
                continue;
            }
            size_t ldo = (size_t)p.N + 3, n_out = (size_t)p.M * ldo;
            float *a = malloc(sizeof(float) * n_out), *b = malloc(sizeof(float) * n_out);
            float *before = malloc(sizeof(float) * n_out);
            for (size_t k = 0; k < n_out; k++)
                before[k] = qd_unit(-1.0f, 1.0f);
            for (int beta = 0; beta < 2; beta++) {
                problem q = {.M = p.M, .N = p.N, .xq = (uint8_t *)p.xb, .pack = p.pack};
                run_split(a, planned(&p.qm, p.M), &q, (float)beta, before);
                run_split(b, simd_qpack_gemm_ref, &q, (float)beta, before);
                int pad = 0;
                double num = 0.0, den = 0.0; /* sc_norm_err over the N columns of each row */
                for (int m = 0; m < p.M; m++) {
                    for (size_t n = (size_t)p.N; n < ldo; n++)
                        pad += memcmp(&a[m * ldo + n], &b[m * ldo + n], sizeof(float)) != 0;
                    for (int n = 0; n < p.N; n++) {
                        double x = a[m * ldo + n], y = b[m * ldo + n];
                        double e = isnan(x) || isnan(y) ? 1e30 : fabs(x - y);
                        num = e > num ? e : num;
                        den = fabs(y) > den ? fabs(y) : den;
                    }
                }
                double err = den > 0.0 ? num / den : num;
                SC_CHECK(err < 1e-5 && pad == 0, "%s M=%d N=%d K=%d beta %d: error %g, %d "
                         "padding columns touched", type_name(p.type), p.M, p.N, p.K, beta,
                         err, pad);
            }
            /* rows alone equal rows in the batch, bit for bit: 67 rows of 53 columns (two
             * pairs of weight groups) and 100 rows of 40 (a pair and a lone group) */
            if (p.M == 67 || p.M == 100) {
                int bad = 0;
                simd_qmat_gemm(a, (size_t)p.N, p.xb, 0, &p.qm, p.M, 0.0f, 0, p.N);
                for (int m = 0; m < p.M; m++) {
                    simd_qmat_gemm(b, (size_t)p.N, p.xb + (size_t)m * 2 * p.K, 0, &p.qm, 1, 0.0f, 0,
                                   p.N);
                    bad += memcmp(b, a + (size_t)m * p.N, sizeof(float) * p.N) != 0;
                }
                SC_CHECK(bad == 0, "%s: %d of %d rows differ alone", type_name(p.type), bad, p.M);
            }
            free(a), free(b), free(before);
            bf_free(&p);
        }
}

/* Packs of f32 values made during a step (an encoder's keys, its values transposed):
 * made from rows and from columns at a stride, N and K off the 16 and 32 grids, then
 * multiplied (on the AMX bf16 tiles where they run, else the twin) against the double
 * product: within 1e-5 (bf16 alone would be about 3e-3 off), the activations' values past
 * K (not zero here) meeting the pack's zero padding, out's columns past N untouched. The
 * plain-C table and this CPU's make the same bytes. */
static void check_f32_packs(void)
{
    const simd_kernels *ref = simd_kernels_for(SIMD_ISA_REF), *fast = simd_init();
    static const int shapes[][3] = {{1, 20, 32}, {7, 37, 45}, {64, 257, 32}, {33, 32, 257}};
    for (int s = 0; s < 4; s++)
        for (int columns = 0; columns < 2; columns++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], K32 = simd_qpack_f32_k(K);
            size_t ldw = (size_t)(columns ? N : K) + 5, ldo = (size_t)N + 3;
            size_t src = (size_t)(columns ? K : N) * ldw, bytes = simd_qpack_f32_bytes(N, K);
            float *w = malloc(sizeof(float) * src), *x = malloc(sizeof(float) * M * K32);
            float *out = malloc(sizeof(float) * M * ldo);
            uint16_t *xb = malloc(sizeof(uint16_t) * 2 * M * K32);
            uint16_t *tmp = malloc(sizeof(uint16_t) * simd_qpack_f32_tmp(N, K));
            uint8_t *pa = aligned_alloc(64, bytes), *pb = aligned_alloc(64, bytes);
            for (size_t i = 0; i < src; i++)
                w[i] = qd_unit(-2.0f, 2.0f);
            for (int i = 0; i < M * K32; i++)
                x[i] = qd_unit(-1.0f, 1.0f);
            for (size_t i = 0; i < (size_t)M * ldo; i++)
                out[i] = 7.0f;
            simd_qpack_f32_make(ref, pa, tmp, w, ldw, columns, N, K);
            simd_qpack_f32_make(fast, pb, tmp, w, ldw, columns, N, K);
            SC_CHECK(memcmp(pa, pb, bytes) == 0, "N=%d K=%d columns %d: %s's pack differs",
                     N, K, columns, fast->name);
            simd_qpack_bf16_rows(xb, x, (size_t)K32, M, K32);
            simd_qpack_f32_gemm(out, ldo, xb, pa, N, K, M);
            double num = 0.0, den = 0.0;
            int pad = 0;
            for (int m = 0; m < M; m++) {
                for (int n = 0; n < N; n++) {
                    double acc = 0.0;
                    for (int k = 0; k < K; k++)
                        acc += (double)x[(size_t)m * K32 + k] *
                               w[columns ? (size_t)k * ldw + n : (size_t)n * ldw + k];
                    double e = fabs(out[m * ldo + n] - acc);
                    num = e > num || isnan(e) ? e : num;
                    den = fabs(acc) > den ? fabs(acc) : den;
                }
                for (size_t n = (size_t)N; n < ldo; n++)
                    pad += out[m * ldo + n] != 7.0f;
            }
            double err = num / den;
            SC_CHECK(err < 1e-5 && pad == 0, "M=%d N=%d K=%d columns %d: error %g, %d columns "
                     "past N written", M, N, K, columns, err, pad);
            free(w), free(x), free(out), free(xb), free(tmp), free(pa), free(pb);
        }
}

/* The tile probe's capabilities: where AMX-INT8 runs, VBMI is reported exactly as CPUID
 * has it (a flag bit of the probe's cache once masked it out, so the Q4_K tiles never took
 * vpermi2b); nothing outside the QP_CAP_ bits. */
static void check_caps(void)
{
    int caps = qpack_amx_caps();
    SC_CHECK((caps & ~(QP_CAP_INT8 | QP_CAP_BF16 | QP_CAP_VBMI)) == 0, "caps %#x", caps);
#if defined(__x86_64__) && defined(__GNUC__)
    if (!(caps & QP_CAP_INT8)) {
        printf("[  SKIPPED ] caps, VBMI beside AMX: this CPU or kernel has no AMX-INT8\n");
        return;
    }
    unsigned eax, ebx, ecx = 0, edx;
    __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
    SC_CHECK(((caps & QP_CAP_VBMI) != 0) == ((ecx >> 1) & 1), "VBMI: caps %#x, CPUID %u",
             caps, (ecx >> 1) & 1);
#endif
}

#define CHECKS(X)                                                                             \
    X(check_caps) X(check_make) X(check_twin) X(check_kernels) X(check_edges) X(check_rows_alone)             \
        X(check_vs_qgemm)                                                                     \
        X(check_bf16_twin) X(check_bf16_tiles) X(check_f32_packs)
SC_MAIN("simd_amx", CHECKS)
