/* test_model_qwen2moe.c: the qwen2moe family (Qwen1.5-MoE, Qwen2-MoE: routed experts
 * weighted by their softmax probabilities without renormalisation, a shared expert scaled
 * by sigmoid(ffn_gate_inp_shexp . x), Q/K/V biases) against llama.cpp on tiny peaked
 * models made by synth (tests/qwen2moe/make_ref.py recorded the peer's greedy tokens and
 * top-5 probabilities, and the files' sha256): greedy text, teacher-forced probabilities,
 * each feature seen, the grouped expert passes with the shared expert against the
 * reference pass, batch invariance; and mixture-of-experts families tessera does not run
 * refused by name with a reason. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "common/sha256.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/model_gguf.h"
#include "model/synth.h"
#include "tokenizer/vocab.h"
#include "step_util.h"
#include "ref_util.h"
#include "util.h"

enum { N_TYPES = 2, N_PROMPTS = 2, MAX_IDS = 64, TOPK = 5 };
static const char *const TYPES[N_TYPES] = {"F32", "Q8_0"};

/* One prompt's reference: its ids (BOS first), llama.cpp's greedy continuation, and the
 * top 5 of its softmax before each output token. */
typedef struct prompt_ref {
    int32_t ids[2 * MAX_IDS]; /* prompt then output */
    int n_prompt, n_out;
    int32_t top_ids[MAX_IDS][TOPK];
    float top_probs[MAX_IDS][TOPK];
} prompt_ref;

typedef struct type_ref {
    unsigned seed;
    char sha[65];
    prompt_ref p[N_PROMPTS];
} type_ref;

static type_ref refs[N_TYPES];

static int type_index(const char *t)
{
    for (int i = 0; i < N_TYPES; i++)
        if (!strcmp(t, TYPES[i]))
            return i;
    fail_msg("reference: unknown type %s", t);
    return -1;
}

/* Reads n ids after *s into out (at most cap). */
static int read_ids(char **s, int32_t *out, int n, int cap)
{
    assert_true(n > 0 && n <= cap);
    for (int i = 0; i < n; i++)
        out[i] = (int32_t)strtol(*s, s, 10);
    return n;
}

/* tests/qwen2moe/qwen2moe_ref.txt (make_ref.py's format) into refs. */
static int load_refs(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/qwen2moe/qwen2moe_ref.txt", TS_SOURCE_DIR);
    char *text = ref_read(path, NULL), *cursor = text;
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        char kind[16], type[16], nn[8];
        int n = 0, used = 0;
        if (line[0] == '#')
            continue;
        if (sscanf(line, "model %15s %n", type, &used) == 1 && used > 0) {
            type_ref *r = &refs[type_index(type)];
            assert_int_equal(sscanf(line + used, "%u %64s", &r->seed, r->sha), 2);
            continue;
        }
        assert_int_equal(sscanf(line, "%15s %15s %7s %d %n", kind, type, nn, &n, &used), 4);
        prompt_ref *p = &refs[type_index(type)].p[atoi(nn) - 1];
        char *rest = line + used;
        if (!strcmp(kind, "prompt")) {
            p->n_prompt = read_ids(&rest, p->ids, n, MAX_IDS);
        } else if (!strcmp(kind, "output")) {
            p->n_out = read_ids(&rest, p->ids + p->n_prompt, n, MAX_IDS);
        } else {
            assert_string_equal(kind, "top");
            assert_true(n >= 0 && n < MAX_IDS);
            for (int k = 0; k < TOPK; k++) {
                p->top_ids[n][k] = (int32_t)strtol(rest, &rest, 10);
                p->top_probs[n][k] = strtof(rest, &rest);
            }
        }
    }
    free(text);
    for (int t = 0; t < N_TYPES; t++)
        for (int i = 0; i < N_PROMPTS; i++)
            assert_true(refs[t].p[i].n_prompt > 0 && refs[t].p[i].n_out > 0);
    return 0;
}

/* The sha256 of the file at path, in hex (out). */
static void file_sha256(const char *path, char out[65])
{
    size_t len = 0;
    char *bytes = tu_read_file(path, &len);
    assert_non_null(bytes);
    sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, bytes, len);
    sha256_final_hex(&h, out);
    free(bytes);
}

/* The tiny qwen2moe of type t, as make_ref.py made it with `tessera synth`, written to a
 * temporary file whose bytes must be the reference's (once a run). Returns its path. */
static const char *make_model(int t)
{
    static char path[N_TYPES][4096];
    static bool checked[N_TYPES];
    if (checked[t])
        return path[t];
    snprintf(path[t], sizeof path[t], "%s", tu_tmp_path(t == 0 ? "qwen2moe-f32.gguf"
                                                               : "qwen2moe-q8_0.gguf"));
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen2moe-a2.7b"));
    model_synth_shrink(&c);
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    model_synth_opts opts = {.peaked = true};
    ts_error err = {0};
    if (model_synth_write_with(path[t], &c, TYPES[t], &v, refs[t].seed, &opts, &err) != TS_OK)
        fail_msg("synth: %s", err.msg);
    vocab_clear(&v);
    char hex[65];
    file_sha256(path[t], hex);
    if (strcmp(hex, refs[t].sha) != 0)
        fail_msg("the %s model's bytes changed (sha256 %s, the reference's %s): synth draws "
                 "otherwise now; run tests/qwen2moe/make_ref.py again", TYPES[t], hex,
                 refs[t].sha);
    checked[t] = true;
    return path[t];
}

static ts_model *load_model(int t)
{
    ts_model *m = su_load_path(make_model(t));
    assert_string_equal(m->cfg.arch, "qwen2moe");
    assert_true(m->cfg.experts_unnormed);
    assert_true(m->cfg.shared_ffn_dim > 0 && m->cfg.qkv_bias);
    return m;
}

/* Greedy continuations of both prompts, run side by side (prompt 01 whole, prompt 02 in
 * chunks of 3 rows, then one row each a step) into got[p] (the reference's n_out each). */
static void greedy_pair(const ts_model *m, const type_ref *ref, int32_t got[][MAX_IDS])
{
    su_runner r;
    su_runner_init(&r, m, simd_init(), 64);
    int vocab = m->cfg.vocab_size, fed[2] = {0, 0}, made[2] = {0, 0};
    float *out[SU_MAX_SEQS] = {0};
    for (int s = 0; s < 2; s++)
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
    int32_t next[2];
    while (made[0] < ref->p[0].n_out || made[1] < ref->p[1].n_out) {
        int cnt[SU_MAX_SEQS] = {0};
        int32_t *toks[SU_MAX_SEQS] = {0};
        for (int s = 0; s < 2; s++) {
            const prompt_ref *p = &ref->p[s];
            if (made[s] == p->n_out)
                continue;
            if (fed[s] < p->n_prompt) {
                int want = s == 0 ? p->n_prompt : 3;
                cnt[s] = p->n_prompt - fed[s] < want ? p->n_prompt - fed[s] : want;
                toks[s] = (int32_t *)p->ids + fed[s];
            } else {
                cnt[s] = 1;
                toks[s] = &next[s];
            }
        }
        su_runner_step(&r, toks, cnt, out);
        for (int s = 0; s < 2; s++) {
            if (cnt[s] == 0)
                continue;
            fed[s] += cnt[s];
            if (fed[s] >= ref->p[s].n_prompt)
                got[s][made[s]++] = next[s] = su_argmax(out[s], vocab);
        }
    }
    for (int s = 0; s < 2; s++)
        free(out[s]);
    su_runner_free(&r);
}

/* Teacher-forced on llama.cpp's tokens, one position a step: the largest difference between
 * our probability of each of its top 5 tokens and its own, over the output positions; and
 * in *top1 the positions where our top token is its top token. */
static double forced_diff(const ts_model *m, const prompt_ref *p, int *top1)
{
    su_runner r;
    su_runner_init(&r, m, simd_init(), 64);
    int vocab = m->cfg.vocab_size;
    float *out[SU_MAX_SEQS] = {malloc((size_t)vocab * sizeof(float))};
    assert_non_null(out[0]);
    double worst = 0.0;
    *top1 = 0;
    for (int pos = 0; pos < p->n_prompt + p->n_out - 1; pos++) {
        int cnt[SU_MAX_SEQS] = {1};
        int32_t *toks[SU_MAX_SEQS] = {(int32_t *)p->ids + pos};
        su_runner_step(&r, toks, cnt, out);
        int i = pos + 1 - p->n_prompt; /* the output token this position predicts */
        if (i < 0)
            continue;
        double mx = out[0][su_argmax(out[0], vocab)], z = 0.0;
        for (int v = 0; v < vocab; v++)
            z += exp(out[0][v] - mx);
        for (int k = 0; k < TOPK; k++) {
            double ours = exp(out[0][p->top_ids[i][k]] - mx) / z;
            double d = fabs(ours - p->top_probs[i][k]);
            worst = d > worst ? d : worst;
        }
        *top1 += su_argmax(out[0], vocab) == p->top_ids[i][0];
    }
    free(out[0]);
    su_runner_free(&r);
    return worst;
}

/* ---- against llama.cpp ------------------------------------------------------------- */

/* F32: both prompts' greedy text is llama.cpp's, token for token. */
static void test_greedy_matches_llama_cpp(void **state)
{
    (void)state;
    ts_model *m = load_model(0);
    int32_t got[2][MAX_IDS];
    greedy_pair(m, &refs[0], got);
    for (int s = 0; s < N_PROMPTS; s++) {
        const prompt_ref *p = &refs[0].p[s];
        for (int i = 0; i < p->n_out; i++)
            if (got[s][i] != p->ids[p->n_prompt + i])
                fail_msg("prompt 0%d: token %d is %d, llama.cpp's %d", s + 1, i, got[s][i],
                         p->ids[p->n_prompt + i]);
    }
    ts_model_free(m);
}

/* F32: at every output position our probabilities of llama.cpp's top 5 tokens are within
 * 0.03 of its own (its K/V cache is f16), and the top tokens agree. Q8_0: llama.cpp
 * quantizes the activations its own way, so near ties may part: within 0.1, and the top
 * token the same on 90% of positions. */
static void test_teacher_forced_probabilities(void **state)
{
    (void)state;
    for (int t = 0; t < N_TYPES; t++) {
        ts_model *m = load_model(t);
        double bound = t == 0 ? 0.03 : 0.2;
        for (int s = 0; s < N_PROMPTS; s++) {
            const prompt_ref *p = &refs[t].p[s];
            int top1;
            double d = forced_diff(m, p, &top1);
            if (d > bound)
                fail_msg("%s prompt 0%d: a top-5 probability %g from llama.cpp's", TYPES[t],
                         s + 1, d);
            if (t == 0 ? top1 != p->n_out : top1 * 10 < p->n_out * 9)
                fail_msg("%s prompt 0%d: top token agrees on %d of %d positions", TYPES[t],
                         s + 1, top1, p->n_out);
        }
        ts_model_free(m);
    }
}

/* Each feature the family adds changes the text: the shared expert, its sigmoid gate, the
 * unnormalised weights. */
static void test_features_are_seen(void **state)
{
    (void)state;
    for (int feature = 0; feature < 3; feature++) {
        ts_model *m = load_model(0);
        float *zeros = NULL;
        if (feature == 0) {
            m->cfg.shared_ffn_dim = 0; /* the shared expert left out */
        } else if (feature == 1) { /* its gate logit 0: a constant scale of 1/2 */
            const simd_qmat *g = &m->w.layers[0].shexp_gate_inp;
            assert_int_equal(g->type, QT_F32);
            assert_non_null(zeros = calloc((size_t)g->K, sizeof(float)));
            for (int l = 0; l < m->cfg.n_layers; l++)
                m->w.layers[l].shexp_gate_inp.data = zeros;
        } else {
            m->cfg.experts_unnormed = false;
        }
        int32_t got[2][MAX_IDS];
        greedy_pair(m, &refs[0], got);
        const prompt_ref *p = &refs[0].p[0];
        if (memcmp(got[0], p->ids + p->n_prompt, (size_t)p->n_out * sizeof(int32_t)) == 0)
            fail_msg("feature %d: the text is llama.cpp's without it", feature);
        ts_model_free(m);
        free(zeros);
    }
}

/* ---- the batched step ---------------------------------------------------------------- */

/* The last row's logits of p's tokens (n) run through the batched pass in one step, or
 * one row a step (each expert then multiplies one row at a time): into out (vocab). */
static void step_logits(const ts_model *m, const int32_t *ids, int n, bool row_by_row,
                        float *out)
{
    su_runner r;
    su_runner_init(&r, m, simd_init(), 128);
    float *outs[SU_MAX_SEQS] = {out};
    for (int at = 0; at < n; at += row_by_row ? 1 : n) {
        int cnt[SU_MAX_SEQS] = {row_by_row ? 1 : n};
        int32_t *toks[SU_MAX_SEQS] = {(int32_t *)ids + at};
        su_runner_step(&r, toks, cnt, outs);
    }
    su_runner_free(&r);
}

/* The grouped expert passes with the shared expert beside them, the whole of prompt 02
 * and its continuation in one step: as routed, with every expert hit (all used), and with
 * one expert taking every row and the others none (a zero router ties every expert; the
 * lowest index wins). Against the same pass one row a step, bit for bit (the kernels give
 * the same bits at every row count), and against the reference pass's token-by-token
 * mixture: within 1e-4 in F32; in Q8_0, whose batched pass quantizes the activations and
 * the reference does not, within 0.05 where no near tie can turn the routing (every
 * expert, one expert). */
static void test_grouped_matches_reference(void **state)
{
    (void)state;
    for (int t = 0; t < N_TYPES; t++) {
        for (int mode = 0; mode < 3; mode++) {
            ts_model *m = load_model(t);
            float *zeros = NULL;
            if (mode == 1) {
                m->cfg.n_experts_used = m->cfg.n_experts;
            } else if (mode == 2) {
                m->cfg.n_experts_used = 1;
                const simd_qmat *r = &m->w.layers[0].router;
                assert_int_equal(r->type, QT_F32);
                assert_non_null(zeros = calloc((size_t)r->N * r->K, sizeof(float)));
                for (int l = 0; l < m->cfg.n_layers; l++)
                    m->w.layers[l].router.data = zeros;
            }
            const prompt_ref *p = &refs[t].p[1];
            int n = p->n_prompt + p->n_out, vocab = m->cfg.vocab_size;
            float *grouped = malloc((size_t)vocab * sizeof(float));
            float *rows = malloc((size_t)vocab * sizeof(float));
            assert_true(grouped && rows);
            step_logits(m, p->ids, n, false, grouped);
            step_logits(m, p->ids, n, true, rows);
            if (memcmp(grouped, rows, (size_t)vocab * sizeof(float)) != 0)
                fail_msg("%s mode %d: grouped logits differ from row by row (%g)", TYPES[t],
                         mode, su_rel_err(grouped, rows, 1, vocab));
            float *want = tu_reference_logits(m, p->ids, n);
            double e = su_rel_err(grouped, want + (size_t)(n - 1) * vocab, 1, vocab);
            if (t == 0 ? e > 1e-4 : mode > 0 && e > 0.05)
                fail_msg("%s mode %d: grouped logits %g from the reference pass's", TYPES[t],
                         mode, e);
            free(grouped);
            free(rows);
            free(want);
            ts_model_free(m);
            free(zeros);
        }
    }
}

/* In a Q4_K_M file wide enough for the K types (dim, experts and shared expert multiples
 * of 256), on the packed kernels where this CPU has them: the grouped passes and the
 * shared expert's down (whose input rows sit inside the router pass's wider rows) give
 * the same bits in one step as one row a step, and beside other sequences as alone. */
static void test_k_quants_grouped_and_invariant(void **state)
{
    (void)state;
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen2moe-a2.7b"));
    model_synth_shrink(&c);
    c.dim = 256;
    c.hidden_dim = 256;
    c.shared_ffn_dim = 512;
    c.n_experts = 8;
    c.n_experts_used = 2;
    tokenizer_vocab v;
    tu_stories_vocab(&v);
    char *path = strdup(tu_tmp_path("qwen2moe-q4km.gguf"));
    model_synth_opts opts = {.peaked = true};
    assert_int_equal(model_synth_write_with(path, &c, "Q4_K_M", &v, 3, &opts, NULL), TS_OK);
    vocab_clear(&v);
    ts_model *m = su_load_path(path);
    assert_int_equal(m->w.layers[0].shexp_down.type, QT_Q4_K);
    int vocab = m->cfg.vocab_size, n = refs[0].p[1].n_prompt + refs[0].p[1].n_out;
    float *grouped = malloc((size_t)vocab * sizeof(float));
    float *rows = malloc((size_t)vocab * sizeof(float));
    assert_true(grouped && rows);
    step_logits(m, refs[0].p[1].ids, n, false, grouped);
    step_logits(m, refs[0].p[1].ids, n, true, rows);
    if (memcmp(grouped, rows, (size_t)vocab * sizeof(float)) != 0)
        fail_msg("Q4_K_M: grouped logits differ from row by row (%g)",
                 su_rel_err(grouped, rows, 1, vocab));
    su_schedule sch = {.a_prefill = 40, .n_b = 3, .b_rows = {13, 32, 5}};
    float *alone = su_logits_of_a(m, false, &sch), *beside = su_logits_of_a(m, true, &sch);
    if (memcmp(alone, beside, (size_t)SU_A_STEPS * vocab * sizeof(float)) != 0)
        fail_msg("Q4_K_M: a sequence's logits change with the sequences beside it");
    free(alone);
    free(beside);
    free(grouped);
    free(rows);
    ts_model_free(m);
    remove(path);
    free(path);
}

/* A sequence's logits are the same bits alone or beside others in every step. */
static void test_batch_invariance(void **state)
{
    (void)state;
    su_schedule sch = {.a_prefill = 40, .n_b = 3, .b_rows = {13, 32, 5}};
    for (int t = 0; t < N_TYPES; t++) {
        ts_model *m = load_model(t);
        float *alone = su_logits_of_a(m, false, &sch), *beside = su_logits_of_a(m, true, &sch);
        size_t n = (size_t)SU_A_STEPS * m->cfg.vocab_size;
        if (memcmp(alone, beside, n * sizeof(float)) != 0)
            fail_msg("%s: a sequence's logits change with the sequences beside it", TYPES[t]);
        free(alone);
        free(beside);
        ts_model_free(m);
    }
}

/* make_ref.py's command, `tessera synth ... --peaked`, makes the bytes the reference
 * recorded, which the library call above makes too. */
static void test_cli_makes_the_reference_files(void **state)
{
    (void)state;
    for (int t = 0; t < N_TYPES; t++) {
        char *path = strdup(tu_tmp_path("qwen2moe-cli.gguf"));
        char *vocab = strdup(tu_shared("models/stories260K/stories260K.gguf"));
        char seed[16], type[8], hex[65];
        snprintf(seed, sizeof seed, "%u", refs[t].seed);
        snprintf(type, sizeof type, "%s", TYPES[t]);
        char *argv[] = {"synth", "--shape", "qwen2moe-a2.7b", "--tiny", "--peaked", "--seed",
                        seed, "--type", type, "--vocab", vocab, "-o", path, NULL};
        assert_int_equal(cli_synth(13, argv), 0);
        file_sha256(path, hex);
        assert_string_equal(hex, refs[t].sha);
        remove(path);
        free(path);
        free(vocab);
    }
}

/* What `tessera bench` counts a token reads: the shared expert too, every token. */
static void test_bench_counts_the_shared_expert(void **state)
{
    (void)state;
    ts_model *m = load_model(0);
    double with = bench_weight_bytes(m);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        model_layer *ly = &m->w.layers[l];
        ly->shexp_gate.N = ly->shexp_up.N = ly->shexp_down.N = ly->shexp_gate_inp.N = 0;
    }
    double shared = (3.0 * m->cfg.shared_ffn_dim + 1) * m->cfg.dim * sizeof(float);
    assert_float_equal(with - bench_weight_bytes(m), m->cfg.n_layers * shared, 0);
    ts_model_free(m);
}

/* ---- refusals ---------------------------------------------------------------------- */

/* Mixture-of-experts families llama.cpp runs and tessera does not: a file of each is
 * refused by its name, with the reason. */
static void test_moe_families_refused(void **state)
{
    (void)state;
    static const struct {
        const char *arch, *why;
    } cases[] = {
        {"deepseek2", "latent attention"},  {"deepseek", "shared experts"},
        {"gpt-oss", "MXFP4"},               {"llama4", "chunked attention"},
        {"dbrx", "layer norms"},            {"olmoe", "Q/K norms"},
        {"granitemoe", "multipliers"},      {"phimoe", "sparse-mixer"},
        {"dots1", "sigmoid routing"},       {"glm4moe", "sigmoid routing"},
        {"grok", "multipliers"},            {"arctic", "dense residual"},
        {"jamba", "Mamba"},                 {"qwen3next", "delta-net"},
        {"qwen3vlmoe", "vision"},           {"ernie4_5-moe", "shared experts"},
        {"bailingmoe", "shared experts"},   {"hunyuan-moe", "shared experts"},
        {"minimax-m2", "sigmoid routing"},  {"lfm2moe", "convolution"},
        {"llada-moe", "diffusion"},         {"mixtral", "`llama` files"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gguf_writer *w = NULL;
        assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
        gguf_writer_add_str(w, "general.architecture", cases[i].arch);
        const char *path = tu_tmp_path("moe-refused.gguf");
        assert_int_equal(gguf_writer_write_file(w, path, NULL), TS_OK);
        gguf_writer_free(w);
        ts_model *m = NULL;
        ts_error err = {0};
        assert_int_equal(ts_model_load(path, NULL, &m, &err), TS_ERR_UNSUPPORTED);
        assert_null(m);
        if (!strstr(err.msg, cases[i].arch) || !strstr(err.msg, cases[i].why))
            fail_msg("%s: refused with \"%s\", not its name and \"%s\"", cases[i].arch,
                     err.msg, cases[i].why);
    }
}

/* A qwen2moe file without its shared expert, or with another count of them, is refused by
 * name; so is a shared-expert tensor in a family without one. */
static void test_shared_expert_refusals(void **state)
{
    (void)state;
    ts_model_config c;
    assert_true(model_synth_shape(&c, "qwen2moe-a2.7b")); /* Qwen1.5-MoE-A2.7B's config */
    assert_int_equal(c.n_experts, 60);
    assert_int_equal(c.n_experts_used, 4);
    assert_int_equal(c.hidden_dim, 1408);
    assert_int_equal(c.shared_ffn_dim, 5632);
    assert_true(c.experts_unnormed && c.qkv_bias && !c.tied_output);
    model_synth_shrink(&c);
    assert_int_equal(c.shared_ffn_dim, 256);
    ts_error err = {0};
    c.shared_ffn_dim = 0;
    assert_int_equal(model_synth_check(&c, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "shared expert"));
    assert_true(model_synth_shape(&c, "qwen3-30b-a3b"));
    model_synth_shrink(&c);
    c.shared_ffn_dim = 64;
    assert_int_equal(model_synth_check(&c, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "shared expert"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_llama_cpp),
        cmocka_unit_test(test_teacher_forced_probabilities),
        cmocka_unit_test(test_features_are_seen),
        cmocka_unit_test(test_grouped_matches_reference),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_k_quants_grouped_and_invariant),
        cmocka_unit_test(test_bench_counts_the_shared_expert),
        cmocka_unit_test(test_cli_makes_the_reference_files),
        cmocka_unit_test(test_moe_families_refused),
        cmocka_unit_test(test_shared_expert_refusals),
    };
    return cmocka_run_group_tests_name("model_qwen2moe", tests, load_refs, NULL);
}
