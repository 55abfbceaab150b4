/* test_forward_batch.c: the batched forward pass over the paged KV cache against the
 * reference forward pass: same logits within 1e-4 for mixed prefill chunks and decodes
 * of several sequences in one step (their attention tasks costliest first), f32 and f16 KV, every kernel table, every GEMM path
 * (TESSERA_GEMM), a model with RoPE factors, and quantized files; a step run by one
 * parallel region of several threads against one thread; a long step's GEMM in blocks of
 * rows against slices of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cblas.h>
#include <omp.h>

#include "cli/args.h"
#include "kv/kv.h"
#include "model/forward_batch.h"
#include "model/forward_ref.h"
#include "qpack.h"
#include "util.h"

static ts_model *model;

static int setup(void **state)
{
    (void)state;
    ts_error err = {0};
    ts_status st = ts_model_load(tu_shared("models/stories260K/stories260K.gguf"), NULL, &model, &err);
    if (st != TS_OK)
        fprintf(stderr, "load: %s\n", err.msg);
    return st == TS_OK ? 0 : -1;
}

static void ref_cache_free(void);

static int teardown(void **state)
{
    (void)state;
    ref_cache_free();
    ts_model_free(model);
    return 0;
}

static double max_abs_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

enum { N_SEQ = 5, MAX_LEN = 400 };

/* The f32 model's reference logits of run_mixed_len's sequences, by first length. The
 * reference forward is plain C, the same whatever kernels the batched pass runs on, and
 * the largest part of the test's time: every ISA, GEMM path and chunk size compares with
 * one computation of it. */
enum { REF_CACHE = 4 };
static struct {
    int first_len;
    float *ref[N_SEQ];
} ref_cache[REF_CACHE];
static int n_ref_cache;

static void ref_cache_free(void)
{
    for (int c = 0; c < n_ref_cache; c++)
        for (int s = 0; s < N_SEQ; s++)
            free(ref_cache[c].ref[s]);
    n_ref_cache = 0;
}

/* Largest logit difference of the quantized files from their reference (logits reach
 * ~16; int8 activations, five layers deep: measured 0.30 .. 0.40). */
#define QUANT_TOL 0.5

/* The step's attention chunks (fs->chunk) are every sequence's runs of up to 32 rows,
 * each once, costliest first: rows x (position of the first + half the rows, rounded up),
 * as forward_batch's plan orders them so the threads take the longest tasks first. */
static void check_chunk_order(const fwd_state *fs, const fwd_seq *seqs, int n_seqs)
{
    int expected = 0;
    for (int i = 0; i < n_seqs; i++)
        expected += (seqs[i].n_rows + 31) / 32;
    assert_int_equal(fs->n_chunks, expected);
    long prev = -1;
    for (int c = 0; c < fs->n_chunks; c++) {
        int r0 = fs->chunk[c], i = 0;
        while (i < n_seqs && !(r0 >= seqs[i].row0 && r0 < seqs[i].row0 + seqs[i].n_rows))
            i++;
        assert_true(i < n_seqs);
        int j = r0 - seqs[i].row0, n = seqs[i].n_rows - j < 32 ? seqs[i].n_rows - j : 32;
        assert_int_equal(j % 32, 0);
        for (int d = 0; d < c; d++)
            assert_int_not_equal(fs->chunk[d], r0);
        /* a decoding row past two spans' worth of positions splits its context */
        int spans = n == 1 && seqs[i].logits_row >= 0 ? (seqs[i].pos0 + 1) / FWD_ATT_SPAN_MIN : 1;
        spans = spans < 1 ? 1 : spans > FWD_ATT_MAX_SPANS ? FWD_ATT_MAX_SPANS : spans;
        assert_int_equal(fs->chunk_spans[c], spans);
        long cost = (long)n * (seqs[i].pos0 + j + (n + 1) / 2) / spans;
        if (prev >= 0 && cost > prev)
            fail_msg("chunk %d (row %d, cost %ld) after one of cost %ld", c, r0, cost, prev);
        prev = cost;
    }
}

/* ref[s] = the reference logits of tokens[s] (lens[s]) for every s < N_SEQ. The f32
 * model's come from (and go into) ref_cache, keyed by the first length: returns true
 * when ref belongs to the cache, false when the caller frees it. */
static bool reference_logits(ts_model *m, int32_t tokens[N_SEQ][MAX_LEN],
                             const int lens[N_SEQ], float *ref[N_SEQ])
{
    int c = 0;
    while (m == model && c < n_ref_cache && ref_cache[c].first_len != lens[0])
        c++;
    if (m == model && c < n_ref_cache) {
        memcpy(ref, ref_cache[c].ref, N_SEQ * sizeof *ref);
        return true;
    }
    tu_decoded *d = tu_decode_matrices(m);
    for (int s = 0; s < N_SEQ; s++)
        ref[s] = tu_reference_logits(m, tokens[s], lens[s]);
    tu_restore_matrices(m, d);
    if (m != model || n_ref_cache == REF_CACHE)
        return false;
    ref_cache[n_ref_cache].first_len = lens[0];
    memcpy(ref_cache[n_ref_cache++].ref, ref, N_SEQ * sizeof *ref);
    return true;
}

/* Runs N_SEQ sequences of different lengths (the first first_len tokens) of model m
 * through steps that mix prefill chunks of `chunk` tokens with decodes, and compares every
 * sampled row with the reference. */
static void run_mixed_len(ts_model *m, const simd_kernels *k, fwd_gemm_path path,
                          kv_dtype dtype, int chunk, double tol, int first_len)
{
    model_use_kernels(m, k); /* the matrices on k's kernels too; back to the default below */
    int vocab = m->cfg.vocab_size;
    int lens[N_SEQ] = {first_len, 37, 1, 70, 96};
    int32_t tokens[N_SEQ][MAX_LEN];
    float *ref[N_SEQ];
    unsigned rng = 12345;
    for (int s = 0; s < N_SEQ; s++) {
        tokens[s][0] = 1;
        for (int i = 1; i < lens[s]; i++) {
            rng = rng * 1103515245u + 12345u;
            tokens[s][i] = 3 + (int32_t)((rng >> 8) % (unsigned)(vocab - 3));
        }
    }
    bool cached = reference_logits(m, tokens, lens, ref);
    kv_config kc = {.n_layers = m->cfg.n_layers, .n_kv_heads = m->cfg.n_kv_heads,
                    .head_dim = m->cfg.head_dim, .dtype = dtype, .n_blocks = 64};
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &kc, NULL), TS_OK);
    kv_table tables[N_SEQ];
    int done[N_SEQ] = {0};
    for (int s = 0; s < N_SEQ; s++)
        kv_table_init(&tables[s]);
    fwd_state fs;
    assert_int_equal(fwd_state_init(&fs, m, N_SEQ * chunk, N_SEQ, NULL), TS_OK);
    fs.gemm_path = path;

    /* Each step: every unfinished sequence takes min(chunk, left) rows when in prefill
     * (done < half its length), else one row (decode); each step samples its last row. */
    for (;;) {
        fwd_seq seqs[N_SEQ];
        int32_t step_tokens[N_SEQ * MAX_LEN];
        int n = 0, rows = 0;
        for (int s = 0; s < N_SEQ; s++) {
            int left = lens[s] - done[s];
            if (left == 0)
                continue;
            int r = done[s] < lens[s] / 2 ? (left < chunk ? left : chunk) : 1;
            assert_int_equal(kv_table_reserve(pool, &tables[s], r, NULL), TS_OK);
            memcpy(step_tokens + rows, tokens[s] + done[s], (size_t)r * sizeof(int32_t));
            seqs[n] = (fwd_seq){.row0 = rows, .n_rows = r, .pos0 = done[s], .table = &tables[s],
                                .logits_row = n};
            rows += r;
            n++;
        }
        if (n == 0)
            break;
        fwd_batch b = {.n_rows = rows, .tokens = step_tokens, .n_seqs = n, .seqs = seqs, .n_logits = n};
        assert_int_equal(forward_batch(&fs, m, pool, k, &b, NULL), TS_OK);
        check_chunk_order(&fs, seqs, n);
        for (int i = 0; i < n; i++) {
            int s = (int)(seqs[i].table - tables);
            int last = seqs[i].pos0 + seqs[i].n_rows - 1;
            double d = max_abs_diff(fs.logits + (size_t)i * vocab, ref[s] + (size_t)last * vocab, vocab);
            if (d > tol)
                fail_msg("%s gemm %d kv %d chunk %d: seq %d pos %d differs by %g", k->name, path,
                         dtype, chunk, s, last, d);
            done[s] += seqs[i].n_rows;
        }
    }
    for (int s = 0; s < N_SEQ; s++) {
        kv_table_free(pool, &tables[s]);
        if (!cached)
            free(ref[s]);
    }
    fwd_state_free(&fs);
    kv_pool_free(pool);
    model_use_kernels(m, simd_init());
}

static void run_mixed(ts_model *m, const simd_kernels *k, fwd_gemm_path path,
                      kv_dtype dtype, int chunk, double tol)
{
    run_mixed_len(m, k, path, dtype, chunk, tol, 150);
}

static void test_batched_matches_reference_f32(void **state)
{
    (void)state;
    for (int isa = 0; isa < SIMD_ISA_COUNT; isa++) {
        const simd_kernels *k = simd_kernels_for((simd_isa)isa);
        if (!k)
            continue;
        run_mixed(model, k, FWD_GEMM_AUTO, KV_DTYPE_F32, 16, 1e-4);
        run_mixed(model, k, FWD_GEMM_AUTO, KV_DTYPE_F32, 33, 1e-4);
    }
}

static void test_every_gemm_path_matches_reference(void **state)
{
    (void)state;
    /* chunk 4: steps of 5..20 rows; chunk 33: up to 165 rows, over the kernel threshold */
    for (int chunk = 4; chunk <= 33; chunk += 29) {
        run_mixed(model, simd_init(), FWD_GEMM_BLAS, KV_DTYPE_F32, chunk, 1e-4);
        run_mixed(model, simd_init(), FWD_GEMM_KERNEL, KV_DTYPE_F32, chunk, 1e-4);
        run_mixed(model, simd_kernels_for(SIMD_ISA_REF), FWD_GEMM_KERNEL, KV_DTYPE_F32, chunk, 1e-4);
    }
}

/* TESSERA_GEMM picks the path (the CLI reads it into the engine's options, the library
 * reads no environment); anything else is refused with its value in the message. */
static void test_gemm_env(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        fwd_gemm_path path;
    } ok[] = {{"", FWD_GEMM_AUTO}, {"auto", FWD_GEMM_AUTO}, {"blas", FWD_GEMM_BLAS},
              {"kernel", FWD_GEMM_KERNEL}};
    const char *saved = getenv("TESSERA_GEMM");
    char *keep = saved ? strdup(saved) : NULL;
    ts_engine_options o;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        setenv("TESSERA_GEMM", ok[i].value, 1);
        ts_engine_options_default(&o);
        assert_int_equal(cli_env_engine_options(&o, NULL), TS_OK);
        assert_int_equal((int)o.gemm, (int)ok[i].path);
    }
    unsetenv("TESSERA_GEMM");
    ts_engine_options_default(&o);
    assert_int_equal(cli_env_engine_options(&o, NULL), TS_OK);
    assert_int_equal((int)o.gemm, (int)FWD_GEMM_AUTO);
    fwd_state fs;
    assert_int_equal(fwd_state_init(&fs, model, 4, 2, NULL), TS_OK);
    assert_int_equal(fs.gemm_path, FWD_GEMM_AUTO);
    fwd_state_free(&fs);
    setenv("TESSERA_GEMM", "openblas", 1);
    ts_error err = {0};
    assert_int_equal(cli_env_engine_options(&o, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "TESSERA_GEMM=openblas"));
    if (keep)
        setenv("TESSERA_GEMM", keep, 1);
    else
        unsetenv("TESSERA_GEMM");
    free(keep);
}

static void test_batched_f16_kv_stays_close(void **state)
{
    (void)state;
    /* f16 keys and values round to 11 bits: the logits move, but only a little. */
    run_mixed(model, simd_init(), FWD_GEMM_AUTO, KV_DTYPE_F16, 32, 2e-2);
}

/* A sequence that decodes from position 200 to 399: its rows' contexts split into one to
 * three spans (split-K) merged after the kernel, on every kernel set (f16 K/V's spans:
 * test_simd_attention). */
static void test_split_context_matches_reference(void **state)
{
    (void)state;
    for (int isa = 0; isa < SIMD_ISA_COUNT; isa++) {
        const simd_kernels *k = simd_kernels_for((simd_isa)isa);
        if (k)
            run_mixed_len(model, k, FWD_GEMM_AUTO, KV_DTYPE_F32, 32, 1e-4, 400);
    }
}

/* A model with RoPE factors (Llama 3.1's kind: kept, blended, slowed by the full factor)
 * turns its pairs differently from the plain one from position 1 on, and the batched
 * pass, which reads the same frequency table through its step table, still matches the
 * reference on every kernel table. */
static void test_rope_factors_batched_matches_reference(void **state)
{
    (void)state;
    static const float factors[4] = {1.0f, 1.5f, 7.0f, 32.0f};
    ts_model *scaled = tu_stories_with_rope(factors, 1.0f);
    assert_true(scaled->cfg.rope_factors);
    int vocab = model->cfg.vocab_size;
    int32_t tokens[24];
    for (int i = 0; i < 24; i++)
        tokens[i] = 1 + i * 19 % (vocab - 1);
    float *plain = tu_reference_logits(model, tokens, 24), *got = tu_reference_logits(scaled, tokens, 24);
    assert_memory_equal(plain, got, (size_t)vocab * sizeof(float)); /* no turn at 0 */
    for (int p = 1; p < 24; p++)
        if (max_abs_diff(plain + (size_t)p * vocab, got + (size_t)p * vocab, vocab) < 1e-3)
            fail_msg("position %d: the factors did not change the logits", p);
    free(plain);
    free(got);
    for (int isa = 0; isa < SIMD_ISA_COUNT; isa++) {
        const simd_kernels *k = simd_kernels_for((simd_isa)isa);
        if (k)
            run_mixed(scaled, k, FWD_GEMM_AUTO, KV_DTYPE_F32, 16, 1e-4);
    }
    ts_model_free(scaled);
}

/* Quantized files (stories260K-k, as tests/CMakeLists.txt extracts it): the mixed steps on
 * the plain-C and the best kernel table against the reference forward on the same file. The
 * reference multiplies f32 activations by the decoded weights, the batched pass int8
 * activations by the blocks (a Q4_K_M file mixes Q4_K and Q6_K matrices): the logits
 * (up to ~16 here) move by up to a few tenths. */
static void test_quantized_batched_matches_reference(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        bool ref_table; /* the plain-C table, else the best */
        fwd_gemm_path path;
        int chunk;
    } runs[] = {
        {"Q4_K_M", false, FWD_GEMM_AUTO, 16},
        {"IQ4_NL", true, FWD_GEMM_KERNEL, 4}, /* TESSERA_GEMM changes only f32 matrices */
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/stories260K-k/stories260K-k-%s.gguf", TS_BUILD_DIR,
                 runs[i].type);
        ts_model *q = NULL;
        ts_error err = {0};
        if (ts_model_load(path, NULL, &q, &err) != TS_OK)
            fail_msg("%s: %s", path, err.msg);
        const simd_kernels *k = runs[i].ref_table ? simd_kernels_for(SIMD_ISA_REF) : simd_init();
        run_mixed(q, k, runs[i].path, KV_DTYPE_F32, runs[i].chunk, QUANT_TOL);
        ts_model_free(q);
    }
}

/* What each step's logits hold before it runs when a test restricts the LM head. */
#define UNSCORED 12345.0f

/* Three steps of three sequences (prompts of 20, 7 and 33 tokens; a decode of each; one
 * decode, a 5-token chunk and a decode) on `threads` OpenMP threads, every step's logits
 * into out (3 x vocab each), the LM head scoring the first head_rows ids (0: all; the
 * logits start as UNSCORED). Sequence 1's table is reserved for only 4 tokens when
 * short_table, so its K/V stores fail in the first step: returns forward_batch's status
 * there, TS_OK when all three ran. */
static ts_status run_three_steps_head(const ts_model *m, fwd_gemm_path path, int threads,
                                      bool short_table, int head_rows, float *out)
{
    static const int prompt[3] = {20, 7, 33}, third[3] = {1, 5, 1};
    int vocab = m->cfg.vocab_size, saved = omp_get_max_threads();
    kv_config kc = {.n_layers = m->cfg.n_layers, .n_kv_heads = m->cfg.n_kv_heads,
                    .head_dim = m->cfg.head_dim, .dtype = KV_DTYPE_F32, .n_blocks = 16};
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &kc, NULL), TS_OK);
    kv_table tables[3];
    fwd_state fs;
    assert_int_equal(fwd_state_init(&fs, m, 64, 3, NULL), TS_OK);
    fs.gemm_path = path;
    fs.head_rows = head_rows;
    omp_set_num_threads(threads);
    ts_status st = TS_OK;
    int pos[3] = {0, 0, 0};
    for (int step = 0; step < 3 && st == TS_OK; step++) {
        fwd_seq seqs[3];
        int32_t tokens[64];
        int rows = 0;
        for (int s = 0; s < 3; s++) {
            int n = step == 0 ? prompt[s] : step == 1 ? 1 : third[s];
            if (step == 0)
                kv_table_init(&tables[s]);
            int reserve = step == 0 && short_table && s == 1 ? 4 : n;
            assert_int_equal(kv_table_reserve(pool, &tables[s], reserve, NULL), TS_OK);
            for (int i = 0; i < n; i++)
                tokens[rows + i] = 1 + (int32_t)((7 * (pos[s] + i) + 31 * s) % (vocab - 1));
            seqs[s] = (fwd_seq){.row0 = rows, .n_rows = n, .pos0 = pos[s], .table = &tables[s],
                                .logits_row = s};
            rows += n;
            pos[s] += n;
        }
        fwd_batch b = {.n_rows = rows, .tokens = tokens, .n_seqs = 3, .seqs = seqs, .n_logits = 3};
        for (size_t i = 0; i < 3 * (size_t)vocab; i++)
            fs.logits[i] = UNSCORED;
        ts_error err = {0};
        st = forward_batch(&fs, m, pool, simd_init(), &b, &err);
        if (st == TS_OK)
            memcpy(out + (size_t)step * 3 * vocab, fs.logits, 3 * (size_t)vocab * sizeof(float));
        else
            assert_non_null(strstr(err.msg, "outside the 4 reserved tokens"));
    }
    omp_set_num_threads(saved);
    for (int s = 0; s < 3; s++)
        kv_table_free(pool, &tables[s]);
    fwd_state_free(&fs);
    kv_pool_free(pool);
    return st;
}

static ts_status run_three_steps(const ts_model *m, fwd_gemm_path path, int threads,
                                 bool short_table, float *out)
{
    return run_three_steps_head(m, path, threads, short_table, 0, out);
}

/* The Q4_K_M file of stories260K-k (extracted into the build at configure time). */
static ts_model *load_q4_k_m(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/stories260K-k/stories260K-k-Q4_K_M.gguf", TS_BUILD_DIR);
    ts_model *q = NULL;
    ts_error err = {0};
    if (ts_model_load(path, NULL, &q, &err) != TS_OK)
        fail_msg("%s: %s", path, err.msg);
    return q;
}

/* forward_batch runs a step as one parallel region of several threads (each operation a
 * worksharing loop) where no matrix goes to OpenBLAS, else a region per operation: both
 * give one thread's bits (every output element is computed alone, whatever the split),
 * on f32 weights through the kernel path and on a Q4_K_M file's packs; and a K/V store
 * that fails inside the region ends the step with its error on every thread, no hang. */
static void test_team_matches_one_thread(void **state)
{
    (void)state;
    ts_model *q = load_q4_k_m();
    const struct {
        const ts_model *m;
        fwd_gemm_path path;
    } runs[] = {{model, FWD_GEMM_KERNEL}, {q, FWD_GEMM_AUTO}, {model, FWD_GEMM_BLAS}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        size_t n = 9 * (size_t)runs[i].m->cfg.vocab_size;
        float *one = malloc(n * sizeof(float)), *team = malloc(n * sizeof(float));
        assert_int_equal(run_three_steps(runs[i].m, runs[i].path, 1, false, one), TS_OK);
        assert_int_equal(run_three_steps(runs[i].m, runs[i].path, 3, false, team), TS_OK);
        if (runs[i].path == FWD_GEMM_BLAS) /* OpenBLAS's sums may split by threads */
            assert_true(max_abs_diff(one, team, (int)n) < 1e-4);
        else if (memcmp(one, team, n * sizeof(float)) != 0)
            fail_msg("run %zu: 3 threads differ from one (max %g)", i,
                     max_abs_diff(one, team, (int)n));
        assert_int_equal(run_three_steps(runs[i].m, runs[i].path, 3, true, team),
                         TS_ERR_INVALID_ARG);
        free(one);
        free(team);
    }
    ts_model_free(q);
}

/* An LM head restricted to the first ids (a draft model's vocabulary, --draft-vocab) gives
 * their logits bit for bit the whole head's and leaves the rest of each row as it was: on
 * f32 weights, on a Q4_K_M file's packs (a Q6_K head), and on those with a final soft-cap
 * (Gemma's, which then caps only the scored ids), at a count inside a 16-row group, on
 * three threads. */
static void test_head_rows_prefix(void **state)
{
    (void)state;
    ts_model *q = load_q4_k_m();
    const ts_model *models[] = {model, q, q};
    float *plain = NULL; /* the Q4_K_M head's logits without the cap */
    for (int i = 0; i < 3; i++) {
        q->cfg.final_softcap = i == 2 ? 4.0f : 0.0f;
        int vocab = models[i]->cfg.vocab_size, head = 37;
        size_t n = 9 * (size_t)vocab;
        float *all = malloc(n * sizeof(float)), *part = malloc(n * sizeof(float));
        assert_int_equal(run_three_steps_head(models[i], FWD_GEMM_AUTO, 3, false, 0, all), TS_OK);
        assert_int_equal(run_three_steps_head(models[i], FWD_GEMM_AUTO, 3, false, head, part),
                         TS_OK);
        int differ = 0, touched = 0, capped = 0;
        for (size_t r = 0; r < 9; r++)
            for (int v = 0; v < vocab; v++) {
                float a = all[r * vocab + v], p = part[r * vocab + v];
                if (v < head && memcmp(&a, &p, sizeof a) != 0)
                    differ++;
                if (v >= head && p != UNSCORED)
                    touched++;
                if (i == 2 && v < head)
                    capped += fabsf(p) <= 4.0f && p != plain[r * vocab + v];
            }
        assert_int_equal(differ, 0);
        assert_int_equal(touched, 0);
        assert_true(all[head] != UNSCORED); /* the whole head wrote past it */
        if (i == 2)
            assert_int_equal(capped, 9 * head); /* every scored logit capped */
        free(part);
        if (i == 1)
            plain = all;
        else
            free(all);
    }
    free(plain);
    ts_model_free(q);
}

/* A long step's GEMM runs in blocks of rows (a thread's chunks of one block before the
 * next's): its rows come out as when each slice of 100 runs alone, bit for bit, on a
 * Q4_K_M file's packs (Q4_K and Q6_K, one and two matrices a pass, K = dim and ffn), on
 * three threads. 700 rows make three blocks at any K here (256 rows a block at most). */
static void test_row_blocks_match_slices(void **state)
{
    (void)state;
    ts_model *q = load_q4_k_m();
    enum { M = 700, SLICE = 100 };
    const model_layer *l = &q->w.layers[0];
    const simd_qmat *passes[3][2] = {{&l->w1, &l->w3}, {&l->wv, NULL}, {&l->w2, NULL}};
    const simd_qmat *all[] = {&l->w1, &l->w3, &l->wv, &l->w2};
    fwd_qbuf qb;
    assert_int_equal(fwd_qbuf_init(&qb, all, 4, M, l->w2.K > l->w1.K ? l->w2.K : l->w1.K, NULL),
                     TS_OK);
    const simd_kernels *k = simd_init();
    int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    for (int p = 0; p < 3; p++) {
        int n_w = passes[p][1] ? 2 : 1, K = passes[p][0]->K, N = 0;
        for (int i = 0; i < n_w; i++)
            N += passes[p][i]->N;
        float *a = malloc((size_t)M * K * sizeof(float));
        float *whole = malloc((size_t)M * N * sizeof(float));
        float *sliced = malloc((size_t)M * N * sizeof(float));
        for (size_t i = 0; i < (size_t)M * K; i++)
            a[i] = (float)((int)(i * 2654435761u % 2001) - 1000) / 1000.0f;
        fwd_gemm(k, FWD_GEMM_AUTO, &qb, whole, (size_t)N, a, K, NULL, passes[p], n_w, M, 0.0f);
        for (int r0 = 0; r0 < M; r0 += SLICE)
            fwd_gemm(k, FWD_GEMM_AUTO, &qb, sliced + (size_t)r0 * N, (size_t)N,
                     a + (size_t)r0 * K, K, NULL, passes[p], n_w, SLICE, 0.0f);
        for (int r = 0; r < M; r++)
            if (memcmp(whole + (size_t)r * N, sliced + (size_t)r * N, N * sizeof(float)))
                fail_msg("pass %d (K %d): row %d of %d differs from its slice's", p, K, r, M);
        free(a);
        free(whole);
        free(sliced);
    }
    omp_set_num_threads(saved);
    fwd_qbuf_free(&qb);
    ts_model_free(q);
}

/* out = the pass over w of a (M x K, stride lda) after pre, by fwd_gemm (team false) or
 * fwd_gemm_team inside a region of three threads; a is rewritten by pre. */
static void pre_pass(const simd_kernels *k, fwd_gemm_path path, const fwd_qbuf *qb, bool team,
                     float *out, size_t ldo, float *a, int lda, const fwd_pre *pre,
                     const simd_qmat *const *w, int n_w, int M)
{
    if (team) {
#pragma omp parallel num_threads(3)
        fwd_gemm_team(k, qb, out, ldo, a, lda, pre, w, n_w, M, 0.0f);
    } else {
        fwd_gemm(k, path, qb, out, ldo, a, lda, pre, w, n_w, M, 0.0f);
    }
}

/* A long step's pass over small F16 matrices (bf16 forms) splits its rows among the
 * threads, each making its rows' bf16 form in a slot of its own (fwd_gemm_rows_task): the
 * rows come out as when each slice of 100 (split by columns) runs alone, bit for bit,
 * with the SwiGLU as pre, through fwd_gemm and fwd_gemm_team on three threads. The packs
 * run the plain-C twin here (SIMD_PACK_ALWAYS), the AMX bf16 tiles where they run. */
static void test_bf16_row_split_matches_slices(void **state)
{
    (void)state;
    enum { M = 700, SLICE = 100, K = 256, N0 = 192, N1 = 64, N = N0 + N1 };
    const simd_kernels *k = simd_init();
    simd_qmat wm[2] = {{.type = QT_F16, .N = N0, .K = K, .row_bytes = 2 * K},
                       {.type = QT_F16, .N = N1, .K = K, .row_bytes = 2 * K}};
    uint16_t *wd = malloc(sizeof(uint16_t) * (size_t)N * K);
    float *wf = malloc(sizeof(float) * (size_t)N * K);
    for (size_t i = 0; i < (size_t)N * K; i++)
        wf[i] = (float)((int)(i * 2246822519u % 2001) - 1000) / 4000.0f;
    k->f32_to_f16(wd, wf, (size_t)N * K);
    wm[0].data = wd, wm[1].data = wd + (size_t)N0 * K;
    for (int i = 0; i < 2; i++) {
        simd_qmat_plan(&wm[i], k, SIMD_PACK_ALWAYS);
        assert_int_equal(simd_qmat_act(&wm[i]), SIMD_ACT_BF16);
    }
    const simd_qmat *w[] = {&wm[0], &wm[1]};
    assert_true(fwd_gemm_rows_task(w, 2, M, 3) > 0);     /* the whole step: rows */
    assert_int_equal(fwd_gemm_rows_task(w, 2, SLICE, 3), 0); /* a slice: columns */
    fwd_qbuf qb;
    assert_int_equal(fwd_qbuf_init(&qb, w, 2, M, K, NULL), TS_OK);
    size_t n_x = (size_t)M * 2 * K;
    float *x = malloc(n_x * sizeof(float)), *in = malloc(n_x * sizeof(float));
    float *in_sliced = malloc(n_x * sizeof(float));
    float *whole = malloc(sizeof(float) * (size_t)M * N);
    float *sliced = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < n_x; i++)
        x[i] = (float)((int)(i * 2654435761u % 2001) - 1000) / 500.0f;
    fwd_pre swiglu = {.kind = FWD_PRE_SILU_MUL};
    int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    for (int team = 0; team < 2; team++) {
        memcpy(in, x, n_x * sizeof(float));
        memcpy(in_sliced, x, n_x * sizeof(float));
        pre_pass(k, FWD_GEMM_AUTO, &qb, team, whole, N, in, 2 * K, &swiglu, w, 2, M);
        for (int r0 = 0; r0 < M; r0 += SLICE)
            pre_pass(k, FWD_GEMM_AUTO, &qb, team, sliced + (size_t)r0 * N, N,
                     in_sliced + (size_t)r0 * 2 * K, 2 * K, &swiglu, w, 2, SLICE);
        if (memcmp(in, in_sliced, n_x * sizeof(float)))
            fail_msg("team %d: the SwiGLU's rows differ", team);
        for (int r = 0; r < M; r++)
            if (memcmp(whole + (size_t)r * N, sliced + (size_t)r * N, N * sizeof(float)))
                fail_msg("team %d: row %d of %d differs from its slice's", team, r, M);
    }
    omp_set_num_threads(saved);
    fwd_qbuf_free(&qb);
    for (int i = 0; i < 2; i++)
        simd_qpack_free(wm[i].pack);
    free(wd), free(wf), free(x), free(in), free(in_sliced), free(whole), free(sliced);
}

/* A GEMM pass's pre (the RMS norm, the SwiGLU) leaves its input rows and its output as the
 * separate row stage then the pass did, bit for bit: on the Q4_K_M file's packs through
 * fwd_gemm and fwd_gemm_team, and on stories260K's f32 matrices through OpenBLAS (which
 * reads the rows before the pass quantizes any). Three threads, 37 rows (slices of 12
 * and 13 rows a thread). */
static void test_pre_matches_separate_stage(void **state)
{
    (void)state;
    ts_model *q = load_q4_k_m();
    enum { M = 37 };
    const simd_kernels *k = simd_init();
    int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    struct {
        const ts_model *m;
        fwd_gemm_path path;
        bool team;
    } runs[] = {{q, FWD_GEMM_AUTO, false}, {q, FWD_GEMM_AUTO, true}, {model, FWD_GEMM_BLAS, false}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        const ts_model *m = runs[i].m;
        const model_layer *l = &m->w.layers[0];
        int dim = m->cfg.dim, ffn = m->cfg.hidden_dim;
        const simd_qmat *w13[] = {&l->w1, &l->w3}, *w2[] = {&l->w2};
        const simd_qmat *all[] = {&l->w1, &l->w3, &l->w2};
        fwd_qbuf qb;
        assert_int_equal(fwd_qbuf_init(&qb, all, 3, M, ffn > dim ? ffn : dim, NULL), TS_OK);
        size_t n_x = (size_t)M * 2 * ffn, n_out = (size_t)M * 2 * ffn;
        float *x = malloc(n_x * sizeof(float)), *ref_in = malloc(n_x * sizeof(float));
        float *in = malloc(n_x * sizeof(float));
        float *ref_out = malloc(n_out * sizeof(float)), *out = malloc(n_out * sizeof(float));
        for (size_t j = 0; j < n_x; j++)
            x[j] = (float)((int)(j * 2654435761u % 2001) - 1000) / 500.0f;

        /* the norm of x into the input of W1|W3 */
        for (int r = 0; r < M; r++)
            k->rmsnorm(ref_in + (size_t)r * dim, x + (size_t)r * dim, m->w.rms_ffn, 1, dim,
                       m->cfg.rms_eps);
        pre_pass(k, runs[i].path, &qb, runs[i].team, ref_out, 2 * (size_t)ffn, ref_in, dim, NULL,
                 w13, 2, M);
        fwd_pre norm = {.kind = FWD_PRE_RMSNORM, .x = x, .weight = m->w.rms_ffn,
                        .eps = m->cfg.rms_eps};
        memset(in, 0xff, n_x * sizeof(float)); /* NaNs where the pass must write */
        pre_pass(k, runs[i].path, &qb, runs[i].team, out, 2 * (size_t)ffn, in, dim, &norm, w13,
                 2, M);
        if (memcmp(in, ref_in, (size_t)M * dim * sizeof(float)))
            fail_msg("run %zu: the pass's norm differs from the stage's", i);
        if (memcmp(out, ref_out, (size_t)M * 2 * ffn * sizeof(float)))
            fail_msg("run %zu: W1|W3 after the pass's norm differs", i);

        /* silu(gate) * up of x (gate | up rows) into the input of W2 */
        memcpy(ref_in, x, n_x * sizeof(float));
        for (int r = 0; r < M; r++) {
            float *g = ref_in + (size_t)r * 2 * ffn;
            k->silu_mul(g, g, g + ffn, (size_t)ffn);
        }
        pre_pass(k, runs[i].path, &qb, runs[i].team, ref_out, (size_t)dim, ref_in, 2 * ffn, NULL,
                 w2, 1, M);
        memcpy(in, x, n_x * sizeof(float));
        fwd_pre swiglu = {.kind = FWD_PRE_SILU_MUL};
        pre_pass(k, runs[i].path, &qb, runs[i].team, out, (size_t)dim, in, 2 * ffn, &swiglu, w2,
                 1, M);
        if (memcmp(in, ref_in, n_x * sizeof(float)))
            fail_msg("run %zu: the pass's SwiGLU differs from the stage's", i);
        if (memcmp(out, ref_out, (size_t)M * dim * sizeof(float)))
            fail_msg("run %zu: W2 after the pass's SwiGLU differs", i);
        free(x);
        free(ref_in);
        free(in);
        free(ref_out);
        free(out);
        fwd_qbuf_free(&qb);
    }
    omp_set_num_threads(saved);
    ts_model_free(q);
}

/* The build links OpenBLAS's OpenMP flavour, whose threads are our OpenMP pool: the
 * pthread flavour would run its own threads against the engine's team. */
static void test_openblas_is_the_openmp_build(void **state)
{
    (void)state;
    assert_int_equal(openblas_get_parallel(), OPENBLAS_OPENMP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_matches_reference_f32),
        cmocka_unit_test(test_batched_f16_kv_stays_close),
        cmocka_unit_test(test_split_context_matches_reference),
        cmocka_unit_test(test_every_gemm_path_matches_reference),
        cmocka_unit_test(test_gemm_env),
        cmocka_unit_test(test_openblas_is_the_openmp_build),
        cmocka_unit_test(test_rope_factors_batched_matches_reference),
        cmocka_unit_test(test_quantized_batched_matches_reference),
        cmocka_unit_test(test_team_matches_one_thread),
        cmocka_unit_test(test_head_rows_prefix),
        cmocka_unit_test(test_row_blocks_match_slices),
        cmocka_unit_test(test_bf16_row_split_matches_slices),
        cmocka_unit_test(test_pre_matches_separate_stage),
    };
    return cmocka_run_group_tests_name("forward_batch", tests, setup, teardown);
}
