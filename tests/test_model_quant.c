/* test_model_quant.c: models computed on the file's own blocks. Every stories260K-k type
 * loads with its matrices pointing into the mapping, and the batched forward agrees with
 * the reference forward on the same file; teacher-forced and free-running greedy text
 * against llama.cpp's; batch invariance on quantized files; --mlock; writing any type back as
 * F32; and the RSS a mapped Q4_K_M model costs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "kv/kv.h"
#include "model/forward_batch.h"
#include "model/forward_ref.h"
#include "model/model_gguf.h"
#include "tokenizer/vocab.h"
#include "util.h"

/* Every file of ../shared's stories260K-k, as tests/CMakeLists.txt extracts it. */
static const char *const TYPES[] = {"f32",  "F16",    "BF16",   "Q8_0",   "Q4_0", "Q4_1",
                                    "Q5_0", "Q5_1",   "Q2_K",   "Q3_K_M", "Q4_K_S",
                                    "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static const char *kpath(const char *fmt, const char *type)
{
    static char buf[4096], rel[256];
    snprintf(rel, sizeof rel, fmt, type);
    snprintf(buf, sizeof buf, "%s/stories260K-k/%s", TS_BUILD_DIR, rel);
    return buf;
}

static ts_model *load_type_path(const char *path)
{
    ts_model *m = NULL;
    ts_error err = {0};
    if (ts_model_load(path, NULL, &m, &err) != TS_OK)
        fail_msg("loading %s: %s", path, err.msg);
    return m;
}

static ts_model *load_type(const char *type)
{
    return load_type_path(kpath("stories260K-k-%s.gguf", type));
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* ---- driving the batched forward pass one step at a time ---- */

enum { MAX_SEQS = 4 };

typedef struct runner {
    const ts_model *m;
    const simd_kernels *k;
    kv_pool *pool;
    fwd_state fs;
    kv_table tables[MAX_SEQS];
    int pos[MAX_SEQS]; /* positions computed so far */
} runner;

static void runner_init_kv(runner *r, const ts_model *m, const simd_kernels *k, int max_rows,
                           kv_dtype dtype)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->k = k;
    kv_config kc = {.n_layers = m->cfg.n_layers, .n_kv_heads = m->cfg.n_kv_heads,
                    .head_dim = m->cfg.head_dim, .dtype = dtype, .n_blocks = 64};
    assert_int_equal(kv_pool_init(&r->pool, &kc, NULL), TS_OK);
    for (int s = 0; s < MAX_SEQS; s++)
        kv_table_init(&r->tables[s]);
    assert_int_equal(fwd_state_init(&r->fs, m, max_rows, MAX_SEQS, NULL), TS_OK);
}

static void runner_init(runner *r, const ts_model *m, const simd_kernels *k, int max_rows)
{
    runner_init_kv(r, m, k, max_rows, KV_DTYPE_F32);
}

static void runner_free(runner *r)
{
    for (int s = 0; s < MAX_SEQS; s++)
        kv_table_free(r->pool, &r->tables[s]);
    fwd_state_free(&r->fs);
    kv_pool_free(r->pool);
}

/* One step: sequence s takes cnt[s] rows (0: not in this step), tokens toks[s][0 ..), at
 * its next positions; the logits of its last row are copied to out[s] (vocab). */
static void runner_step(runner *r, int32_t *const *toks, const int *cnt, float **out)
{
    fwd_seq seqs[MAX_SEQS];
    int32_t rows_tok[512];
    int n = 0, rows = 0;
    for (int s = 0; s < MAX_SEQS; s++) {
        if (cnt[s] == 0)
            continue;
        assert_true(rows + cnt[s] <= (int)(sizeof rows_tok / sizeof *rows_tok));
        assert_int_equal(kv_table_reserve(r->pool, &r->tables[s], cnt[s], NULL), TS_OK);
        memcpy(rows_tok + rows, toks[s], (size_t)cnt[s] * sizeof(int32_t));
        seqs[n] = (fwd_seq){.row0 = rows, .n_rows = cnt[s], .pos0 = r->pos[s],
                            .table = &r->tables[s], .logits_row = n};
        rows += cnt[s];
        n++;
    }
    fwd_batch b = {.n_rows = rows, .tokens = rows_tok, .n_seqs = n, .seqs = seqs, .n_logits = n};
    ts_error err = {0};
    if (forward_batch(&r->fs, r->m, r->pool, r->k, &b, &err) != TS_OK)
        fail_msg("forward_batch: %s", err.msg);
    int vocab = r->m->cfg.vocab_size;
    for (int i = 0, s = 0; s < MAX_SEQS; s++) {
        if (cnt[s] == 0)
            continue;
        memcpy(out[s], r->fs.logits + (size_t)i++ * vocab, (size_t)vocab * sizeof(float));
        r->pos[s] += cnt[s];
    }
}

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
 * layers deep: measured 2.0e-2 .. 3.4e-2 for the types of 4 bits or more, 4.5e-2 (Q3_K_M)
 * and 6.7e-2 (Q2_K), whose coarse weights amplify the activations' rounding. F32, F16 and
 * BF16 keep f32 activations: rounding only (~1e-6). */
static double tolerance(const char *type)
{
    if (!strcmp(type, "f32") || !strcmp(type, "F16") || !strcmp(type, "BF16"))
        return 1e-5;
    if (!strcmp(type, "Q2_K") || !strcmp(type, "Q3_K_M"))
        return 9e-2;
    return 4.5e-2;
}

static double max_abs(const float *x, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
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
static double batched_vs_reference(const ts_model *m, const simd_kernels *k, float *const *ref)
{
    enum { LEN = MIX_LEN };
    int vocab = m->cfg.vocab_size;
    int32_t tok[3][LEN];
    const int *lens = mix_lens;
    mix_tokens(tok, vocab);
    runner r;
    runner_init(&r, m, k, 3 * LEN);
    float *out[MAX_SEQS];
    for (int s = 0; s < MAX_SEQS; s++)
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
    double worst = 0;
    int done[3] = {0};
    for (int stepno = 0;; stepno++) {
        int cnt[MAX_SEQS] = {0};
        int32_t *toks[MAX_SEQS] = {0};
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
        runner_step(&r, toks, cnt, out);
        for (int s = 0; s < 3; s++) {
            if (cnt[s] == 0)
                continue;
            done[s] += cnt[s];
            const float *want_l = ref[s] + (size_t)(done[s] - 1) * vocab;
            double scale = fmax(1.0, max_abs(want_l, vocab)), d = 0;
            for (int i = 0; i < vocab; i++)
                d = fmax(d, fabs((double)out[s][i] - want_l[i]));
            worst = fmax(worst, d / scale);
        }
    }
    for (int s = 0; s < MAX_SEQS; s++)
        free(out[s]);
    runner_free(&r);
    return worst;
}

static void test_every_type_maps_and_matches_reference(void **state)
{
    (void)state;
    char failures[1024] = "";
    size_t used = 0;
    for (int t = 0; t < N_TYPES; t++) {
        ts_model *m = load_type(TYPES[t]);
        assert_mapped(m);
        int32_t tok[3][MIX_LEN];
        float *ref[3];
        mix_tokens(tok, m->cfg.vocab_size);
        for (int s = 0; s < 3; s++)
            ref[s] = tu_reference_logits(m, tok[s], mix_lens[s]);
        for (int isa = 0; isa < SIMD_ISA_COUNT; isa++) {
            const simd_kernels *k = simd_kernels_for((simd_isa)isa);
            if (!k)
                continue;
            double e = batched_vs_reference(m, k, ref);
            printf("  %-7s %-6s batched vs reference: %.2e of the largest logit\n", TYPES[t],
                   k->name, e);
            if (e > tolerance(TYPES[t]))
                used += (size_t)snprintf(failures + used, sizeof failures - used,
                                         "%s on %s: %g of the largest logit (bound %g); ",
                                         TYPES[t], k->name, e, tolerance(TYPES[t]));
            assert_true(used < sizeof failures);
        }
        for (int s = 0; s < 3; s++)
            free(ref[s]);
        ts_model_free(m);
    }
    if (used)
        fail_msg("batched logits differ from the reference's: %s", failures);
}

/* ---- against llama.cpp's greedy text ---- */

/* llama.cpp's greedy run of one prompt on one file: the prompt's ids (with BOS) and the
 * text llama.cpp generated after it. */
typedef struct greedy_run {
    int32_t *prompt;
    int n_prompt;
    char *text; /* the whole output: prompt text, then the continuation at cont */
    size_t cont, len;
    /* the output re-tokenized: at byte offset i of text starts token at[i], or -1 */
    int32_t *at;
} greedy_run;

static greedy_run read_greedy(const ts_model *m, const char *type, const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "reference/stories260K-greedy/%s.prompt", name);
    size_t plen = 0;
    char *prompt = tu_read_file(tu_shared(rel), &plen);
    snprintf(rel, sizeof rel, "greedy/%s/%s.out", type, name);
    greedy_run g = {0};
    g.text = tu_read_file(kpath("%s", rel), &g.len);
    assert_non_null(prompt);
    assert_non_null(g.text);
    assert_true(g.len > plen && memcmp(g.text, prompt, plen) == 0);
    /* llama-completion ends its output with a line break of its own */
    while (g.len > plen && g.text[g.len - 1] == '\n')
        g.len--;
    g.cont = plen;
    size_t n = 0;
    ts_tokenize_opts o = {.add_special = true};
    assert_int_equal(ts_tokenize_alloc(ts_model_get_tokenizer(m), prompt, plen, &o, &g.prompt, &n),
                     TS_OK);
    g.n_prompt = (int)n;
    int32_t *ids = NULL;
    const ts_tokenizer *tz = ts_model_get_tokenizer(m);
    assert_int_equal(ts_tokenize_alloc(tz, g.text, g.len, &o, &ids, &n), TS_OK);
    assert_non_null(g.at = malloc(g.len * sizeof *g.at));
    for (size_t i = 0; i < g.len; i++)
        g.at[i] = -1;
    char *buf = malloc(g.len + 64);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) { /* token i starts where the text of ids[0 .. i) ends */
        size_t off = ts_detokenize(tz, ids, i, buf, g.len + 64);
        if (off < g.len)
            g.at[off] = ids[i];
    }
    free(buf);
    free(ids);
    free(prompt);
    return g;
}

/* A near tie: llama.cpp's token is this close (in logits, which reach 10-16 here) to our
 * top-1. Two correct implementations round differently: llama.cpp quantizes activations
 * its own way, keeps K/V in f16 and sums in another order, and our own batched pass is up
 * to ~3% of the largest logit from the exact reference (above); llama.cpp's own f32 run
 * parts from llama2.c at one such tie. Measured worst gap for 4 bits or more: 0.35. */
#define NEAR_TIE 0.5f

typedef struct agreement {
    int positions, top1, near;
    float worst_gap;       /* largest gap between our top-1 and llama.cpp's token */
    int first_diverged[2]; /* free-running: first continuation token that parts, or -1 */
} agreement;

/* Does token id spell the next bytes of text (len bytes left)? */
static bool spells(const ts_tokenizer *tok, int32_t id, const char *text, size_t len)
{
    size_t n = 0;
    const char *b = ts_token_bytes(tok, id, &n);
    return n > 0 && n <= len && memcmp(b, text, n) == 0;
}

/* Runs both prompts through the batched pass (two sequences a step) and follows
 * llama.cpp's text: at each position our top-1 agrees when it spells the text's next
 * bytes (text, not re-tokenized ids, is the reference: llama.cpp's "es" + "e" re-tokenizes
 * as "e" + "se"). Otherwise llama.cpp chose another token that spells them: the token the
 * re-tokenized text has there, else the one of them we rate highest. It is compared with
 * our top-1 (a near tie at most) and fed instead. Until the first disagreement this is
 * exactly free-running greedy decoding. */
static void run_greedy(const ts_model *m, const greedy_run *g, agreement *a)
{
    const ts_tokenizer *tz = ts_model_get_tokenizer(m);
    int vocab = m->cfg.vocab_size;
    runner r;
    runner_init(&r, m, simd_init(), 64);
    int32_t next[2];
    size_t at[2]; /* text bytes followed so far */
    float *out[MAX_SEQS] = {0};
    for (int s = 0; s < 2; s++) {
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
        a->first_diverged[s] = -1;
        at[s] = g[s].cont;
    }
    for (int step = 0;; step++) {
        int cnt[MAX_SEQS] = {0};
        int32_t *toks[MAX_SEQS] = {0};
        for (int s = 0; s < 2; s++) {
            cnt[s] = step == 0 ? g[s].n_prompt : at[s] < g[s].len ? 1 : 0;
            toks[s] = step == 0 ? g[s].prompt : &next[s];
        }
        if (cnt[0] == 0 && cnt[1] == 0)
            break;
        runner_step(&r, toks, cnt, out);
        for (int s = 0; s < 2; s++) {
            if (cnt[s] == 0 || at[s] >= g[s].len)
                continue;
            const char *rest = g[s].text + at[s];
            size_t left = g[s].len - at[s];
            int32_t top = argmax(out[s], vocab), pick = top;
            a->positions++;
            if (spells(tz, top, rest, left)) {
                a->top1++;
            } else {
                pick = g[s].at[at[s]];
                if (pick < 0 || !spells(tz, pick, rest, left))
                    for (int32_t id = 0, best = -1; id < vocab; id++)
                        if (spells(tz, id, rest, left) && (best < 0 || out[s][id] > out[s][best]))
                            pick = best = id;
                assert_true(pick >= 0);
                float gap = out[s][top] - out[s][pick];
                a->near += gap <= NEAR_TIE;
                a->worst_gap = fmaxf(a->worst_gap, gap);
                if (a->first_diverged[s] < 0)
                    a->first_diverged[s] = step;
            }
            size_t n = 0;
            ts_token_bytes(tz, pick, &n);
            at[s] += n;
            next[s] = pick;
        }
    }
    for (int s = 0; s < 2; s++)
        free(out[s]);
    runner_free(&r);
}

/* What each file must meet against llama.cpp's greedy text, as measured. Every type of 4
 * bits or more: at every position llama.cpp's token is our top-1 or a near tie, and at
 * least 95% of them top-1 (measured 96.3% .. 100%). Q2_K and Q3_K_M (2-3 bits, whose
 * logits move most with how activations are rounded): at least 90% top-1 (measured 92.3%,
 * 96.4%); a gap is not bounded there, since after a disagreement our context is llama.cpp's
 * text split into tokens our way, which can differ from its own split.
 * free[i]: prompt i's free-running text equals llama.cpp's (150 tokens). The exceptions
 * all part at a near tie (the teacher-forced check bounds their gap): this 260K-parameter
 * model's greedy text, prompt 02's above all, walks through many tokens rated within a few
 * tenths of each other, and llama.cpp's activation rounding, f16 K/V and summation order
 * break such a tie one way where ours breaks it the other, after 5 to 70 tokens. F32, F16
 * and BF16 keep f32 activations and match for both prompts. */
static const struct expect {
    const char *type;
    bool low_bits;
    bool free[2];
} EXPECT[N_TYPES] = {
    {"f32", false, {true, true}},     {"F16", false, {true, true}},
    {"BF16", false, {true, true}},    {"Q8_0", false, {true, false}},
    {"Q4_0", false, {false, false}},  {"Q4_1", false, {false, false}},
    {"Q5_0", false, {false, false}},  {"Q5_1", false, {false, true}},
    {"Q2_K", true, {false, false}},   {"Q3_K_M", true, {false, false}},
    {"Q4_K_S", false, {false, false}}, {"Q4_K_M", false, {false, false}},
    {"Q5_K_M", false, {false, true}},  {"Q6_K", false, {false, false}},
    {"IQ4_NL", false, {false, false}}, {"IQ4_XS", false, {false, false}},
};

static void test_greedy_against_llama_cpp(void **state)
{
    (void)state;
    char failures[2048] = "";
    size_t used = 0;
    for (int t = 0; t < N_TYPES; t++) {
        const struct expect *e = &EXPECT[t];
        assert_string_equal(e->type, TYPES[t]);
        ts_model *m = load_type(TYPES[t]);
        greedy_run g[2] = {read_greedy(m, TYPES[t], "01"), read_greedy(m, TYPES[t], "02")};
        agreement a = {0};
        run_greedy(m, g, &a);
        printf("  %-7s teacher-forced: top-1 %d/%d (%.1f%%), near ties %d, worst gap %.3f; "
               "free-running text parts at token %d / %d (-1: equal)\n", TYPES[t], a.top1,
               a.positions, 100.0 * a.top1 / a.positions, a.near, (double)a.worst_gap,
               a.first_diverged[0], a.first_diverged[1]);
        /* every failure is collected first, so the table above is printed whole */
        if (!e->low_bits && a.top1 + a.near != a.positions)
            used += (size_t)snprintf(failures + used, sizeof failures - used,
                                     "%s: llama.cpp's token %.3f below our top-1 (near tie: "
                                     "%.2f); ", TYPES[t], (double)a.worst_gap, (double)NEAR_TIE);
        if (a.top1 * 100 < a.positions * (e->low_bits ? 90 : 95))
            used += (size_t)snprintf(failures + used, sizeof failures - used,
                                     "%s: top-1 agreement %d/%d under the floor; ", TYPES[t],
                                     a.top1, a.positions);
        for (int p = 0; p < 2; p++)
            if (e->free[p] && a.first_diverged[p] >= 0)
                used += (size_t)snprintf(failures + used, sizeof failures - used,
                                         "%s: free-running text of prompt %d parts from "
                                         "llama.cpp's at token %d; ", TYPES[t], p + 1,
                                         a.first_diverged[p]);
        for (int i = 0; i < 2; i++) {
            free(g[i].prompt);
            free(g[i].text);
            free(g[i].at);
        }
        ts_model_free(m);
        assert_true(used < sizeof failures);
    }
    if (used)
        fail_msg("%s", failures);
}

/* ---- batch invariance ---- */

/* Sequence A's logits at each of its steps, run alone (others == false) or beside two
 * other sequences in every step: A's rows and schedule are the same either way. */
static float *logits_of_a(const ts_model *m, bool others)
{
    enum { LEN = 30, PREFILL = 20, STEPS = 1 + LEN - PREFILL };
    int vocab = m->cfg.vocab_size;
    int32_t tok[3][LEN];
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < LEN; i++)
            tok[s][i] = i == 0 ? 1 : 3 + (i * 37 + s * 101) % (vocab - 3);
    runner r;
    runner_init(&r, m, simd_init(), 64);
    float *got = malloc((size_t)STEPS * vocab * sizeof(float)), *out[MAX_SEQS];
    assert_non_null(got);
    for (int s = 0; s < MAX_SEQS; s++)
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
    for (int step = 0, done = 0; step < STEPS; step++) {
        int cnt[MAX_SEQS] = {0};
        int32_t *toks[MAX_SEQS] = {0};
        cnt[0] = step == 0 ? PREFILL : 1;
        toks[0] = tok[0] + done;
        if (others) { /* B: a 13-row chunk, then decodes; C: one row a step */
            cnt[1] = step == 0 ? 13 : 1;
            toks[1] = tok[1] + (step == 0 ? 0 : 12 + step);
            cnt[2] = 1;
            toks[2] = tok[2] + step;
        }
        runner_step(&r, toks, cnt, out);
        memcpy(got + (size_t)step * vocab, out[0], (size_t)vocab * sizeof(float));
        done += cnt[0];
    }
    for (int s = 0; s < MAX_SEQS; s++)
        free(out[s]);
    runner_free(&r);
    return got;
}

static void test_batch_invariance_on_quantized_files(void **state)
{
    (void)state;
    static const char *const types[] = {"Q4_K_M", "Q8_0", "Q5_1", "IQ4_XS", "Q3_K_M", "BF16"};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        ts_model *m = load_type(types[t]);
        float *alone = logits_of_a(m, false), *together = logits_of_a(m, true);
        if (memcmp(alone, together, 11 * (size_t)m->cfg.vocab_size * sizeof(float)) != 0)
            fail_msg("%s: a sequence's logits change when other sequences share its steps",
                     types[t]);
        free(alone);
        free(together);
        ts_model_free(m);
    }
}

/* ---- memory: the mapping is the model ---- */

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

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

    long before = rss_bytes();
    ts_model *m = load_type_path(path);
    runner r;
    runner_init(&r, m, simd_init(), 8);
    kv_pool_prefault(r.pool); /* resident, as the engine makes it: all of it is the pool's */
    kv_config kc = {.n_layers = c.n_layers, .n_kv_heads = c.n_kv_heads, .head_dim = c.head_dim,
                    .dtype = KV_DTYPE_F32, .n_blocks = 64};
    double kv_bytes = (double)kv_block_bytes(&kc) * kc.n_blocks;
    int32_t tok[8] = {1, 20, 30, 40, 50, 60, 70, 80};
    int32_t *toks[MAX_SEQS] = {tok};
    int cnt[MAX_SEQS] = {8};
    float *out[MAX_SEQS] = {malloc(512 * sizeof(float))};
    runner_step(&r, toks, cnt, out);
    long after = rss_bytes();
    double cost = (double)(after - before) - kv_bytes;
    printf("  Q4_K_M file %.1f MB: load + one step cost %.1f MB of RSS beyond the KV pool "
           "(%.1f MB), %.2f x the file\n", file_size / 1e6, cost / 1e6, kv_bytes / 1e6,
           cost / (double)file_size);
    assert_true(cost <= 1.10 * (double)file_size);
    assert_true(cost >= 0.80 * (double)file_size); /* the step did read the mapped weights */
    free(out[0]);
    runner_free(&r);
    ts_model_free(m);
    remove(path);
}

/* --mlock locks the mapping (or fails naming RLIMIT_MEMLOCK when the limit is too low);
 * --hugepages is advice. Either way the model computes what the plain load does. */
static void test_mlock_and_hugepages(void **state)
{
    (void)state;
    const char *path = kpath("stories260K-k-%s.gguf", "Q4_K_M");
    ts_model *plain = load_type("Q4_K_M"), *m = NULL;
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
        ts_model *m = load_type(types[t]);
        const char *path = tu_tmp_path("written-f32.gguf");
        ts_error err = {0};
        if (ts_model_save_gguf(m, path, &err) != TS_OK)
            fail_msg("%s: %s", types[t], err.msg);
        gguf_file *ours = NULL, *theirs = NULL;
        assert_int_equal(gguf_open(path, &ours, NULL), TS_OK);
        assert_int_equal(gguf_open(kpath("dequant/stories260K-k-%s.dequant-f32.gguf", types[t]),
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
        cmocka_unit_test(test_greedy_against_llama_cpp),
        cmocka_unit_test(test_batch_invariance_on_quantized_files),
        cmocka_unit_test(test_mlock_and_hugepages),
        cmocka_unit_test(test_written_f32_equals_llama_cpp_dequantization),
        cmocka_unit_test(test_q4_k_m_rss_is_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
