/* test_tokenizer_archref.c: the vocabularies of ../shared's archref models (Qwen's
 * byte-level BPE, Gemma's SentencePiece without a space prefix, Phi-3's, Llama's) read
 * prompts as llama.cpp did and print its greedy output byte for byte; each family's
 * end-of-turn tokens end generation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "tessera/tokenizer.h"
#include "util.h"

static const char *const models[] = {
    "qwen2-f32",  "qwen2-q8_0",  "qwen3-f32",  "qwen3moe-f32", "qwen3moe-q8_0",
    "llama-moe-f32", "gemma2-f32", "gemma3-f32", "phi3-f32",
};

static ts_tokenizer *load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/archref/models/%s.gguf", TS_BUILD_DIR, name);
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    ts_status st = ts_tokenizer_load_gguf(path, &tok, &err);
    if (st != TS_OK)
        fprintf(stderr, "%s: %s\n", path, err.msg);
    assert_int_equal(st, TS_OK);
    return tok;
}

/* The ints of array key in a JSON object: malloc'd, *n gets their count. */
static int32_t *json_ids(const cJSON *root, const char *key, size_t *n)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key);
    assert_true(cJSON_IsArray(arr));
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    assert_non_null(ids);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        assert_true(cJSON_IsNumber(it));
        ids[i++] = (int32_t)it->valuedouble;
    }
    return ids;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "%s:", what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "\n");
}

/* Prompt NN through model name's vocabulary: the ids llama.cpp read (BOS as the vocabulary
 * says), and its output ids decoded token by token (as the server streams them) and as one
 * text after the prompt. Returns the number of mismatches. */
static int check_prompt(const char *name, const char *nn)
{
    char rel[256];
    snprintf(rel, sizeof rel, "reference/archref/greedy/%s/%s.prompt", name, nn);
    size_t prompt_len = 0, out_len = 0;
    char *prompt = tu_read_file(tu_shared(rel), &prompt_len);
    snprintf(rel, sizeof rel, "reference/archref/greedy/%s/%s.out", name, nn);
    char *out = tu_read_file(tu_shared(rel), &out_len);
    snprintf(rel, sizeof rel, "reference/archref/greedy/%s/%s.ids.json", name, nn);
    char *json = tu_read_file(tu_shared(rel), NULL);
    assert_non_null(prompt);
    assert_non_null(out);
    assert_non_null(json);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    size_t n_want = 0, n_out = 0;
    int32_t *want = json_ids(root, "prompt_ids", &n_want);
    int32_t *out_ids = json_ids(root, "output_ids", &n_out);
    assert_true(n_want > 0 && n_out > 0);

    int bad = 0;
    ts_tokenizer *tok = load(name);
    int32_t *got = NULL;
    size_t n_got = 0;
    ts_tokenize_opts o = {.add_special = true, .parse_special = true};
    assert_int_equal(ts_tokenize_alloc(tok, prompt, prompt_len, &o, &got, &n_got), TS_OK);
    if (n_got != n_want || memcmp(got, want, n_got * sizeof *got) != 0) {
        fprintf(stderr, "%s %s: prompt ids differ\n", name, nn);
        print_ids(" want", want, n_want);
        print_ids(" got ", got, n_got);
        bad++;
    }

    /* token by token */
    char *text = malloc(out_len + 4096);
    assert_non_null(text);
    size_t n_text = 0;
    for (size_t i = 0; i < n_out; i++) {
        size_t len;
        const char *p = ts_token_bytes(tok, out_ids[i], &len);
        if (n_text + len <= out_len + 4096)
            memcpy(text + n_text, p, len);
        n_text += len;
    }
    if (n_text != out_len || memcmp(text, out, out_len) != 0) {
        fprintf(stderr, "%s %s: output bytes differ\n want: %.*s\n got:  %.*s\n", name, nn,
                (int)out_len, out, (int)(n_text < out_len + 4096 ? n_text : 0), text);
        bad++;
    }

    /* the whole sequence at once: the prompt's text, then the output's. The cut
     * SentencePiece vocabularies have no "\u2581" token, so a space before a digit (prompt
     * 02) is three byte tokens that print U+2581 itself, in llama.cpp as here: the prompt
     * comes back as written only for prompt 01. */
    size_t n_prompt_text = ts_detokenize(tok, want, n_want, NULL, 0);
    int32_t *seq = malloc((n_want + n_out) * sizeof *seq);
    assert_non_null(seq);
    memcpy(seq, want, n_want * sizeof *seq);
    memcpy(seq + n_want, out_ids, n_out * sizeof *seq);
    size_t need = ts_detokenize(tok, seq, n_want + n_out, NULL, 0);
    char *all = malloc(need + 1);
    assert_non_null(all);
    assert_int_equal(ts_detokenize(tok, seq, n_want + n_out, all, need), need);
    bool prompt_back = n_prompt_text == prompt_len && !memcmp(all, prompt, prompt_len);
    if (need != n_prompt_text + out_len || memcmp(all + n_prompt_text, out, out_len) != 0 ||
        (!strcmp(nn, "01") && !prompt_back)) {
        fprintf(stderr, "%s %s: detokenized sequence differs\n got: %.*s\n", name, nn,
                (int)need, all);
        bad++;
    }

    free(all);
    free(seq);
    free(text);
    free(got);
    ts_tokenizer_free(tok);
    free(out_ids);
    free(want);
    cJSON_Delete(root);
    free(json);
    free(out);
    free(prompt);
    return bad;
}

static void test_prompts_and_outputs_match_llamacpp(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        bad += check_prompt(models[m], "01");
        bad += check_prompt(models[m], "02");
    }
    assert_int_equal(bad, 0);
}

/* The id of the token spelled text, found through the tokenizer (parse_special). */
static int32_t special_id(const ts_tokenizer *tok, const char *text)
{
    int32_t ids[4];
    size_t n = 0;
    ts_tokenize_opts o = {.parse_special = true};
    assert_int_equal(ts_tokenize_ex(tok, text, strlen(text), &o, ids, 4, &n), TS_OK);
    assert_int_equal(n, 1);
    return ids[0];
}

/* Every id of the vocabulary that ends generation, into eog (at most cap); the count. */
static int eog_ids(const ts_tokenizer *tok, int32_t *eog, int cap)
{
    int n = 0;
    for (int32_t id = 0; id < ts_tokenizer_vocab_size(tok); id++)
        if (ts_token_is_eog(tok, id)) {
            assert_true(n < cap);
            eog[n++] = id;
        }
    return n;
}

/* Qwen: <|endoftext|> (its EOS in Qwen2, BOS and PAD here) and <|im_end|> (Qwen3's EOS)
 * end generation, <|im_start|> does not; none of them prints. */
static void test_qwen_end_of_turn(void **state)
{
    (void)state;
    const char *names[] = {"qwen2-f32", "qwen3-f32"};
    for (size_t k = 0; k < 2; k++) {
        ts_tokenizer *tok = load(names[k]);
        int32_t eot = special_id(tok, "<|endoftext|>"), im_end = special_id(tok, "<|im_end|>");
        int32_t im_start = special_id(tok, "<|im_start|>");
        assert_int_equal(eot, 4093);
        assert_int_equal(im_start, 4094);
        assert_int_equal(im_end, 4095);
        int32_t eog[8];
        assert_int_equal(eog_ids(tok, eog, 8), 2);
        assert_int_equal(eog[0], eot);
        assert_int_equal(eog[1], im_end);
        assert_false(ts_token_is_eog(tok, im_start));
        assert_false(ts_token_is_plain(tok, im_start));
        size_t len = 1;
        ts_token_bytes(tok, im_end, &len);
        assert_int_equal(len, 0);
        ts_tokenizer_free(tok);
    }
    ts_tokenizer *tok = load("qwen3-f32");
    assert_int_equal(ts_tokenizer_eos(tok), 4095);
    assert_false(ts_tokenizer_add_bos(tok));
    ts_tokenizer_free(tok);
}

/* Phi-3: EOS <|endoftext|>, the turn's end <|end|>, and </s> (a user-defined token in
 * Phi-3's vocabulary, which llama.cpp ends generation on too); <|assistant|>, <|user|>
 * and <s> do not. */
static void test_phi3_end_of_turn(void **state)
{
    (void)state;
    ts_tokenizer *tok = load("phi3-f32");
    assert_int_equal(ts_tokenizer_eos(tok), 4085);
    int32_t eog[8];
    assert_int_equal(eog_ids(tok, eog, 8), 3);
    assert_int_equal(eog[0], special_id(tok, "</s>"));
    assert_int_equal(eog[1], 4085);
    assert_int_equal(eog[2], special_id(tok, "<|end|>"));
    assert_int_equal(eog[2], 4092);
    assert_false(ts_token_is_eog(tok, special_id(tok, "<|assistant|>")));
    assert_false(ts_token_is_eog(tok, special_id(tok, "<|user|>")));
    assert_false(ts_token_is_eog(tok, ts_tokenizer_bos(tok)));
    size_t len = 1;
    ts_token_bytes(tok, 2, &len); /* </s> prints nothing once it ends generation */
    assert_int_equal(len, 0);
    ts_tokenizer_free(tok);
}

/* Gemma's archref vocabulary is Llama's cut (no <end_of_turn>): </s> is its EOS and the
 * only token that ends generation; BOS is added, no space prefix. */
static void test_gemma_and_llama_end_of_generation(void **state)
{
    (void)state;
    const char *names[] = {"gemma2-f32", "gemma3-f32", "llama-moe-f32"};
    for (size_t k = 0; k < 3; k++) {
        ts_tokenizer *tok = load(names[k]);
        int32_t eog[8];
        assert_int_equal(eog_ids(tok, eog, 8), 1);
        assert_int_equal(eog[0], 2);
        assert_int_equal(ts_tokenizer_eos(tok), 2);
        assert_true(ts_tokenizer_add_bos(tok));
        ts_tokenizer_free(tok);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prompts_and_outputs_match_llamacpp),
        cmocka_unit_test(test_qwen_end_of_turn),
        cmocka_unit_test(test_phi3_end_of_turn),
        cmocka_unit_test(test_gemma_and_llama_end_of_generation),
    };
    return cmocka_run_group_tests_name("tokenizer_archref", tests, NULL, NULL);
}
