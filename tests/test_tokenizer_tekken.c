/* test_tokenizer_tekken.c: Mistral's tekken pre-tokenizer (tokenizer.ggml.pre "tekken",
 * Mistral Nemo, Small 3.x, Devstral) cuts text into words as llama.cpp does, and a tekken
 * vocabulary starts prompts with BOS and takes a word it holds whole. The word ends below
 * are printed by scripts/gen_tekken_cases.py, which runs llama.cpp's expression on the
 * text collapsed as llama.cpp collapses it; a few are worked by hand beside the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gguf/gguf.h"
#include "tessera/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "util.h"

typedef struct split_case {
    const char *text;
    size_t ends[32]; /* where each word ends; a 0 ends the list */
} split_case;

/* By hand, from the expression's alternatives (upper* lower+ | upper+ lower* after an
 * optional non-letter; one digit; ' '? punctuation+ [\r\n/]*; whitespace rules):
 *   "HelloWorld" -> "Hello" "World": the capital part takes "H", the lower-case "ello".
 *   "HTMLParser" -> one word: upper-case "HTMLP" then lower-case "arser".
 *   "iPhone" -> "i" "Phone"; " ABC" -> " ABC" (capitals only: the second alternative).
 *   "don't" -> " don" "'t": no contraction rule, the apostrophe leads the letters after it.
 *   "$100.00" -> "$" "1" "0" "0" "." "0" "0": digits one by one, "$" a word of its own.
 *   " \n/\n" -> " \n" "/\n": a slash run takes the line breaks and slashes after it.
 *   "ÉCOLE" -> "É" "COLE": to llama.cpp É has no case, so the lower-case part may start
 *   there, and only there: "É" alone, then the capitals.
 *   "cafe\u0301" -> "cafe" "\u0301": a combining mark is no letter to llama.cpp. */
static const split_case cases[] = {
    {"HelloWorld camelCase HTMLParser iPhone ABC DEF",
     {5, 10, 16, 20, 31, 33, 38, 42, 46}},
    {"McDonald'S O'Neil I'M don't we'll you're",
     {2, 8, 10, 12, 17, 19, 21, 25, 27, 30, 33, 37, 40}},
    {"1234567 89 $100.00 3.14159",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}},
    {"a/b//c http://x.y/z \n/\n",
     {1, 3, 5, 6, 11, 14, 15, 17, 19, 21, 23}},
    {"!hello ...world?!\n\n",
     {6, 10, 15, 19}},
    {" !! \t!!",
     {3, 4, 5, 7}},
    {"(x+y)*2=z __init__ self.__dict__",
     {2, 4, 6, 7, 9, 12, 16, 18, 23, 26, 30, 32}},
    {"a  b   c    ",
     {1, 2, 4, 6, 8, 12}},
    {"  \n  \n  x",
     {6, 7, 9}},
    {"hello\n\nworld\r\n",
     {5, 7, 12, 14}},
    {"\t\tx\ty",
     {1, 3, 5}},
    {"x   ",
     {1, 4}},
    {"   ",
     {3}},
    {"\n",
     {1}},
    /* a\u00a0b \u2003c */
    {"a\xc2\xa0""b \xe2\x80\x83""c",
     {1, 4, 5, 9}},
    /* café naïve über ÉCOLE ÜBER Straße */
    {"caf\xc3\xa9 na\xc3\xafve \xc3\xbc""ber \xc3\x89""COLE \xc3\x9c""BER Stra\xc3\x9f""e",
     {5, 12, 18, 21, 25, 28, 31, 39}},
    /* Москва МОСКВА мир Ελληνικά */
    {"\xd0\x9c\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0 \xd0\x9c\xd0\x9e\xd0\xa1\xd0\x9a"
     "\xd0\x92\xd0\x90 \xd0\xbc\xd0\xb8\xd1\x80 \xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd"
     "\xce\xb9\xce\xba\xce\xac",
     {12, 25, 32, 49}},
    /* AÉB ÀB aÀb ÀbC */
    {"A\xc3\x89""B \xc3\x80""B a\xc3\x80""b \xc3\x80""bC",
     {3, 4, 7, 8, 13, 17, 18}},
    /* 中文字 日本語 한국어 テスト */
    {"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c"
     "\xea\xb5\xad\xec\x96\xb4 \xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88",
     {9, 19, 29, 39}},
    /* שלום עולם مرحبا */
    {"\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xd7\xa2\xd7\x95\xd7\x9c\xd7\x9d \xd9\x85\xd8\xb1"
     "\xd8\xad\xd8\xa8\xd8\xa7",
     {8, 17, 28}},
    /* café été */
    {"cafe\xcc\x81 e\xcc\x81t\xc3\xa9",
     {4, 6, 8, 13}},
    /* 😀 smile 😀😀 */
    {"\xf0\x9f\x98\x80 smile \xf0\x9f\x98\x80\xf0\x9f\x98\x80",
     {4, 10, 19}},
    /* Ⅻ ½ ² ١٢٣ */
    {"\xe2\x85\xab \xc2\xbd \xc2\xb2 \xd9\xa1\xd9\xa2\xd9\xa3",
     {3, 4, 6, 7, 9, 10, 12, 14, 16}},
};

static void test_tekken_words(void **state)
{
    (void)state;
    bpe_split_fn split = tokenizer_bpe_splitter("tekken");
    assert_non_null(split);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *t = cases[c].text;
        size_t n = strlen(t), pos = 0;
        int w = 0;
        for (; pos < n; w++) {
            size_t end = split(t, n, pos);
            if (end != cases[c].ends[w])
                fprintf(stderr, "case %zu: word %d ends at %zu, want %zu\n", c, w, end,
                        cases[c].ends[w]);
            assert_int_equal(end, cases[c].ends[w]);
            pos = end;
        }
        assert_int_equal(cases[c].ends[w], 0);
    }
    /* not another family's splitter under a new name */
    assert_ptr_not_equal(split, tokenizer_bpe_splitter("llama-bpe"));
    assert_ptr_not_equal(split, tokenizer_bpe_splitter("qwen2"));
}

/* GPT-2's stand-in code point for byte b (printable bytes are themselves, the others
 * 256, 257, ... in byte order), as UTF-8 into out; returns its length. */
static size_t byte_piece(unsigned b, char *out)
{
    unsigned cp = b, k = 0;
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (unsigned x = 0; x < b; x++)
            k += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

enum { TK_N_SPECIAL = 6, TK_N_WORDS = 6 };
/* The vocabulary: special tokens, the 256 bytes, then whole words with no merge that
 * builds them (a tekken vocabulary is taken word by word first). */
static const char *const specials[TK_N_SPECIAL] = {"<unk>", "<s>", "</s>", "[INST]",
                                                   "[/INST]", "[TOOL_CALLS]"};
static const char *const words[TK_N_WORDS] = {"Hello", "\xc4\xa0" "camel", "Case",
                                               "\xc4\xa0" "world", "\xc4\xa0" "camelCase",
                                               "'t"};

static int32_t word_id(int i)
{
    return TK_N_SPECIAL + 256 + i;
}

/* A tekken vocabulary-only GGUF at path: model gpt2, pre tekken, <s> 1 and </s> 2, and
 * tokenizer.ggml.add_bos_token only when add_bos_key is 0 or 1 (-1: absent). */
static void write_tekken_vocab(const char *path, int add_bos_key)
{
    enum { N = TK_N_SPECIAL + 256 + TK_N_WORDS };
    static char bytes[256][3];
    const char *tokens[N];
    int32_t types[N];
    for (int i = 0; i < TK_N_SPECIAL; i++) {
        tokens[i] = specials[i];
        types[i] = i == 0 ? 2 : 3;
    }
    for (unsigned b = 0; b < 256; b++) {
        size_t len = byte_piece(b, bytes[b]);
        bytes[b][len] = '\0';
        tokens[TK_N_SPECIAL + b] = bytes[b];
        types[TK_N_SPECIAL + b] = 1;
    }
    for (int i = 0; i < TK_N_WORDS; i++) {
        tokens[word_id(i)] = words[i];
        types[word_id(i)] = 1;
    }
    const char *merges[] = {"H e"};
    gguf_writer *w = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_create(0, &w, &err), TS_OK);
    gguf_writer_add_str(w, "general.architecture", "llama");
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", "tekken");
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", tokens, NULL, N);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N);
    gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, NULL, 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (add_bos_key >= 0)
        gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", add_bos_key == 1);
    assert_int_equal(gguf_writer_write_file(w, path, &err), TS_OK);
    gguf_writer_free(w);
}

static ts_tokenizer *load_tekken(int add_bos_key)
{
    const char *path = tu_tmp_path("tekken-vocab.gguf");
    write_tekken_vocab(path, add_bos_key);
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    ts_status st = ts_tokenizer_load_gguf(path, &tok, &err);
    if (st != TS_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, TS_OK);
    return tok;
}

static int32_t byte_id(char c)
{
    return TK_N_SPECIAL + (unsigned char)c;
}

/* Without tokenizer.ggml.add_bos_token a tekken file starts prompts with <s>, as llama.cpp
 * reads it; words the vocabulary holds are one token each though no merge builds them;
 * " camelCase" is two words; digits go one by one; </s> ends generation. */
static void test_tekken_vocab(void **state)
{
    (void)state;
    ts_tokenizer *tok = load_tekken(-1);
    assert_true(ts_tokenizer_add_bos(tok));
    const char *text = "Hello camelCase world don't 42";
    int32_t want[] = {1, word_id(0), word_id(1), word_id(2), word_id(3), byte_id(' '),
                      byte_id('d'), byte_id('o'), byte_id('n'), word_id(5), byte_id(' '),
                      byte_id('4'), byte_id('2')};
    int32_t got[32];
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, text, strlen(text), true, got, 32, &n), TS_OK);
    assert_int_equal(n, sizeof want / sizeof *want);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
    char out[64];
    size_t len = ts_detokenize(tok, got, n, out, sizeof out);
    assert_int_equal(len, strlen(text));
    assert_memory_equal(out, text, len);
    assert_true(ts_token_is_eog(tok, 2));
    assert_false(ts_token_is_eog(tok, 1));
    ts_tokenizer_free(tok);

    /* the file's key wins over the family's default */
    tok = load_tekken(0);
    assert_false(ts_tokenizer_add_bos(tok));
    assert_int_equal(ts_tokenize(tok, "Hello", 5, true, got, 32, &n), TS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(got[0], word_id(0));
    ts_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tekken_words),
        cmocka_unit_test(test_tekken_vocab),
    };
    return cmocka_run_group_tests_name("tokenizer_tekken", tests, NULL, NULL);
}
