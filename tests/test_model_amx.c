/* test_model_amx.c: models whose matrices are repacked at load (ts_pack_mode,
 * simd/qpack.h). TS_PACK_FORCE packs on any CPU, the GEMM then running the vector kernel
 * (AVX-512 VNNI), the AMX tiles from 16 rows, or the plain-C twin, all bit for bit the same,
 * so the wiring is tested on any machine. Checked: which matrices
 * pack, the batched pass on packs against the reference forward and against the unpacked
 * pass (logits and greedy tokens), packed and unpacked matrices mixed in one pass, batch
 * invariance, the RSS of a packed Q8_0 model, and that packing leaves no OpenMP threads
 * behind on the loading thread. */
#include <dirent.h>
#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "model/forward_batch.h"
#include "model/forward_ref.h"
#include "model/synth.h"
#include "qpack.h"
#include "qpack_internal.h"
#include "step_util.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define MA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MA_ASAN 1
#endif
#endif
#ifndef MA_ASAN
#define MA_ASAN 0
#endif

static ts_model *load_packed(const char *path, ts_pack_mode mode)
{
    ts_model *m = NULL;
    ts_error err = {0};
    ts_model_load_opts o = {.pack = mode};
    if (ts_model_load_with(path, &o, &m, &err) != TS_OK)
        fail_msg("loading %s: %s", path, err.msg);
    return m;
}

/* Drops the pack of layer 0's attn_k and ffn_up (they then run qgemm on the file's
 * blocks), so Wq|Wk|Wv and W1|W3 each mix a packed and an unpacked matrix. */
static void unpack_some(ts_model *m)
{
    model_layer *ly = &m->w.layers[0];
    simd_qpack_free(ly->wk.pack);
    simd_qpack_free(ly->w3.pack);
    ly->wk.pack = ly->w3.pack = NULL;
    simd_qmat_plan(&ly->wk, simd_init(), SIMD_PACK_NEVER);
    simd_qmat_plan(&ly->w3, simd_init(), SIMD_PACK_NEVER);
}

/* ---- which matrices pack ---- */

static void test_modes_choose_matrices(void **state)
{
    (void)state;
    int packed, n;
    uint64_t bytes;
    ts_pack_mode mode;
    assert_true(ts_pack_mode_parse("force", &mode) && mode == TS_PACK_FORCE);
    assert_true(ts_pack_mode_parse("off", &mode) && mode == TS_PACK_OFF);
    assert_false(ts_pack_mode_parse("tiles", &mode));
    /* off packs nothing */
    ts_model *m = load_packed(su_kpath("stories260K-k-%s.gguf", "Q8_0"), TS_PACK_OFF);
    ts_model_packed(m, &packed, &n, &bytes);
    assert_int_equal(packed, 0);
    assert_int_equal(n, 7 * m->cfg.n_layers + 1);
    ts_model_free(m);

    /* auto (a zeroed ts_model_load_opts) packs every matrix of the Q8_0 and Q4_K_M files
     * (Q8_0; Q4_K and Q6_K) where a packed kernel runs, none elsewhere */
    assert_int_equal(TS_PACK_AUTO, 0);
    bool fast = simd_qpack_fast(QT_Q8_0);
    assert_true(simd_qpack_fast(QT_Q4_K) == fast && simd_qpack_fast(QT_Q6_K) == fast);
    m = load_packed(su_kpath("stories260K-k-%s.gguf", "Q8_0"), TS_PACK_AUTO);
    ts_model_packed(m, &packed, &n, &bytes);
    assert_int_equal(packed, fast ? n : 0);
    ts_model_free(m);
    m = load_packed(su_kpath("stories260K-k-%s.gguf", "Q4_K_M"), TS_PACK_AUTO);
    ts_model_packed(m, &packed, &n, &bytes);
    assert_int_equal(packed, fast ? n : 0);
    ts_model_free(m);

    /* force packs every matrix of a type the pack takes (any file's), nothing else */
    for (int t = 0; t < SU_N_TYPES; t++) {
        m = load_packed(su_kpath("stories260K-k-%s.gguf", su_types[t]), TS_PACK_FORCE);
        int want = 0;
        for (int i = 0; i < n; i++) {
            const model_layer *ly = &m->w.layers[i < 1 ? 0 : (i - 1) / 7];
            const simd_qmat *lm[] = {&ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->w1, &ly->w3, &ly->w2};
            const simd_qmat *w = i == 0 ? &m->w.output : lm[(i - 1) % 7];
            bool ok = simd_qpack_supports(w->type);
            want += ok;
            if ((w->pack != NULL) != ok)
                fail_msg("%s: matrix %d (%s) %s", su_types[t], i, qtype_get(w->type)->name,
                         ok ? "not packed" : "packed");
            if (!w->pack)
                continue;
            /* tiles: 8-bit units, Q4_K and Q6_K (AMX-INT8), bf16 packs (AMX-BF16) */
            int caps = qpack_amx_caps();
            bool int8 = w->pack->bits == 8 || w->type == QT_Q4_K || w->type == QT_Q6_K;
            bool tiles = int8                 ? (caps & QP_CAP_INT8) != 0
                         : w->pack->bits == 0 ? (caps & QP_CAP_BF16) != 0
                                              : false;
            if ((w->mul.tiles != NULL) != tiles)
                fail_msg("%s: matrix %d (%s, %d-bit pack) %s tiles; tile caps %#x", su_types[t],
                         i, qtype_get(w->type)->name, w->pack->bits,
                         tiles ? "not on" : "on", caps);
        }
        ts_model_packed(m, &packed, &n, &bytes);
        assert_int_equal(packed, want);
        assert_null(m->w.tok_embd.pack);
        ts_model_free(m);
    }
}

/* ---- the packed pass against the reference and the unpacked pass ---- */

enum { PROMPT = 20, GEN = 12 };

/* Greedy decoding from a fixed prompt: the prompt in one step, then one token a step,
 * beside a second sequence that prefills 7 rows a step. tokens (GEN) get the choices,
 * logits (GEN + 1, vocab) every step's logits of the first sequence. */
static void greedy(const ts_model *m, int32_t *tokens, float *logits)
{
    int vocab = m->cfg.vocab_size;
    int32_t seq[PROMPT + GEN], other[7 * (GEN + 1)];
    for (int i = 0; i < PROMPT; i++)
        seq[i] = i == 0 ? 1 : 3 + (i * 37) % (vocab - 3);
    for (int i = 0; i < 7 * (GEN + 1); i++)
        other[i] = i == 0 ? 1 : 3 + (i * 53 + 11) % (vocab - 3);
    su_runner r;
    su_runner_init(&r, m, simd_init(), PROMPT + 8);
    float *out[SU_MAX_SEQS] = {logits, malloc((size_t)vocab * sizeof(float))};
    assert_non_null(out[1]);
    for (int step = 0; step <= GEN; step++) {
        int cnt[SU_MAX_SEQS] = {step == 0 ? PROMPT : 1, 7};
        int32_t *toks[SU_MAX_SEQS] = {step == 0 ? seq : seq + PROMPT + step - 1,
                                      other + 7 * step};
        out[0] = logits + (size_t)step * vocab;
        su_runner_step(&r, toks, cnt, out);
        if (step < GEN)
            seq[PROMPT + step] = tokens[step] = su_argmax(out[0], vocab);
    }
    free(out[1]);
    su_runner_free(&r);
}

/* The reference forward's logits at the rows greedy() sampled (GEN + 1, vocab), on its
 * prompt followed by tokens (GEN). */
static float *reference(const ts_model *m, const int32_t *tokens)
{
    int vocab = m->cfg.vocab_size;
    int32_t seq[PROMPT + GEN];
    for (int i = 0; i < PROMPT; i++)
        seq[i] = i == 0 ? 1 : 3 + (i * 37) % (vocab - 3);
    memcpy(seq + PROMPT, tokens, GEN * sizeof *tokens);
    float *all = tu_reference_logits(m, seq, PROMPT + GEN), *rows = malloc((size_t)(GEN + 1) *
                                                                            vocab * sizeof(float));
    assert_non_null(rows);
    memcpy(rows, all + (size_t)(PROMPT - 1) * vocab, (size_t)(GEN + 1) * vocab * sizeof(float));
    free(all);
    return rows;
}

/* For each file: packed (all, then with some matrices unpacked) against the unpacked
 * pass and the reference forward. Each packed GEMM is within ~1e-6 of qgemm (the same
 * activation blocks, another summation order), but a difference that flips the rounding
 * of one activation to int8 in a later layer moves the logits by that step: up to ~1e-2
 * of the largest logit (3e-2 measured on Q4_0). The bf16 packs round activations (and F16 weights) to 8
 * significant bits, so their greedy tokens may part from the unpacked pass's at a near
 * tie. So: the same greedy tokens (int8), logits within vs_plain of the unpacked pass's,
 * and as close to the reference as the unpacked pass is, within 1.5x + slack (bf16:
 * 5.4e-3 measured where the f32 path is at 1.4e-6). */
static void test_packed_pass_matches(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        double vs_plain, slack;
    } files[] = {{"Q8_0", 4e-2, 5e-3}, {"Q4_K_M", 4e-2, 5e-3}, {"Q4_0", 4e-2, 5e-3},
                 {"F16", 1.5e-2, 1.5e-2}};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        const char *path = su_kpath("stories260K-k-%s.gguf", files[f].type);
        bool bf16 = files[f].type[0] != 'Q';
        ts_model *plain = load_packed(path, TS_PACK_OFF);
        int vocab = plain->cfg.vocab_size;
        size_t n = (size_t)(GEN + 1) * vocab;
        float *lp = malloc(n * sizeof(float)), *lq = malloc(n * sizeof(float));
        int32_t tp[GEN], tq[GEN];
        assert_true(lp && lq);
        greedy(plain, tp, lp);
        float *ref = reference(plain, tp);
        double er_plain = su_rel_err(lp, ref, GEN + 1, vocab);
        for (int mixed = 0; mixed < 2; mixed++) {
            ts_model *m = load_packed(path, TS_PACK_FORCE);
            if (mixed)
                unpack_some(m);
            greedy(m, tq, lq);
            bool same = memcmp(tp, tq, sizeof tp) == 0;
            /* once the tokens part, compare the prompt's step with the unpacked pass and
             * every step with the reference on the packed pass's own tokens */
            float *own = same ? ref : reference(m, tq);
            double e = su_rel_err(lq, lp, same ? GEN + 1 : 1, vocab);
            double er = su_rel_err(lq, own, GEN + 1, vocab);
            double bound = 1.5 * er_plain + files[f].slack;
            printf("  %-6s %s: vs unpacked %.2e, vs reference %.2e (unpacked %.2e), greedy %s\n",
                   files[f].type, mixed ? "mixed " : "packed", e, er, er_plain,
                   same ? "same" : "parts at a near tie");
            if (!same && !bf16)
                fail_msg("%s: greedy tokens differ with the pack", files[f].type);
            if (e > files[f].vs_plain || er > bound)
                fail_msg("%s: packed logits off by %g (bound %g) from unpacked, %g (bound %g) "
                         "from the reference", files[f].type, e, files[f].vs_plain, er, bound);
            if (own != ref)
                free(own);
            ts_model_free(m);
        }
        free(ref);
        free(lp);
        free(lq);
        ts_model_free(plain);
    }
}

/* ---- batch invariance ---- */

/* A's steps: 10 + 13 + 1 rows, then 1 + 15 + 1, then 1 + 1 + 1. Alone, A's steps stay under
 * QP_TILE_MIN_M rows, beside the others its first two reach it: where AMX runs, its logits
 * come from the vector kernel alone and from the tiles together (on the Q8_0 and Q6_K
 * matrices; Q4_K's take tiles from more rows), which must give the same bits. */
static void test_batch_invariance_with_packs(void **state)
{
    (void)state;
    static const su_schedule sch = {.a_prefill = 10, .n_b = 2, .b_rows = {13, 15}};
    static const char *const types[] = {"Q8_0", "Q4_K_M", "BF16"};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int mixed = t > 0; mixed < 2; mixed++) { /* Q8_0 alone, the others mixed */
            ts_model *m = load_packed(su_kpath("stories260K-k-%s.gguf", types[t]), TS_PACK_FORCE);
            if (mixed)
                unpack_some(m);
            float *alone = su_logits_of_a(m, false, &sch);
            float *together = su_logits_of_a(m, true, &sch);
            if (memcmp(alone, together,
                       SU_A_STEPS * (size_t)m->cfg.vocab_size * sizeof(float)) != 0)
                fail_msg("%s%s: a sequence's logits change when others share its steps",
                         types[t], mixed ? " (mixed)" : "");
            free(alone);
            free(together);
            ts_model_free(m);
        }
}

/* ---- memory ---- */

/* A packed Q8_0 model (about 27 MB) costs at most the file's size + 10% of RSS after a
 * step beyond the KV pool: the packs (1.06x) replace the mapped pages they came from. */
static void test_packed_q8_0_rss_is_the_file(void **state)
{
    (void)state;
    if (MA_ASAN) { /* packing and a step on packs run under it in test_packed_pass_matches */
        print_message("skipped: RSS under AddressSanitizer counts its shadow memory\n");
        skip();
    }
    const char *path = tu_tmp_path("rss-amx-q8_0.gguf");
    ts_model_config c = {.arch = "llama", .name = "rss", .dim = 1024, .hidden_dim = 2816,
                         .n_layers = 2, .n_heads = 8, .n_kv_heads = 4, .head_dim = 128,
                         .vocab_size = 512, .context_len = 512, .rope_freq_base = 10000.0f,
                         .rope_scale = 1.0f, .rms_eps = 1e-5f};
    gguf_file *sf = NULL;
    tokenizer_vocab v;
    ts_error err = {0};
    assert_int_equal(gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &sf, NULL), TS_OK);
    assert_int_equal(vocab_read_gguf(&v, sf, NULL), TS_OK);
    gguf_close(sf);
    if (model_synth_write(path, &c, "Q8_0", &v, 5, &err) != TS_OK)
        fail_msg("writing %s: %s", path, err.msg);
    vocab_clear(&v);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    double file_size = (double)ftell(fp);
    fclose(fp);

    long before = tu_rss_bytes();
    ts_model *m = load_packed(path, TS_PACK_FORCE);
    int packed, n;
    uint64_t pack_bytes;
    ts_model_packed(m, &packed, &n, &pack_bytes);
    assert_int_equal(packed, n);
    double kv_bytes, cost = su_step_rss_cost(m, before, &kv_bytes);
    printf("  Q8_0 file %.1f MB, packs %.1f MB: load + one step cost %.1f MB of RSS beyond "
           "the KV pool, %.2f x the file\n", file_size / 1e6, (double)pack_bytes / 1e6,
           cost / 1e6, cost / file_size);
    assert_true(cost <= 1.10 * file_size);
    assert_true(cost >= 0.50 * file_size); /* the measure sees the packs */
    ts_model_free(m);
    remove(path);
}

/* ---- packing leaves no threads behind ---- */

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The process's threads, once it has been back at `want` or 2 s have passed (a finished
 * OpenMP pool's threads exit just after the thread that owned it is joined). */
static int threads_settled(int want)
{
    int n = count_threads();
    for (int i = 0; i < 200 && n != want; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
        n = count_threads();
    }
    return n;
}

/* The process's threads once the count has held for 100 ms (at most 2 s): an earlier
 * test's pools may still be exiting. */
static int threads_steady(void)
{
    int n = count_threads();
    for (int i = 0, same = 0; i < 100 && same < 5; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
        int now = count_threads();
        same = now == n ? same + 1 : 0;
        n = now;
    }
    return n;
}

static void *load_on_fresh_thread(void *arg)
{
    int *grew = arg;
    omp_set_num_threads(4);
    int before = threads_steady(); /* 8 threads of an earlier pack's pool can still be
                                    * exiting; grew would read -8 */
    ts_model *m = load_packed(su_kpath("stories260K-k-%s.gguf", "Q8_0"), TS_PACK_FORCE);
    int packed, n;
    uint64_t bytes;
    ts_model_packed(m, &packed, &n, &bytes);
    *grew = packed == n ? threads_settled(before) - before : -1000;
    ts_model_free(m);
    return NULL;
}

/* Packing runs its parallel loop on a thread of its own, so the loading thread is left
 * without an OpenMP pool: a second pool beside the engine's would make libgomp stop
 * spinning between the engine's parallel regions (src/common/own_thread.h). The load runs
 * on a fresh thread (this binary's main thread may own a pool from earlier tests) asking
 * for 4 OpenMP threads, whose 3 workers would stay while the loader lives. */
static void test_packing_leaves_no_threads(void **state)
{
    (void)state;
    pthread_t t;
    int grew = -1;
    assert_int_equal(pthread_create(&t, NULL, load_on_fresh_thread, &grew), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(grew, 0);
}

int main(void)
{
    printf("packed int8-type matrices run on: %s%s\n", ts_pack_kernels(),
           simd_amx_usable() ? "" : " (no AMX tiles here: those tests run without them)");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_choose_matrices),
        cmocka_unit_test(test_packed_pass_matches),
        cmocka_unit_test(test_batch_invariance_with_packs),
        cmocka_unit_test(test_packed_q8_0_rss_is_the_file),
        cmocka_unit_test(test_packing_leaves_no_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
