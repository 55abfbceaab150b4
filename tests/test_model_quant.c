/* test_model_quant.c: models computed on the file's own blocks. Every stories260K-k type
 * loads with its matrices pointing into the mapping, and the batched forward agrees with
 * the reference forward on the same file; batch invariance on quantized files; --mlock;
 * writing any type back as F32; and the RSS a mapped Q4_K_M model costs. (Against
 * llama.cpp's greedy text: test_model_greedy.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <cmocka.h>

#include "model/forward_batch.h"
#include "model/forward_ref.h"
#include "model/model_gguf.h"
#include "tokenizer/vocab.h"
#include "step_util.h"
#include "util.h"

/* AddressSanitizer's shadow memory and quarantine make RSS say nothing about ours. */
#if defined(__SANITIZE_ADDRESS__)
#define MQ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MQ_ASAN 1
#endif
#endif
#ifndef MQ_ASAN
#define MQ_ASAN 0
#endif

/* ---- every type loads mapped, and the batched pass matches the reference ---- */

/* Every matrix of m is the file's tensor of that name: same type, bytes inside the
 * mapping, nothing copied. */
static void assert_mapped(const ts_model *m)
{
    const gguf_file *f = m->file;
    assert_non_null(f);
    assert_non_null(f->map);
    static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                        "ffn_gate", "ffn_up", "ffn_down"};
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const model_layer *ly = &m->w.layers[l];
        const simd_qmat *mats[] = {&ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->w1, &ly->w3, &ly->w2};
        for (int i = 0; i < 7; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, names[i]);
            const gguf_tensor *t = gguf_find_tensor(f, name);
            assert_non_null(t);
            assert_ptr_equal(mats[i]->data, t->data);
            assert_int_equal(mats[i]->type, t->type);
            assert_true((size_t)mats[i]->N * mats[i]->row_bytes == t->nbytes);
        }
    }
    const gguf_tensor *e = gguf_find_tensor(f, "token_embd.weight");
    assert_ptr_equal(m->w.tok_embd.data, e->data);
    assert_int_equal(m->w.tok_embd.type, e->type);
    const gguf_tensor *o = gguf_find_tensor(f, "output.weight");
    if (o) {
        assert_ptr_equal(m->w.output.data, o->data);
        assert_int_equal(m->w.output.type, o->type);
    }
    assert_null(m->w.store); /* no owned copy of any matrix */
}

/* How far the batched pass may be from the reference, relative to the largest reference
 * logit of the row. The reference multiplies f32 activations by the decoded weights; the
 * batched pass multiplies int8 activations (one scale per 32 or 256) by the blocks, five
 * layers deep: measured 1.7e-2 .. 3.9e-2 for the types of 4 bits or more, up to 4.5e-2
 * (Q3_K_M) and 6.7e-2 (Q2_K) on other sequences, whose coarse weights amplify the
 * activations' rounding. F32, F16 and BF16 keep f32 activations: rounding only (~1e-6). */
static double tolerance(const char *type)
{
    if (!strcmp(type, "f32") || !strcmp(type, "F16") || !strcmp(type, "BF16"))
        return 1e-5;
    if (!strcmp(type, "Q2_K") || !strcmp(type, "Q3_K_M"))
        return 9e-2;
    return 5e-2;
}

/* Three sequences: one prefilled in one step and then decoding, one prefilled in chunks
 * beside it, one of a single token. */
enum { MIX_LEN = 24 };
static const int mix_lens[3] = {MIX_LEN, 17, 1};

static void mix_tokens(int32_t tok[3][MIX_LEN], int vocab)
{
    unsigned rng = 7;
    for (int s = 0; s < 3; s++) {
        tok[s][0] = 1;
        for (int i = 1; i < MIX_LEN; i++) {
            rng = rng * 1103515245u + 12345u;
            tok[s][i] = 3 + (int32_t)((rng >> 8) % (unsigned)(vocab - 3));
        }
    }
}

/* Every sampled row of the mix through kernels k against the reference logits ref[s]
 * (mix_lens[s], vocab). Returns the largest error relative to the largest reference
 * logit of its row. */
static double batched_vs_reference(ts_model *m, const simd_kernels *k, float *const *ref)
{
    model_use_kernels(m, k); /* the matrices on k's kernels too; back to the default below */
    enum { LEN = MIX_LEN };
    int vocab = m->cfg.vocab_size;
    int32_t tok[3][LEN];
    const int *lens = mix_lens;
    mix_tokens(tok, vocab);
    su_runner r;
    su_runner_init(&r, m, k, 3 * LEN);
    float *out[SU_MAX_SEQS];
    for (int s = 0; s < SU_MAX_SEQS; s++)
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
    double worst = 0;
    int done[3] = {0};
    for (int stepno = 0;; stepno++) {
        int cnt[SU_MAX_SEQS] = {0};
        int32_t *toks[SU_MAX_SEQS] = {0};
        /* seq 0: 16 rows then decodes; seq 1: chunks of 6; seq 2: its one token */
        int want[3] = {stepno == 0 ? 16 : 1, 6, 1};
        bool any = false;
        for (int s = 0; s < 3; s++) {
            int left = lens[s] - done[s];
            cnt[s] = left < want[s] ? left : want[s];
            toks[s] = tok[s] + done[s];
            any |= cnt[s] > 0;
        }
        if (!any)
            break;
        su_runner_step(&r, toks, cnt, out);
        for (int s = 0; s < 3; s++) {
            if (cnt[s] == 0)
                continue;
            done[s] += cnt[s];
            const float *want_l = ref[s] + (size_t)(done[s] - 1) * vocab;
            worst = fmax(worst, su_rel_err(out[s], want_l, 1, vocab));
        }
    }
    for (int s = 0; s < SU_MAX_SEQS; s++)
        free(out[s]);
    su_runner_free(&r);
    model_use_kernels(m, simd_init());
    return worst;
}

static void test_every_type_maps_and_matches_reference(void **state)
{
    (void)state;
    char failures[1024] = "";
    size_t used = 0;
    for (int t = 0; t < SU_N_TYPES; t++) {
        ts_model *m = su_load_type(su_types[t]);
        assert_mapped(m);
        int32_t tok[3][MIX_LEN];
        float *ref[3];
        mix_tokens(tok, m->cfg.vocab_size);
        tu_decoded *d = tu_decode_matrices(m);
        for (int s = 0; s < 3; s++)
            ref[s] = tu_reference_logits(m, tok[s], mix_lens[s]);
        tu_restore_matrices(m, d);
        for (int isa = 0; isa < SIMD_ISA_COUNT; isa++) {
            const simd_kernels *k = simd_kernels_for((simd_isa)isa);
            if (!k)
                continue;
            double e = batched_vs_reference(m, k, ref);
            printf("  %-7s %-6s batched vs reference: %.2e of the largest logit\n", su_types[t],
                   k->name, e);
            if (e > tolerance(su_types[t]))
                used += (size_t)snprintf(failures + used, sizeof failures - used,
                                         "%s on %s: %g of the largest logit (bound %g); ",
                                         su_types[t], k->name, e, tolerance(su_types[t]));
            assert_true(used < sizeof failures);
        }
        for (int s = 0; s < 3; s++)
            free(ref[s]);
        ts_model_free(m);
    }
    if (used)
        fail_msg("batched logits differ from the reference's: %s", failures);
}

/* ---- batch invariance ---- */

static void test_batch_invariance_on_quantized_files(void **state)
{
    (void)state;
    /* A: 20 rows, then decodes; B: a 13-row chunk, then decodes; C: one row a step */
    static const su_schedule sch = {.a_prefill = 20, .n_b = 1, .b_rows = {13}};
    static const char *const types[] = {"Q4_K_M", "Q8_0", "Q5_1", "IQ4_XS", "Q3_K_M", "BF16"};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        ts_model *m = su_load_type(types[t]);
        float *alone = su_logits_of_a(m, false, &sch), *together = su_logits_of_a(m, true, &sch);
        if (memcmp(alone, together, SU_A_STEPS * (size_t)m->cfg.vocab_size * sizeof(float)) != 0)
            fail_msg("%s: a sequence's logits change when other sequences share its steps",
                     types[t]);
        free(alone);
        free(together);
        ts_model_free(m);
    }
}

/* ---- memory: the mapping is the model ---- */

/* Random blocks of a K type (type's block_bytes each), with the f16 super-block scales
 * set small so every weight is finite: the RSS test needs a file's size, not its sense. */
typedef struct random_blocks {
    uint32_t type;
    uint64_t ne0;
} random_blocks;

static ts_status fill_random(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                             ts_error *err)
{
    (void)err;
    const random_blocks *rb = user;
    const qtype_info *q = qtype_get(rb->type);
    uint64_t blocks = rb->ne0 / q->block_elems * n_rows, x = row0 * 0x9e3779b97f4a7c15ULL + 1;
    uint16_t small = gguf_f32_to_f16(1e-3f);
    for (uint64_t b = 0; b < blocks; b++, dst += q->block_bytes) {
        for (uint32_t i = 0; i < q->block_bytes; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            dst[i] = (uint8_t)x;
        }
        if (rb->type == QT_Q4_K) { /* d, dmin first */
            memcpy(dst, &small, 2);
            memcpy(dst + 2, &small, 2);
        } else { /* Q6_K: d last */
            memcpy(dst + q->block_bytes - 2, &small, 2);
        }
    }
    return TS_OK;
}

/* A Q4_K_M-typed model of about 76 MB (Q4_K matrices; Q6_K for the output and for
 * layer 0's attn_v and ffn_down, as llama.cpp's mix does) with stories260K's vocabulary. */
static void write_q4_k_m(const char *path, ts_model_config *c)
{
    *c = (ts_model_config){.arch = "llama", .name = "rss", .dim = 2048, .hidden_dim = 5632,
                           .n_layers = 3, .n_heads = 16, .n_kv_heads = 4, .head_dim = 128,
                           .vocab_size = 512, .context_len = 512, .rope_freq_base = 10000.0f,
                           .rope_scale = 1.0f, .rms_eps = 1e-5f};
    gguf_file *sf = NULL;
    tokenizer_vocab v;
    assert_int_equal(gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &sf, NULL), TS_OK);
    assert_int_equal(vocab_read_gguf(&v, sf, NULL), TS_OK);
    gguf_close(sf);
    gguf_writer *g = NULL;
    assert_int_equal(gguf_writer_create(0, &g, NULL), TS_OK);
    model_gguf_add_config(g, c, 15 /* LLAMA_FTYPE_MOSTLY_Q4_K_M */);
    assert_int_equal(model_gguf_add_vocab(g, &v, NULL), TS_OK);
    static float ones[2048];
    for (int i = 0; i < 2048; i++)
        ones[i] = 1.0f;
    uint64_t dim = 2048, ffn = 5632, kv = 512;
    static random_blocks rb[32];
    int n_rb = 0;
    const uint64_t norm_ne[1] = {dim};
#define MATRIX(name, type_, k, n)                                                           \
    do {                                                                                    \
        rb[n_rb] = (random_blocks){.type = type_, .ne0 = k};                                \
        const uint64_t ne[2] = {k, n};                                                      \
        gguf_writer_add_tensor_fill(g, name, type_, 2, ne, fill_random, &rb[n_rb++]);      \
    } while (0)
    MATRIX("token_embd.weight", QT_Q4_K, dim, 512);
    gguf_writer_add_tensor(g, "output_norm.weight", GGUF_TENSOR_F32, 1, norm_ne, ones, dim * 4);
    MATRIX("output.weight", QT_Q6_K, dim, 512);
    for (int l = 0; l < c->n_layers; l++) {
        char n[64];
#define LAYER(suffix, type_, k, rows)                                                       \
    do {                                                                                    \
        snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix);                               \
        MATRIX(n, type_, k, rows);                                                          \
    } while (0)
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        gguf_writer_add_tensor(g, n, GGUF_TENSOR_F32, 1, norm_ne, ones, dim * 4);
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l);
        gguf_writer_add_tensor(g, n, GGUF_TENSOR_F32, 1, norm_ne, ones, dim * 4);
        LAYER("attn_q", QT_Q4_K, dim, dim);
        LAYER("attn_k", QT_Q4_K, dim, kv);
        LAYER("attn_v", l == 0 ? QT_Q6_K : QT_Q4_K, dim, kv);
        LAYER("attn_output", QT_Q4_K, dim, dim);
        LAYER("ffn_gate", QT_Q4_K, dim, ffn);
        LAYER("ffn_up", QT_Q4_K, dim, ffn);
        LAYER("ffn_down", l == 0 ? QT_Q6_K : QT_Q4_K, ffn, dim);
#undef LAYER
    }
#undef MATRIX
    ts_error err = {0};
    if (gguf_writer_write_file(g, path, &err) != TS_OK)
        fail_msg("writing %s: %s", path, err.msg);
    gguf_writer_free(g);
    vocab_clear(&v);
}

/* Loading a Q4_K_M file and running a step costs at most the file's size + 10% of RSS
 * beyond the KV pool; and at least most of it, so the measure sees the mapped weights. */
static void test_q4_k_m_rss_is_the_file(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("rss-q4_k_m.gguf");
    ts_model_config c;
    write_q4_k_m(path, &c);
    size_t file_size = 0;
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    file_size = (size_t)ftell(fp);
    fclose(fp);

    long before = tu_rss_bytes();
    ts_model *m = su_load_path(path);
    double kv_bytes, cost = su_step_rss_cost(m, before, &kv_bytes);
    printf("  Q4_K_M file %.1f MB: load + one step cost %.1f MB of RSS beyond the KV pool "
           "(%.1f MB), %.2f x the file\n", file_size / 1e6, cost / 1e6, kv_bytes / 1e6,
           cost / (double)file_size);
    if (MQ_ASAN) {
        print_message("RSS bounds not checked under AddressSanitizer (its shadow memory)\n");
    } else {
        assert_true(cost <= 1.10 * (double)file_size);
        assert_true(cost >= 0.80 * (double)file_size); /* the step read the mapped weights */
    }
    ts_model_free(m);
    remove(path);
}

/* --mlock locks the mapping (or fails naming RLIMIT_MEMLOCK when the limit is too low);
 * --hugepages is advice. Either way the model computes what the plain load does. */
static void test_mlock_and_hugepages(void **state)
{
    (void)state;
    const char *path = su_kpath("stories260K-k-%s.gguf", "Q4_K_M");
    ts_model *plain = su_load_type("Q4_K_M"), *m = NULL;
    ts_model_load_opts o = {.mlock = true, .hugepages = true};
    ts_error err = {0};
    ts_status st = ts_model_load_with(path, &o, &m, &err);
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &lim), 0);
    if (st != TS_OK) {
        assert_int_equal(st, TS_ERR_IO);
        assert_non_null(strstr(err.msg, "RLIMIT_MEMLOCK"));
        assert_true(lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < plain->file->size);
        assert_null(m);
        o.mlock = false;
        assert_int_equal(ts_model_load_with(path, &o, &m, &err), TS_OK);
    } else {
        assert_int_equal(m->locked_bytes, m->file->size);
    }
    int32_t tok[5] = {1, 403, 407, 261, 378};
    float *a = tu_reference_logits(plain, tok, 5), *b = tu_reference_logits(m, tok, 5);
    assert_memory_equal(a, b, 5 * (size_t)plain->cfg.vocab_size * sizeof(float));
    free(a);
    free(b);
    ts_model_free(m);
    ts_model_free(plain);
}

/* ---- writing back: convert's F32 from any type ---- */

/* A quantized model written out (as `tessera convert` does) holds exactly the values its
 * blocks stand for: every tensor equals llama.cpp's own dequantization of the file. */
static void test_written_f32_equals_llama_cpp_dequantization(void **state)
{
    (void)state;
    static const char *const types[] = {"Q4_K_M", "Q2_K", "IQ4_XS", "Q5_1", "BF16"};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        ts_model *m = su_load_type(types[t]);
        const char *path = tu_tmp_path("written-f32.gguf");
        ts_error err = {0};
        if (ts_model_save_gguf(m, path, &err) != TS_OK)
            fail_msg("%s: %s", types[t], err.msg);
        gguf_file *ours = NULL, *theirs = NULL;
        assert_int_equal(gguf_open(path, &ours, NULL), TS_OK);
        assert_int_equal(gguf_open(su_kpath("dequant/stories260K-k-%s.dequant-f32.gguf", types[t]),
                                   &theirs, NULL), TS_OK);
        assert_int_equal(ours->n_tensors, theirs->n_tensors);
        for (uint64_t i = 0; i < ours->n_tensors; i++) {
            const gguf_tensor *a = &ours->tensors[i];
            char name[96];
            snprintf(name, sizeof name, "%.*s", (int)a->name.len, a->name.ptr);
            const gguf_tensor *b = gguf_find_tensor(theirs, name);
            assert_non_null(b);
            assert_int_equal(a->type, GGUF_TENSOR_F32);
            assert_int_equal(b->type, GGUF_TENSOR_F32);
            assert_memory_equal(a->ne, b->ne, sizeof a->ne);
            if (memcmp(a->data, b->data, a->nbytes) != 0)
                fail_msg("%s: tensor %s differs from llama.cpp's dequantization", types[t], name);
        }
        gguf_close(ours);
        gguf_close(theirs);
        remove(path);
        ts_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_maps_and_matches_reference),
        cmocka_unit_test(test_batch_invariance_on_quantized_files),
        cmocka_unit_test(test_mlock_and_hugepages),
        cmocka_unit_test(test_written_f32_equals_llama_cpp_dequantization),
        cmocka_unit_test(test_q4_k_m_rss_is_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
