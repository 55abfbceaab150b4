/* test_tokenizer_bpe.c: byte-level BPE on hand-made vocabularies (byte map, merge ranks,
 * pre-tokenizer boundaries, malformed merges) and the Unicode flag table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tessera/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

/* GPT-2's bytes_to_unicode, written out independently of bpe.c: printable bytes stand
 * for themselves, the others get 256, 257, ... in order. */
static uint32_t stand_in(unsigned b)
{
    uint32_t n = 0;
    for (unsigned x = 0; x < 256; x++) {
        int printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
        if (x == b)
            return printable ? x : 256 + n;
        n += !printable;
    }
    return 0;
}

static char *utf8(uint32_t cp)
{
    char *s = calloc(3, 1);
    assert_non_null(s);
    if (cp < 0x80) {
        s[0] = (char)cp;
    } else {
        s[0] = (char)(0xC0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3F));
    }
    return s;
}

/* Tokens 0..255: the bytes' stand-ins; then extra tokens; then "<|endoftext|>". */
static void make_vocab(tokenizer_vocab *v, const char *const *extra, int n_extra,
                       const char *const *merges, int n_merges)
{
    memset(v, 0, sizeof *v);
    v->kind = VOCAB_KIND_BPE;
    v->n_tokens = 256 + n_extra + 1;
    v->tokens = calloc((size_t)v->n_tokens, sizeof *v->tokens);
    assert_non_null(v->tokens);
    for (int i = 0; i < v->n_tokens; i++) {
        v->tokens[i].text = i < 256           ? utf8(stand_in((unsigned)i))
                            : i < 256 + n_extra ? strdup(extra[i - 256])
                                                : strdup("<|endoftext|>");
        v->tokens[i].len = (uint32_t)strlen(v->tokens[i].text);
        v->tokens[i].type = i < 256 + n_extra ? VOCAB_TOKEN_NORMAL : VOCAB_TOKEN_CONTROL;
    }
    v->n_merges = n_merges;
    v->merges = calloc((size_t)n_merges + 1, sizeof *v->merges);
    assert_non_null(v->merges);
    for (int i = 0; i < n_merges; i++)
        v->merges[i] = strdup(merges[i]);
    v->bos_id = v->eos_id = v->n_tokens - 1;
    v->unk_id = v->pad_id = v->eot_id = -1;
    strcpy(v->pre, "gpt2");
}

static size_t encode(const ts_tokenizer *tok, const char *text, int32_t *ids, size_t cap)
{
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, text, strlen(text), false, ids, cap, &n), TS_OK);
    assert_true(n <= cap);
    return n;
}

static void test_every_byte_round_trips(void **state)
{
    (void)state;
    tokenizer_vocab v;
    make_vocab(&v, NULL, 0, NULL, 0);
    ts_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_create(&v, &tok, NULL), TS_OK);
    vocab_clear(&v);
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    int32_t ids[256];
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, all, 256, false, ids, 256, &n), TS_OK);
    assert_int_equal(n, 256); /* no merges: one token per byte, the byte's own */
    for (int i = 0; i < 256; i++) {
        assert_int_equal(ids[i], i);
        size_t len;
        const char *p = ts_token_bytes(tok, i, &len);
        assert_int_equal(len, 1);
        assert_int_equal((unsigned char)p[0], i);
    }
    char back[256];
    assert_int_equal(ts_detokenize(tok, ids, n, back, sizeof back), 256);
    assert_memory_equal(back, all, 256);
    /* GPT-2 does not start prompts with BOS... */
    assert_false(ts_tokenizer_add_bos(tok));
    assert_int_equal(ts_tokenize(tok, "a", 1, true, ids, 4, &n), TS_OK);
    assert_int_equal(n, 1);
    ts_tokenizer_free(tok);
    /* ...but where the vocabulary says to, BOS is the end-of-text control token and
     * decodes to nothing. */
    make_vocab(&v, NULL, 0, NULL, 0);
    v.add_bos = true;
    assert_int_equal(tokenizer_create(&v, &tok, NULL), TS_OK);
    vocab_clear(&v);
    assert_int_equal(ts_tokenize(tok, "a", 1, true, ids, 4, &n), TS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 256);
    assert_true(ts_token_is_eog(tok, 256));
    assert_int_equal(ts_detokenize(tok, ids, n, back, sizeof back), 1);
    ts_tokenizer_free(tok);
}

static void test_merges_by_rank_within_words(void **state)
{
    (void)state;
    /* "Ġ" is the stand-in of the space byte (U+0120). */
    const char *extra[] = {"bc", "ab", "abc", "\xc4\xa0" "a", "a\xc4\xa0", "123"};
    const char *merges[] = {"b c", "a b", "a bc", "\xc4\xa0 a", "a \xc4\xa0", "1 2", "12 3"};
    tokenizer_vocab v;
    make_vocab(&v, extra, 6, merges, 7);
    ts_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_create(&v, &tok, NULL), TS_OK);
    int32_t ids[16];
    /* "b c" ranks before "a b": abc -> a + bc -> abc (258), not ab + c. */
    assert_int_equal(encode(tok, "abc", ids, 16), 1);
    assert_int_equal(ids[0], 258);
    /* The pre-tokenizer splits "a a" into "a" and " a": "a Ġ" never merges. */
    assert_int_equal(encode(tok, "a a", ids, 16), 2);
    assert_int_equal(ids[0], 'a');
    assert_int_equal(ids[1], 259); /* "Ġa" */
    /* Letters and digits are separate words: "a123" -> a, 123. */
    assert_int_equal(encode(tok, "a123", ids, 16), 2);
    assert_int_equal(ids[1], 261);
    /* Runs of spaces keep the last one for the next word: "a  a" -> a, " ", " a". */
    assert_int_equal(encode(tok, "a  a", ids, 16), 3);
    assert_int_equal(ids[1], ' ');
    assert_int_equal(ids[2], 259);
    /* Contractions are words of their own: "a's" -> a, ', s. */
    assert_int_equal(encode(tok, "a's", ids, 16), 3);
    ts_tokenizer_free(tok);

    /* Unknown pre-tokenizer families and malformed merges are refused. */
    ts_error err = {0};
    strcpy(v.pre, "no-such-family");
    assert_int_equal(tokenizer_create(&v, &tok, &err), TS_ERR_UNSUPPORTED);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "no-such-family"));
    strcpy(v.pre, "gpt-2");
    free(v.merges[3]);
    v.merges[3] = strdup("nospace");
    assert_int_equal(tokenizer_create(&v, &tok, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "merge 3"));
    vocab_clear(&v);
}

/* Llama 3's family takes a word the vocabulary holds whole as that token before merging
 * (llama.cpp's and Hugging Face's ignore_merges): no merge makes "abc" of "ab" and "c",
 * yet "abc" is a token. GPT-2 and the others merge as the ranks say. */
static void test_llama3_takes_known_words_whole(void **state)
{
    (void)state;
    const char *extra[] = {"ab", "abc"};
    const char *merges[] = {"a b"};
    static const struct {
        const char *pre;
        size_t n;
        int32_t ids[2];
    } cases[] = {
        {"llama-bpe", 1, {257}},      {"llama3", 1, {257}},   {"llama-v3", 1, {257}},
        {"falcon3", 1, {257}},        {"gpt2", 2, {256, 'c'}}, {"qwen2", 2, {256, 'c'}},
        {"smollm", 2, {256, 'c'}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tokenizer_vocab v;
        make_vocab(&v, extra, 2, merges, 1);
        strcpy(v.pre, cases[i].pre);
        ts_tokenizer *tok = NULL;
        assert_int_equal(tokenizer_create(&v, &tok, NULL), TS_OK);
        vocab_clear(&v);
        int32_t ids[8];
        size_t n = encode(tok, "abc", ids, 8);
        if (n != cases[i].n || memcmp(ids, cases[i].ids, n * sizeof *ids) != 0)
            fail_msg("pre %s: %zu ids, the first %d", cases[i].pre, n, (int)ids[0]);
        /* a word that is no token still merges: "abab" is ab ab under any pre */
        n = encode(tok, "abab", ids, 8);
        assert_int_equal(n, 2);
        assert_int_equal(ids[0], 256);
        assert_int_equal(ids[1], 256);
        ts_tokenizer_free(tok);
    }
}

static void test_invalid_utf8_bytes(void **state)
{
    (void)state;
    tokenizer_vocab v;
    make_vocab(&v, NULL, 0, NULL, 0);
    ts_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_create(&v, &tok, NULL), TS_OK);
    vocab_clear(&v);
    static const char bad[] = "x\xff\xc3 \xe2\x82 y\xed\xa0\x80\xf4\x90\x80\x80";
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, bad, sizeof bad - 1, false, ids, 64, &n), TS_OK);
    assert_int_equal(n, sizeof bad - 1);
    char back[64];
    assert_int_equal(ts_detokenize(tok, ids, n, back, sizeof back), sizeof bad - 1);
    assert_memory_equal(back, bad, sizeof bad - 1);
    ts_tokenizer_free(tok);
}

static void test_unicode_flags(void **state)
{
    (void)state;
    assert_true(tokenizer_cpt_flags('A') & TOKENIZER_CPT_UPPER);
    assert_true(tokenizer_cpt_flags('z') & TOKENIZER_CPT_LETTER);
    assert_true(tokenizer_cpt_flags('7') & TOKENIZER_CPT_NUMBER);
    assert_true(tokenizer_cpt_flags(0x0663) & TOKENIZER_CPT_NUMBER);    /* Arabic-Indic 3 */
    assert_true(tokenizer_cpt_flags(0x2163) & TOKENIZER_CPT_NUMBER);    /* Roman numeral IV */
    assert_true(tokenizer_cpt_flags(0x65E5) & TOKENIZER_CPT_LETTER);    /* 日 */
    assert_true(tokenizer_cpt_flags(0x00E9) & TOKENIZER_CPT_LOWER);     /* é */
    assert_true(tokenizer_cpt_flags(0x3000) & TOKENIZER_CPT_WHITESPACE);
    assert_true(tokenizer_cpt_flags(0x00A0) & TOKENIZER_CPT_WHITESPACE);
    assert_true(tokenizer_cpt_flags('\n') & TOKENIZER_CPT_WHITESPACE);
    assert_false(tokenizer_cpt_flags(0x001C) & TOKENIZER_CPT_WHITESPACE); /* not White_Space */
    assert_true(tokenizer_cpt_flags(0x0301) & TOKENIZER_CPT_MARK);
    assert_true(tokenizer_cpt_flags('!') & TOKENIZER_CPT_PUNCT);
    assert_true(tokenizer_cpt_flags(0x1F680) & TOKENIZER_CPT_SYMBOL);  /* 🚀 */
    assert_int_equal(tokenizer_cpt_flags(0x0378), 0);                  /* unassigned */
    assert_int_equal(tokenizer_cpt_flags(0x110000), 0);
    for (size_t i = 1; i < tokenizer_cpt_n_ranges; i++)
        assert_true(tokenizer_cpt_ranges[i - 1].last < tokenizer_cpt_ranges[i].first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte_round_trips),
        cmocka_unit_test(test_merges_by_rank_within_words),
        cmocka_unit_test(test_llama3_takes_known_words_whole),
        cmocka_unit_test(test_invalid_utf8_bytes),
        cmocka_unit_test(test_unicode_flags),
    };
    return cmocka_run_group_tests_name("tokenizer_bpe", tests, NULL, NULL);
}
