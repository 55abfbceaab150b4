/* test_model_greedy.c: our batched forward on every stories260K-k file against llama.cpp's
 * greedy text for the shared prompts (greedy/TYPE/01.out, 02.out): teacher-forced (at each
 * position llama.cpp's token is our top-1 or a near tie) and free-running (the same text),
 * the agreement per type printed and asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "step_util.h"
#include "util.h"

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
    g.text = tu_read_file(su_kpath("%s", rel), &g.len);
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
static void run_greedy(const ts_model *m, const greedy_run *g, kv_dtype kv, agreement *a)
{
    const ts_tokenizer *tz = ts_model_get_tokenizer(m);
    int vocab = m->cfg.vocab_size;
    su_runner r;
    su_runner_init_kv(&r, m, simd_init(), 64, kv);
    int32_t next[2];
    size_t at[2]; /* text bytes followed so far */
    float *out[SU_MAX_SEQS] = {0};
    for (int s = 0; s < 2; s++) {
        assert_non_null(out[s] = malloc((size_t)vocab * sizeof(float)));
        a->first_diverged[s] = -1;
        at[s] = g[s].cont;
    }
    for (int step = 0;; step++) {
        int cnt[SU_MAX_SEQS] = {0};
        int32_t *toks[SU_MAX_SEQS] = {0};
        for (int s = 0; s < 2; s++) {
            cnt[s] = step == 0 ? g[s].n_prompt : at[s] < g[s].len ? 1 : 0;
            toks[s] = step == 0 ? g[s].prompt : &next[s];
        }
        if (cnt[0] == 0 && cnt[1] == 0)
            break;
        su_runner_step(&r, toks, cnt, out);
        for (int s = 0; s < 2; s++) {
            if (cnt[s] == 0 || at[s] >= g[s].len)
                continue;
            const char *rest = g[s].text + at[s];
            size_t left = g[s].len - at[s];
            int32_t top = su_argmax(out[s], vocab), pick = top;
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
    su_runner_free(&r);
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
 * break such a tie one way where ours breaks it the other, after 5 to 70 tokens. Which
 * ties break which way also depends on the kernel table's summation order: Q5_K_M's
 * prompt 02 matched whole on one CPU and parts at token 148 of 150 on an AVX-512 VNNI
 * one, so only pairs that matched on every table measured are required. F32, F16 and
 * BF16 keep f32 activations and match for both prompts.
 * With f16 K/V (the engine's default for every file but an all-f32 one, and llama.cpp's
 * own) the same floors hold and the agreement is about the same (AVX-512 VNNI: top-1 per
 * type within -2.6 .. +1.6 points of f32 K/V's: 6 types up, 6 down, 1 the same); F16 and BF16
 * match whole (free_f16), and Q8_0's prompt 01, whole with f32 K/V, parts at token 110. */
static const struct expect {
    const char *type;
    bool low_bits;
    bool free[2], free_f16[2];
} EXPECT[SU_N_TYPES] = {
    {"f32", false, {true, true}, {true, true}},
    {"F16", false, {true, true}, {true, true}},
    {"BF16", false, {true, true}, {true, true}},
    {"Q8_0", false, {true, false}, {false, false}},
    {"Q4_0", false, {false, false}, {false, false}},
    {"Q4_1", false, {false, false}, {false, false}},
    {"Q5_0", false, {false, false}, {false, false}},
    {"Q5_1", false, {false, true}, {false, false}},
    {"Q2_K", true, {false, false}, {false, false}},
    {"Q3_K_M", true, {false, false}, {false, false}},
    {"Q4_K_S", false, {false, false}, {false, false}},
    {"Q4_K_M", false, {false, false}, {false, false}},
    {"Q5_K_M", false, {false, false}, {false, false}},
    {"Q6_K", false, {false, false}, {false, false}},
    {"IQ4_NL", false, {false, false}, {false, false}},
    {"IQ4_XS", false, {false, false}, {false, false}},
};

static void test_greedy_against_llama_cpp(void **state)
{
    (void)state;
    char failures[2048] = "";
    size_t used = 0;
    for (int t = 0; t < SU_N_TYPES; t++) {
        const struct expect *e = &EXPECT[t];
        assert_string_equal(e->type, su_types[t]);
        ts_model *m = su_load_type(su_types[t]);
        greedy_run g[2] = {read_greedy(m, su_types[t], "01"), read_greedy(m, su_types[t], "02")};
        /* K/V in f32, then as the engine keeps them by default for this file (f16 unless
         * every matrix is f32) */
        bool f32_file = model_all_f32(&m->w);
        for (int f16 = 0; f16 <= !f32_file; f16++) {
            agreement a = {0};
            run_greedy(m, g, f16 ? KV_DTYPE_F16 : KV_DTYPE_F32, &a);
            printf("  %-7s K/V %s: teacher-forced top-1 %d/%d (%.1f%%), near ties %d, worst gap "
                   "%.3f; free-running text parts at token %d / %d (-1: equal)\n", su_types[t],
                   f16 ? "f16" : "f32", a.top1, a.positions, 100.0 * a.top1 / a.positions, a.near,
                   (double)a.worst_gap, a.first_diverged[0], a.first_diverged[1]);
            /* every failure is collected first, so the table above is printed whole */
            const char *kv = f16 ? "f16" : "f32";
            if (!e->low_bits && a.top1 + a.near != a.positions)
                used += (size_t)snprintf(failures + used, sizeof failures - used,
                                         "%s K/V %s: llama.cpp's token %.3f below our top-1 (near "
                                         "tie: %.2f); ", su_types[t], kv, (double)a.worst_gap,
                                         (double)NEAR_TIE);
            if (a.top1 * 100 < a.positions * (e->low_bits ? 90 : 95))
                used += (size_t)snprintf(failures + used, sizeof failures - used,
                                         "%s K/V %s: top-1 agreement %d/%d under the floor; ",
                                         su_types[t], kv, a.top1, a.positions);
            for (int p = 0; p < 2; p++)
                if ((f16 ? e->free_f16 : e->free)[p] && a.first_diverged[p] >= 0)
                    used += (size_t)snprintf(failures + used, sizeof failures - used,
                                             "%s K/V %s: free-running text of prompt %d parts "
                                             "from llama.cpp's at token %d; ", su_types[t], kv,
                                             p + 1, a.first_diverged[p]);
            assert_true(used < sizeof failures);
        }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_against_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
