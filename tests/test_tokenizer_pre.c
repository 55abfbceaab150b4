/* test_tokenizer_pre.c: the byte-level BPE pre-tokenizers (how text is cut into words
 * before merging) against word boundaries that Python's `regex` module gives for each
 * family's regular expression, as llama.cpp writes them (tokenizer.ggml.pre "llama-bpe"
 * for Llama 3, "qwen2" for Qwen2). Byte offsets of each word's end; generated once from
 *   regex.finditer(PATTERN, text)
 * with the patterns in src/tokenizer/bpe.c's comments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "tokenizer/tokenizer_impl.h"

typedef struct split_case {
    const char *text;
    size_t ends[32];
    int n;
} split_case;

static const split_case llama3_cases[] = {
    {"Hello, World! I'M here; they'll say we've done it, don't you'RE?", {5, 6, 12, 13, 15, 17, 22, 23, 28, 31, 35, 38, 41, 46, 49, 50, 54, 56, 60, 63, 64}, 21},
    {"1234567 89 $100.00 3.14159", {3, 6, 7, 8, 10, 12, 15, 16, 18, 19, 20, 21, 24, 26}, 14},
    {"a  b   c    ", {1, 2, 4, 6, 8, 12}, 6},
    {"  \x0a""  \x0a""  x", {6, 7, 9}, 3},
    {"hello\x0a""\x0a""world\x0d""\x0a""", {5, 7, 12, 14}, 4},
    {"\x09""\x09""x\x09""y", {1, 3, 5}, 3},
    {"!hello ...world?!\x0a""\x0a""", {6, 10, 15, 19}, 4},
    {" !! \x09""!!", {3, 4, 5, 7}, 4},
    {"x   ", {1, 4}, 2},
    {"\xe4""\xb8""\xad""\xe6""\x96""\x87""\xe5""\xad""\x97"" \xe6""\x97""\xa5""\xe6""\x9c""\xac""\xe8""\xaa""\x9e""", {9, 19}, 2},
    {"caf\xc3""\xa9"" na\xc3""\xaf""ve \xc3""\xbc""ber", {5, 12, 18}, 3},
    {"\xf0""\x9f""\x98""\x80"" smile \xf0""\x9f""\x98""\x80""\xf0""\x9f""\x98""\x80""", {4, 10, 19}, 3},
    {"'hello' 'Ll 's", {6, 7, 9, 11, 13, 14}, 6},
    {"line1\x0a""line2\x0a""\x0a""\x0a""  indented", {4, 5, 6, 10, 11, 14, 15, 24}, 8},
    {"   ", {3}, 1},
    {"\x0a""", {1}, 1},
    {"a\xc2""\xa0""b \xe2""\x80""\x83""c", {1, 4, 5, 9}, 4},
    {"(x+y)*2=z", {2, 4, 6, 7, 9}, 5},
    {"__init__ self.__dict__", {2, 6, 8, 13, 16, 20, 22}, 7},
    {"\xe2""\x85""\xab"" \xc2""\xbd"" \xc2""\xb2""", {3, 4, 6, 7, 9}, 5},
};
static const split_case qwen2_cases[] = {
    {"Hello, World! I'M here; they'll say we've done it, don't you'RE?", {5, 6, 12, 13, 15, 17, 22, 23, 28, 31, 35, 38, 41, 46, 49, 50, 54, 56, 60, 63, 64}, 21},
    {"1234567 89 $100.00 3.14159", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}, 25},
    {"a  b   c    ", {1, 2, 4, 6, 8, 12}, 6},
    {"  \x0a""  \x0a""  x", {6, 7, 9}, 3},
    {"hello\x0a""\x0a""world\x0d""\x0a""", {5, 7, 12, 14}, 4},
    {"\x09""\x09""x\x09""y", {1, 3, 5}, 3},
    {"!hello ...world?!\x0a""\x0a""", {6, 10, 15, 19}, 4},
    {" !! \x09""!!", {3, 4, 5, 7}, 4},
    {"x   ", {1, 4}, 2},
    {"\xe4""\xb8""\xad""\xe6""\x96""\x87""\xe5""\xad""\x97"" \xe6""\x97""\xa5""\xe6""\x9c""\xac""\xe8""\xaa""\x9e""", {9, 19}, 2},
    {"caf\xc3""\xa9"" na\xc3""\xaf""ve \xc3""\xbc""ber", {5, 12, 18}, 3},
    {"\xf0""\x9f""\x98""\x80"" smile \xf0""\x9f""\x98""\x80""\xf0""\x9f""\x98""\x80""", {4, 10, 19}, 3},
    {"'hello' 'Ll 's", {6, 7, 9, 11, 13, 14}, 6},
    {"line1\x0a""line2\x0a""\x0a""\x0a""  indented", {4, 5, 6, 10, 11, 14, 15, 24}, 8},
    {"   ", {3}, 1},
    {"\x0a""", {1}, 1},
    {"a\xc2""\xa0""b \xe2""\x80""\x83""c", {1, 4, 5, 9}, 4},
    {"(x+y)*2=z", {2, 4, 6, 7, 9}, 5},
    {"__init__ self.__dict__", {2, 6, 8, 13, 16, 20, 22}, 7},
    {"\xe2""\x85""\xab"" \xc2""\xbd"" \xc2""\xb2""", {3, 4, 6, 7, 9}, 5},
};

static void check_cases(const char *pre, const split_case *cases, size_t n_cases)
{
    bpe_split_fn split = tokenizer_bpe_splitter(pre);
    assert_non_null(split);
    for (size_t c = 0; c < n_cases; c++) {
        const char *t = cases[c].text;
        size_t n = strlen(t), pos = 0;
        int w = 0;
        while (pos < n) {
            size_t end = split(t, n, pos);
            if (w >= cases[c].n || end != cases[c].ends[w])
                fprintf(stderr, "%s case %zu: word %d ends at %zu, want %zu\n", pre, c, w, end,
                        w < cases[c].n ? cases[c].ends[w] : 0);
            assert_true(w < cases[c].n);
            assert_int_equal(end, cases[c].ends[w]);
            pos = end;
            w++;
        }
        assert_int_equal(w, cases[c].n);
    }
}

static void test_llama3_words(void **state)
{
    (void)state;
    check_cases("llama-bpe", llama3_cases, sizeof llama3_cases / sizeof *llama3_cases);
    /* the other names llama.cpp's converter writes for it */
    assert_ptr_equal(tokenizer_bpe_splitter("llama3"), tokenizer_bpe_splitter("llama-bpe"));
    assert_ptr_equal(tokenizer_bpe_splitter("llama-v3"), tokenizer_bpe_splitter("llama-bpe"));
}

static void test_qwen2_words(void **state)
{
    (void)state;
    check_cases("qwen2", qwen2_cases, sizeof qwen2_cases / sizeof *qwen2_cases);
    assert_null(tokenizer_bpe_splitter("no-such-family"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_words),
        cmocka_unit_test(test_qwen2_words),
    };
    return cmocka_run_group_tests_name("tokenizer_pre", tests, NULL, NULL);
}
