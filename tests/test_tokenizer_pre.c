/* test_tokenizer_pre.c: the byte-level BPE pre-tokenizers (how text is cut into words
 * before merging) against the word boundaries llama.cpp's expressions give, for each
 * family (tokenizer.ggml.pre "llama-bpe" for Llama 3, "qwen2" for Qwen2, "smollm" for
 * SmolLM, "deepseek-llm" for DeepSeek LLM). Byte offsets of each word's end, printed by
 * scripts/gen_pre_cases.py: Python's `regex` module applies each family's expressions in
 * turn as llama.cpp's unicode_regex_split does, every one cutting the pieces the ones
 * before it left (smollm: \p{N}, then GPT-2's expression; deepseek-llm: six of its own). */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "tessera/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/vocab.h"
#include "util.h"

typedef struct split_case {
    const char *text;
    /* where each word ends under each family; a 0 ends a list */
    size_t llama3[32], qwen2[32], smollm[32], deepseek_llm[32];
} split_case;

static const split_case cases[] = {
    {"Hello, World! I'M here; they'll say we've done it, don't you'RE?",
     {5, 6, 12, 13, 15, 17, 22, 23, 28, 31, 35, 38, 41, 46, 49, 50, 54, 56, 60, 63, 64},
     {5, 6, 12, 13, 15, 17, 22, 23, 28, 31, 35, 38, 41, 46, 49, 50, 54, 56, 60, 63, 64},
     {5, 6, 12, 13, 15, 16, 17, 22, 23, 28, 31, 35, 38, 41, 46, 49, 50, 54, 56, 60, 61, 63, 64},
     {5, 6, 12, 13, 15, 16, 17, 22, 23, 28, 29, 31, 35, 38, 39, 41, 46, 49, 50, 54, 55, 56, 60,
      61, 63, 64}},
    {"1234567 89 $100.00 3.14159",
     {3, 6, 7, 8, 10, 12, 15, 16, 18, 19, 20, 21, 24, 26},
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26},
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26},
     {7, 8, 10, 12, 15, 16, 18, 19, 20, 21, 26}},
    {"a  b   c    ",
     {1, 2, 4, 6, 8, 12},
     {1, 2, 4, 6, 8, 12},
     {1, 2, 4, 6, 8, 12},
     {1, 2, 4, 6, 8, 12}},
    {"  \n  \n  x",
     {6, 7, 9},
     {6, 7, 9},
     {7, 9},
     {2, 3, 5, 6, 7, 9}},
    {"hello\n\nworld\r\n",
     {5, 7, 12, 14},
     {5, 7, 12, 14},
     {5, 6, 7, 12, 14},
     {5, 6, 7, 12, 13, 14}},
    {"\t\tx\ty",
     {1, 3, 5},
     {1, 3, 5},
     {1, 2, 3, 4, 5},
     {1, 3, 5}},
    {"!hello ...world?!\n\n",
     {6, 10, 15, 19},
     {6, 10, 15, 19},
     {1, 6, 10, 15, 17, 19},
     {1, 6, 10, 15, 17, 18, 19}},
    {" !! \t!!",
     {3, 4, 5, 7},
     {3, 4, 5, 7},
     {3, 4, 5, 7},
     {3, 4, 7}},
    {"x   ",
     {1, 4},
     {1, 4},
     {1, 4},
     {1, 4}},
    /* 中文字 日本語 */
    {"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
     {9, 19},
     {9, 19},
     {9, 19},
     {9, 10, 19}},
    /* café naïve über */
    {"caf\xc3\xa9 na\xc3\xafve \xc3\xbc""ber",
     {5, 12, 18},
     {5, 12, 18},
     {5, 12, 18},
     {3, 5, 8, 10, 12, 15, 18}},
    /* 😀 smile 😀😀 */
    {"\xf0\x9f\x98\x80 smile \xf0\x9f\x98\x80\xf0\x9f\x98\x80",
     {4, 10, 19},
     {4, 10, 19},
     {4, 10, 19},
     {4, 10, 19}},
    {"'hello' 'Ll 's",
     {6, 7, 9, 11, 13, 14},
     {6, 7, 9, 11, 13, 14},
     {1, 6, 7, 9, 11, 13, 14},
     {1, 6, 7, 9, 11, 13, 14}},
    {"line1\nline2\n\n\n  indented",
     {4, 5, 6, 10, 11, 14, 15, 24},
     {4, 5, 6, 10, 11, 14, 15, 24},
     {4, 5, 6, 10, 11, 15, 24},
     {4, 5, 6, 10, 11, 12, 13, 14, 15, 24}},
    {"   ",
     {3},
     {3},
     {3},
     {3}},
    {"\n",
     {1},
     {1},
     {1},
     {1}},
    /* a\u00a0b \u2003c */
    {"a\xc2\xa0""b \xe2\x80\x83""c",
     {1, 4, 5, 9},
     {1, 4, 5, 9},
     {1, 3, 4, 5, 8, 9},
     {1, 4, 5, 9}},
    {"(x+y)*2=z",
     {2, 4, 6, 7, 9},
     {2, 4, 6, 7, 9},
     {1, 2, 3, 4, 6, 7, 8, 9},
     {1, 2, 3, 4, 6, 7, 8, 9}},
    {"__init__ self.__dict__",
     {2, 6, 8, 13, 16, 20, 22},
     {2, 6, 8, 13, 16, 20, 22},
     {2, 6, 8, 13, 16, 20, 22},
     {2, 6, 8, 13, 16, 20, 22}},
    /* Ⅻ ½ ² */
    {"\xe2\x85\xab \xc2\xbd \xc2\xb2",
     {3, 4, 6, 7, 9},
     {3, 4, 6, 7, 9},
     {3, 4, 6, 7, 9},
     {3, 4, 6, 7, 9}},
    {"abc 123 4x",
     {3, 4, 7, 8, 9, 10},
     {3, 4, 5, 6, 7, 8, 9, 10},
     {3, 4, 5, 6, 7, 8, 9, 10},
     {3, 4, 7, 8, 9, 10}},
    {"x  12",
     {1, 2, 3, 5},
     {1, 2, 3, 4, 5},
     {1, 3, 4, 5},
     {1, 3, 5}},
    {"'s1 1's",
     {2, 3, 4, 5, 7},
     {2, 3, 4, 5, 7},
     {2, 3, 4, 5, 7},
     {1, 2, 3, 4, 5, 6, 7}},
    {"a1b2 c3d",
     {1, 2, 3, 4, 6, 7, 8},
     {1, 2, 3, 4, 6, 7, 8},
     {1, 2, 3, 4, 6, 7, 8},
     {1, 2, 3, 4, 6, 7, 8}},
    {"  7",
     {1, 2, 3},
     {1, 2, 3},
     {2, 3},
     {2, 3}},
    {"9\n\n 8 ",
     {1, 3, 4, 5, 6},
     {1, 3, 4, 5, 6},
     {1, 4, 5, 6},
     {1, 2, 3, 4, 5, 6}},
    {"v2.0.1-rc3",
     {1, 2, 3, 4, 5, 6, 9, 10},
     {1, 2, 3, 4, 5, 6, 9, 10},
     {1, 2, 3, 4, 5, 6, 7, 9, 10},
     {1, 2, 3, 4, 5, 6, 7, 9, 10}},
    /* 中文，测试。你好！“引号” */
    {"\xe4\xb8\xad\xe6\x96\x87\xef\xbc\x8c\xe6\xb5\x8b\xe8\xaf\x95\xe3\x80\x82\xe4\xbd\xa0"
     "\xe5\xa5\xbd\xef\xbc\x81\xe2\x80\x9c\xe5\xbc\x95\xe5\x8f\xb7\xe2\x80\x9d",
     {6, 15, 24, 30, 36, 39},
     {6, 15, 24, 30, 36, 39},
     {6, 9, 15, 18, 24, 30, 36, 39},
     {6, 9, 15, 18, 24, 27, 30, 36, 39}},
    /* 日本\u3000語 テスト\u3000 x */
    {"\xe6\x97\xa5\xe6\x9c\xac\xe3\x80\x80\xe8\xaa\x9e \xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88"
     "\xe3\x80\x80 x",
     {6, 12, 22, 25, 27},
     {6, 12, 22, 25, 27},
     {6, 9, 12, 22, 25, 27},
     {6, 9, 12, 13, 22, 25, 27}},
    /* Việt Ελληνικά ქართული Հայերեն */
    {"Vi\xe1\xbb\x87t \xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac "
     "\xe1\x83\xa5\xe1\x83\x90\xe1\x83\xa0\xe1\x83\x97\xe1\x83\xa3\xe1\x83\x9a\xe1\x83\x98 "
     "\xd5\x80\xd5\xa1\xd5\xb5\xd5\xa5\xd6\x80\xd5\xa5\xd5\xb6",
     {6, 23, 45, 60},
     {6, 23, 45, 60},
     {6, 23, 45, 60},
     {2, 5, 6, 23, 24, 45, 48, 60}},
    /* 한국어 텍스트123 ١٢٣ Ⅻ */
    {"\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xed\x85\x8d\xec\x8a\xa4\xed\x8a\xb8""123 \xd9\xa1"
     "\xd9\xa2\xd9\xa3 \xe2\x85\xab",
     {9, 19, 22, 23, 29, 30, 33},
     {9, 19, 20, 21, 22, 23, 25, 27, 29, 30, 33},
     {9, 19, 20, 21, 22, 23, 25, 27, 29, 30, 33},
     {9, 10, 19, 22, 23, 29, 30, 33}},
    {"a \n\n  b\t\r\n c  ",
     {1, 4, 5, 7, 10, 12, 14},
     {1, 4, 5, 7, 10, 12, 14},
     {1, 5, 7, 10, 12, 14},
     {1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 14}},
    {"x...!?  ;-) <a/> --b",
     {1, 6, 7, 11, 13, 14, 16, 19, 20},
     {1, 6, 7, 11, 13, 14, 16, 19, 20},
     {1, 6, 7, 11, 13, 14, 16, 19, 20},
     {1, 6, 7, 11, 13, 14, 16, 19, 20}},
    /*  1 中 “q” ａｂ */
    {" 1 \xe4\xb8\xad \xe2\x80\x9cq\xe2\x80\x9d \xef\xbd\x81\xef\xbd\x82",
     {1, 2, 6, 10, 11, 14, 21},
     {1, 2, 6, 10, 11, 14, 21},
     {1, 2, 6, 10, 11, 14, 21},
     {1, 2, 3, 6, 7, 10, 11, 14, 21}},
    /* שלום עולם 😀  \nمرحبا  x,   */
    {"\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xd7\xa2\xd7\x95\xd7\x9c\xd7\x9d \xf0\x9f\x98\x80  \n"
     "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7  x,  ",
     {8, 17, 22, 25, 35, 36, 38, 39, 41},
     {8, 17, 22, 25, 35, 36, 38, 39, 41},
     {8, 17, 22, 24, 25, 35, 36, 38, 39, 41},
     {22, 24, 25, 35, 36, 38, 39, 41}},
};

typedef enum family { FAMILY_LLAMA3, FAMILY_QWEN2, FAMILY_SMOLLM, FAMILY_DEEPSEEK_LLM } family;

/* Cuts every case's text with pre's splitter and compares the word ends with the
 * family's column. */
static void check_cases(const char *pre, family f)
{
    bpe_split_fn split = tokenizer_bpe_splitter(pre);
    assert_non_null(split);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *t = cases[c].text;
        const size_t *want = f == FAMILY_QWEN2          ? cases[c].qwen2
                             : f == FAMILY_SMOLLM       ? cases[c].smollm
                             : f == FAMILY_DEEPSEEK_LLM ? cases[c].deepseek_llm
                                                        : cases[c].llama3;
        size_t n = strlen(t), pos = 0;
        int w = 0;
        for (; pos < n; w++) {
            size_t end = split(t, n, pos);
            if (end != want[w])
                fprintf(stderr, "%s case %zu: word %d ends at %zu, want %zu\n", pre, c, w, end,
                        want[w]);
            assert_int_equal(end, want[w]);
            pos = end;
        }
        assert_int_equal(want[w], 0);
    }
}

static void test_llama3_words(void **state)
{
    (void)state;
    check_cases("llama-bpe", FAMILY_LLAMA3);
    /* the other names llama.cpp's converter writes for it */
    assert_ptr_equal(tokenizer_bpe_splitter("llama3"), tokenizer_bpe_splitter("llama-bpe"));
    assert_ptr_equal(tokenizer_bpe_splitter("llama-v3"), tokenizer_bpe_splitter("llama-bpe"));
}

static void test_qwen2_words(void **state)
{
    (void)state;
    check_cases("qwen2", FAMILY_QWEN2);
    assert_null(tokenizer_bpe_splitter("no-such-family"));
}

/* Every digit a word of its own, and a space before a digit too; the names of the other
 * families llama.cpp cuts the same way. */
static void test_smollm_words(void **state)
{
    (void)state;
    check_cases("smollm", FAMILY_SMOLLM);
    const char *same[] = {"starcoder", "refact", "command-r", "codeshell", "exaone",
                          "minerva-7b"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        assert_ptr_equal(tokenizer_bpe_splitter(same[i]), tokenizer_bpe_splitter("smollm"));
    assert_ptr_not_equal(tokenizer_bpe_splitter("smollm"), tokenizer_bpe_splitter("gpt2"));
}

/* Each CR and LF alone; letter, punctuation, CJK and digit runs apart (ASCII letters apart
 * from the other letters of a word); a space leads only a letter or punctuation run. */
static void test_deepseek_llm_words(void **state)
{
    (void)state;
    check_cases("deepseek-llm", FAMILY_DEEPSEEK_LLM);
}

/* The shared GPT-2 vocabulary loaded as it is (*gpt2) and again with tokenizer.ggml.pre
 * set to pre, as a GGUF of that family declares it (returned). */
static ts_tokenizer *gpt2_with_pre(const char *pre, ts_tokenizer **gpt2)
{
    ts_error err = {0};
    ts_tokenizer *with_pre = NULL;
    assert_int_equal(ts_tokenizer_load_gguf(tu_shared("vocab/ggml-vocab-gpt-2.gguf"), gpt2, &err),
                     TS_OK);
    tokenizer_vocab v = *tokenizer_get_vocab(*gpt2); /* tokenizer_create copies it */
    snprintf(v.pre, sizeof v.pre, "%s", pre);
    assert_int_equal(tokenizer_create(&v, &with_pre, &err), TS_OK);
    return with_pre;
}

/* The GPT-2 vocabulary with tokenizer.ggml.pre set to smollm, as a SmolLM GGUF says it,
 * tokenizes every digit alone and a space before a digit alone; with its own "gpt2" the
 * same text gets a token of space and digits. */
static void test_smollm_tokenizer(void **state)
{
    (void)state;
    ts_tokenizer *gpt2 = NULL;
    ts_tokenizer *smollm = gpt2_with_pre("smollm", &gpt2);

    const char *text = "in 2024, v3 1000";
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(ts_tokenize(smollm, text, strlen(text), false, ids, 64, &n), TS_OK);
    char back[64] = "";
    size_t used = 0;
    bool lone_space = false;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *piece = ts_token_bytes(smollm, ids[i], &len);
        bool digits = false;
        for (size_t j = 0; j < len; j++)
            digits |= piece[j] >= '0' && piece[j] <= '9';
        if (digits)
            assert_int_equal(len, 1); /* a digit is a token of its own */
        lone_space |= len == 1 && piece[0] == ' ' && i + 1 < n;
        assert_true(used + len < sizeof back);
        memcpy(back + used, piece, len);
        used += len;
    }
    back[used] = '\0';
    assert_string_equal(back, text);
    assert_true(lone_space);
    assert_int_equal(n, 14); /* in, " ", 2, 0, 2, 4, ",", " v", 3, " ", 1, 0, 0, 0 */

    size_t n_gpt2 = 0;
    assert_int_equal(ts_tokenize(gpt2, text, strlen(text), false, ids, 64, &n_gpt2), TS_OK);
    assert_true(n_gpt2 < n);
    ts_tokenizer_free(smollm);
    ts_tokenizer_free(gpt2);
}

/* The GPT-2 vocabulary with tokenizer.ggml.pre set to deepseek-llm, as a DeepSeek LLM GGUF
 * says it, gives each line break a token of its own; with its own "gpt2" two line breaks
 * that end the text are one word, and GPT-2 has a token for them. */
static void test_deepseek_llm_tokenizer(void **state)
{
    (void)state;
    ts_tokenizer *gpt2 = NULL;
    ts_tokenizer *deepseek = gpt2_with_pre("deepseek-llm", &gpt2);

    int32_t lf, ids[16];
    size_t n = 0;
    assert_int_equal(ts_tokenize(deepseek, "\n", 1, false, &lf, 1, &n), TS_OK);
    assert_int_equal(n, 1);
    const char *text = "Hi\n\n";
    assert_int_equal(ts_tokenize(deepseek, text, strlen(text), false, ids, 16, &n), TS_OK);
    assert_int_equal(n, 3); /* Hi, \n, \n */
    assert_int_equal(ids[1], lf);
    assert_int_equal(ids[2], lf);
    assert_int_equal(ts_tokenize(gpt2, text, strlen(text), false, ids, 16, &n), TS_OK);
    assert_int_equal(n, 2); /* Hi, \n\n */
    assert_int_not_equal(ids[1], lf);
    ts_tokenizer_free(deepseek);
    ts_tokenizer_free(gpt2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_words),
        cmocka_unit_test(test_qwen2_words),
        cmocka_unit_test(test_smollm_words),
        cmocka_unit_test(test_smollm_tokenizer),
        cmocka_unit_test(test_deepseek_llm_words),
        cmocka_unit_test(test_deepseek_llm_tokenizer),
    };
    return cmocka_run_group_tests_name("tokenizer_pre", tests, NULL, NULL);
}
