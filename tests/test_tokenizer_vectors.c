/* test_tokenizer_vectors.c: llama.cpp's tokenizer test vectors (ggml-vocab-*.gguf.inp /
 * .out) must come out exactly, id for id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gguf/gguf.h"
#include "model/model_gguf.h"
#include "tessera/tokenizer.h"
#include "tokenizer/vocab.h"
#include "util.h"

#define VEC_SEP "\n__ggml_vocab_test__\n"

typedef struct vectors {
    char *inp, *out;    /* the files, NUL-terminated */
    const char *in[64]; /* (n) inputs, each in_len[i] bytes into inp */
    size_t in_len[64];
    const char *ids[64]; /* (n) output lines, each up to its '\n' */
    int n;
} vectors;

/* Inputs are the pieces of .inp between separator lines (the file ends with one). */
static void vectors_load(vectors *v, const char *base)
{
    char path[512];
    memset(v, 0, sizeof *v);
    snprintf(path, sizeof path, "%s.inp", tu_shared(base));
    v->inp = tu_read_file(path, NULL);
    snprintf(path, sizeof path, "%s.out", tu_shared(base));
    v->out = tu_read_file(path, NULL);
    assert_non_null(v->inp);
    assert_non_null(v->out);
    const char *p = v->inp;
    for (const char *sep; (sep = strstr(p, VEC_SEP)) != NULL; p = sep + strlen(VEC_SEP)) {
        assert_true(v->n < 64);
        v->in[v->n] = p;
        v->in_len[v->n] = (size_t)(sep - p);
        v->n++;
    }
    assert_int_equal(*p, '\0');
    int lines = 0;
    for (const char *q = v->out; *q; q = strchr(q, '\n') + 1) {
        assert_true(lines < v->n);
        v->ids[lines++] = q;
        assert_non_null(strchr(q, '\n'));
    }
    assert_int_equal(lines, v->n);
}

static void vectors_free(vectors *v)
{
    free(v->inp);
    free(v->out);
}

/* Tokenizes every input (no BOS) and compares with the expected ids; returns failures. */
static int vectors_check(const ts_tokenizer *tok, const vectors *v)
{
    int failures = 0;
    for (int i = 0; i < v->n; i++) {
        int32_t got[1024];
        size_t n_got = 0;
        assert_int_equal(ts_tokenize(tok, v->in[i], v->in_len[i], false, got, 1024, &n_got),
                         TS_OK);
        assert_true(n_got <= 1024);
        size_t k = 0;
        int ok = 1;
        const char *q = v->ids[i];
        while (*q != '\n') {
            char *end;
            long id = strtol(q, &end, 10);
            if (end == q)
                break;
            ok &= k < n_got && got[k] == id;
            k++;
            q = end;
        }
        ok &= k == n_got;
        if (!ok) {
            failures++;
            fprintf(stderr, "vector %d (%.*s): expected%.*s\n got", i, (int)v->in_len[i],
                    v->in[i], (int)(strchr(v->ids[i], '\n') - v->ids[i]), v->ids[i]);
            for (size_t j = 0; j < n_got; j++)
                fprintf(stderr, " %d", (int)got[j]);
            fprintf(stderr, "\n");
        }
    }
    return failures;
}

/* llama2.c's tokenizer.bin holds the Llama-2 vocabulary with the same scores as the GGUF
 * one, so llama.cpp's SPM vectors must pass with it too. */
static void test_spm_vectors_with_llama2c_vocab(void **state)
{
    (void)state;
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tokenizer_load_llama2c(tu_shared("models/llama2-tokenizer/tokenizer.bin"),
                                               32000, &tok, &err),
                     TS_OK);
    vectors v;
    vectors_load(&v, "vocab/ggml-vocab-llama-spm.gguf");
    assert_int_equal(v.n, 46);
    assert_int_equal(vectors_check(tok, &v), 0);
    vectors_free(&v);
    ts_tokenizer_free(tok);
}

static void check_gguf_vectors(const char *base)
{
    /* The GGUF reader's vocabulary, handed to tokenizer_create() as
     * ts_tokenizer_load_gguf() will once it exists. */
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    gguf_file *f = NULL;
    tokenizer_vocab voc;
    ts_status st = gguf_open(tu_shared(base), &f, &err);
    if (st == TS_OK)
        st = vocab_read_gguf(&voc, f, &err);
    if (st == TS_OK) {
        st = tokenizer_create(&voc, &tok, &err);
        vocab_clear(&voc);
    }
    gguf_close(f);
    if (st != TS_OK)
        fprintf(stderr, "%s: %s\n", base, err.msg);
    assert_int_equal(st, TS_OK);
    vectors v;
    vectors_load(&v, base);
    assert_int_equal(v.n, 46);
    assert_int_equal(vectors_check(tok, &v), 0);
    vectors_free(&v);
    ts_tokenizer_free(tok);
}

static void test_spm_vectors_with_gguf_vocab(void **state)
{
    (void)state;
    check_gguf_vectors("vocab/ggml-vocab-llama-spm.gguf");
}

static void test_gpt2_vectors_with_gguf_vocab(void **state)
{
    (void)state;
    check_gguf_vectors("vocab/ggml-vocab-gpt-2.gguf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_vectors_with_llama2c_vocab),
        cmocka_unit_test(test_spm_vectors_with_gguf_vocab),
        cmocka_unit_test(test_gpt2_vectors_with_gguf_vocab),
    };
    return cmocka_run_group_tests_name("tokenizer_vectors", tests, NULL, NULL);
}
