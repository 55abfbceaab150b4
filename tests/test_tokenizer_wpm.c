/* test_tokenizer_wpm.c: the WordPiece tokenizer of bert vocabularies. The vocabulary and
 * the expected ids come from tests/wordpiece/wpm_ref.txt, which make_ref.py made with the
 * llama.cpp peer's /tokenize on the same vocabulary, with add_special and without; the test
 * writes that vocabulary as a GGUF with our writer and loads it as `tessera tokenize` does,
 * and serves it behind /tokenize. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "gguf/gguf.h"
#include "model/model_gguf.h"
#include "server_util.h"
#include "tessera/tokenizer.h"
#include "tokenizer/vocab.h"
#include "ref_util.h"
#include "util.h"

#define REF_PATH TS_SOURCE_DIR "/tests/wordpiece/wpm_ref.txt"

enum { MAX_TOKENS = 512, MAX_CASES = 192, MAX_IDS = 512 };

typedef struct ref_case {
    bool lowercase, strip_accents; /* the normalizer the peer ran under */
    bool flags;                    /* false: the file said add_bos_token, add_sep_token false */
    char text[1024];
    size_t len;
    int32_t ids[MAX_IDS]; /* with add_special: [CLS] and [SEP] */
    size_t n_ids;
    int32_t plain[MAX_IDS]; /* without */
    size_t n_plain;
} ref_case;

typedef struct ref_data {
    tokenizer_vocab vocab;
    ref_case cases[MAX_CASES];
    int n_cases;
} ref_data;

/* The reference file's vocabulary (its special ids as make_ref.py wrote them: [PAD] 0,
 * [UNK] 1, [CLS] 2, [SEP] 3; uncased, as the file's first texts) and its texts with
 * their ids and normalizers. */
static void ref_load(ref_data *r)
{
    memset(r, 0, sizeof *r);
    char *file = ref_read(REF_PATH, NULL), *cursor = file;
    tokenizer_vocab *v = &r->vocab;
    v->tokens = calloc(MAX_TOKENS, sizeof *v->tokens);
    assert_non_null(v->tokens);
    int lowercase = 1, strip = 1, bos = 1, sep = 1;
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        if (strncmp(line, "token ", 6) == 0) {
            assert_true(v->n_tokens < MAX_TOKENS);
            vocab_token *t = &v->tokens[v->n_tokens++];
            t->text = ref_unhex_dup(line + 6, &t->len);
            t->type = atoi(strchr(line + 6, ' ') + 1);
        } else if (strncmp(line, "config ", 7) == 0) {
            int got = sscanf(line + 7, "%d %d %d %d", &lowercase, &strip, &bos, &sep);
            assert_true(got == 2 || got == 4);
            assert_int_equal(bos, sep);
            if (got == 2)
                bos = sep = 1;
        } else if (strncmp(line, "text ", 5) == 0) {
            assert_true(r->n_cases < MAX_CASES);
            ref_case *c = &r->cases[r->n_cases++];
            c->len = ref_unhex(line + 5, c->text, sizeof c->text);
            c->lowercase = lowercase != 0;
            c->strip_accents = strip != 0;
            c->flags = bos != 0;
        } else {
            assert_true(r->n_cases > 0);
            ref_case *c = &r->cases[r->n_cases - 1];
            ref_id_line(line, c->ids, &c->n_ids, c->plain, &c->n_plain, MAX_IDS);
        }
    }
    free(file);
    v->kind = VOCAB_KIND_WPM;
    v->pad_id = 0, v->unk_id = 1, v->bos_id = 2, v->sep_id = 3;
    v->eos_id = -1, v->eot_id = -1;
    v->add_bos = v->add_sep = true;
    v->lowercase = v->strip_accents = true;
    assert_true(r->n_cases >= 90);
}

/* Fails, printing both, unless ids (n) are the peer's (n_want) for case k. */
static void expect_ids(int k, const ref_case *c, const char *how, const int32_t *ids, size_t n,
                       const int32_t *want, size_t n_want)
{
    char what[400];
    snprintf(what, sizeof what, "text %d '%.*s' (lowercase %d, strip %d, %s)", k, (int)c->len,
             c->text, c->lowercase, c->strip_accents, how);
    ref_expect_ids(what, ids, n, want, n_want);
}

/* Every text, under each normalizer, gives the peer's ids with add_special ([CLS] ...
 * [SEP], even where the file says add_bos_token and add_sep_token false) and without, read
 * as /tokenize reads it; also where the file asks for EOS after a text with [SEP] as EOS
 * (converted bert files do): llama.cpp's WordPiece ends a text with [SEP] alone whatever
 * add_eos_token says. */
static void test_peer_ids(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    ts_error err = {0};
    for (int asks_eos = 0; asks_eos < 2; asks_eos++) {
        ts_tokenizer *tok = NULL;
        int configs = 0;
        r.vocab.add_eos = asks_eos;
        r.vocab.eos_id = asks_eos ? 3 : -1;
        for (int k = 0; k < r.n_cases; k++) {
            const ref_case *c = &r.cases[k];
            if (!tok || c->lowercase != r.vocab.lowercase ||
                c->strip_accents != r.vocab.strip_accents || c->flags != r.vocab.add_sep) {
                ts_tokenizer_free(tok);
                r.vocab.lowercase = c->lowercase;
                r.vocab.strip_accents = c->strip_accents;
                r.vocab.add_bos = r.vocab.add_sep = c->flags;
                assert_int_equal(tu_tokenizer_via_gguf(&r.vocab, "wpm.gguf", &tok, &err), TS_OK);
                assert_int_equal(ts_tokenizer_add_eos(tok), asks_eos);
                configs++;
            }
            for (int special = 0; special < 2; special++) {
                ts_tokenize_opts o = {
                    .add_special = special, .add_eos = true, .parse_special = true};
                int32_t *ids = NULL;
                size_t n = 0;
                assert_int_equal(ts_tokenize_alloc(tok, c->text, c->len, &o, &ids, &n), TS_OK);
                expect_ids(k, c, special ? "add_special" : "plain", ids, n,
                           special ? c->ids : c->plain, special ? c->n_ids : c->n_plain);
                free(ids);
            }
        }
        assert_int_equal(configs, 4);
        ts_tokenizer_free(tok);
    }
    vocab_clear(&r.vocab);
}

static int32_t id_of(const tokenizer_vocab *v, const char *text)
{
    for (int i = 0; i < v->n_tokens; i++)
        if (strcmp(v->tokens[i].text, text) == 0)
            return i;
    fail_msg("no token '%s'", text);
    return -1;
}

/* Without the special tokens a text has no [CLS] / [SEP]; a file that turns [SEP] off
 * still frames a text with both, as llama.cpp, but gives rerank pairs no separator; a
 * cased vocabulary keeps capitals. */
static void test_special_and_case(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    tokenizer_vocab *v = &r.vocab;
    ts_error err = {0};
    ts_tokenizer *tok = NULL;
    int32_t hello = id_of(v, "\xe2\x96\x81hello"), world = id_of(v, "\xe2\x96\x81world");
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-plain.gguf", &tok, &err), TS_OK);
    int32_t ids[8];
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, "Hello world", 11, false, ids, 8, &n), TS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], hello);
    assert_int_equal(ids[1], world);
    ts_tokenizer_free(tok);

    v->add_sep = false;
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-nosep.gguf", &tok, &err), TS_OK);
    assert_int_equal(ts_tokenize(tok, "hello", 5, true, ids, 8, &n), TS_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], hello);
    assert_int_equal(ids[2], 3);
    assert_int_equal(ts_tokenizer_sep(tok), -1);
    ts_tokenizer_free(tok);

    v->lowercase = v->strip_accents = false;
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-cased.gguf", &tok, &err), TS_OK);
    assert_int_equal(ts_tokenize(tok, "Hello world", 11, false, ids, 8, &n), TS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], id_of(v, "\xe2\x96\x81Hello"));
    assert_int_equal(ids[1], world);
    ts_tokenizer_free(tok);
    vocab_clear(v);
}

/* Decoding joins continuation pieces to their word and puts a space between words,
 * with none before the first; [CLS] and [SEP] print nothing. */
static void test_detokenize(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    ts_error err = {0};
    ts_tokenizer *tok = NULL;
    assert_int_equal(tu_tokenizer_via_gguf(&r.vocab, "wpm-detok.gguf", &tok, &err), TS_OK);
    const char *text = "Unbelievable TOKENIZATION of cafés";
    int32_t *ids = NULL;
    size_t n = 0;
    ts_tokenize_opts o = {.add_special = true};
    assert_int_equal(ts_tokenize_alloc(tok, text, strlen(text), &o, &ids, &n), TS_OK);
    assert_true(n > 6); /* [CLS], pieces, [SEP] */
    char out[128];
    size_t len = ts_detokenize(tok, ids, n, out, sizeof out);
    assert_true(len < sizeof out);
    out[len] = '\0';
    assert_string_equal(out, "unbelievable tokenization of cafes");
    free(ids);
    ts_tokenizer_free(tok);
    vocab_clear(&r.vocab);
}

/* A long text of long words (1 MiB) is cut in linear time: a fraction of a second. */
static void test_long_text(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    ts_error err = {0};
    ts_tokenizer *tok = NULL;
    assert_int_equal(tu_tokenizer_via_gguf(&r.vocab, "wpm-longtext.gguf", &tok, &err), TS_OK);
    size_t len = 1 << 20;
    char *text = malloc(len);
    assert_non_null(text);
    static const char unit[] = "supercalifragilisticexpialidocious cooperation zzzz x";
    for (size_t i = 0; i < len; i++)
        text[i] = (i / (sizeof unit - 1)) % 7 == 6 ? 'y' : unit[i % (sizeof unit - 1)];
    int32_t *ids = NULL;
    size_t n = 0;
    ts_tokenize_opts o = {.add_special = true};
    assert_int_equal(ts_tokenize_alloc(tok, text, len, &o, &ids, &n), TS_OK);
    assert_true(n > len / 64);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[n - 1], 3);
    free(ids);
    free(text);
    ts_tokenizer_free(tok);
    vocab_clear(&r.vocab);
}

/* stdout of `tessera ARGS` (malloc'd); *status gets its exit status. */
static char *run_cli(const char *args, int *status)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/tessera %s 2>/dev/null", TS_BUILD_DIR, args);
    return tu_run(cmd, status);
}

/* The ids as `tessera tokenize` prints them: "1 2 3\n" (into out, cap bytes). */
static void ids_line(char *out, size_t cap, const int32_t *ids, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%d", i ? " " : "", (int)ids[i]);
    snprintf(out + strlen(out), cap - strlen(out), "\n");
}

/* `tessera tokenize` on a vocabulary-only bert GGUF (one that also asks for EOS, [SEP])
 * prints the peer's ids, [CLS] ... [SEP] (neither with --no-bos), and `tessera info` names
 * the vocabulary's kind and separator. */
static void test_cli(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    char path[512], args[1024];
    snprintf(path, sizeof path, "%s", tu_tmp_path("wpm-cli.gguf"));
    r.vocab.add_eos = true;
    r.vocab.eos_id = 3;
    tu_write_vocab_gguf(&r.vocab, path);
    int status = -1;
    snprintf(args, sizeof args, "tokenize -m %s -p 'Hello, World!'", path);
    char *out = run_cli(args, &status);
    assert_int_equal(status, 0);
    const ref_case *c = &r.cases[4];
    assert_memory_equal(c->text, "Hello, World!", c->len);
    char want[256];
    ids_line(want, sizeof want, c->ids, c->n_ids);
    assert_string_equal(out, want);
    free(out);
    snprintf(args, sizeof args, "tokenize --no-bos -m %s -p 'Hello, World!'", path);
    out = run_cli(args, &status);
    assert_int_equal(status, 0);
    ids_line(want, sizeof want, c->plain, c->n_plain);
    assert_string_equal(out, want);
    free(out);
    snprintf(args, sizeof args, "info -m %s", path);
    out = run_cli(args, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "bert (WordPiece)"));
    assert_non_null(strstr(out, "sep              3 \"[SEP]\""));
    free(out);
    remove(path);
    vocab_clear(&r.vocab);
}

/* A bert vocabulary without an unknown token, or with a special id past its end, is
 * refused with an error that says so. */
static void test_malformed(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    tokenizer_vocab *v = &r.vocab;
    ts_error err = {0};
    ts_tokenizer *tok = NULL;

    /* under 101 tokens, so that llama.cpp's default [UNK] id 100 does not apply */
    for (int i = 50; i < v->n_tokens; i++)
        free(v->tokens[i].text);
    v->n_tokens = 50;
    v->unk_id = -1;
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-nounk.gguf", &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "unknown token"));
    assert_int_equal(tokenizer_create(v, &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);

    v->unk_id = v->n_tokens + 5;
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-badunk.gguf", &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "unknown_token_id"));

    /* a token longer than any real one (each position of a word walks at most that far) */
    v->unk_id = 1;
    char *word = v->tokens[10].text;
    v->tokens[10].text = calloc(2000, 1);
    memset(v->tokens[10].text, 'a', 1999);
    v->tokens[10].len = 1999;
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-long.gguf", &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "bytes long"));
    free(v->tokens[10].text);
    v->tokens[10].text = word;
    v->tokens[10].len = (uint32_t)strlen(word);

    v->sep_id = v->n_tokens;
    assert_int_equal(tu_tokenizer_via_gguf(v, "wpm-badsep.gguf", &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "seperator_token_id"));
    assert_int_equal(tokenizer_create(v, &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    vocab_clear(v);
}

/* /tokenize on a model with the vocabulary answers the peer's ids for every uncased text:
 * llama.cpp's body ("content") with add_special ([CLS] ... [SEP]) and without, its default
 * being without; the OpenAI-style "prompt" with them by default. */
static void test_server_tokenize(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    sv_served s;
    ts_model *model = NULL;
    sv_start_encoder(&s, &model, &r.vocab);
    int checked = 0;
    for (int k = 0; k < r.n_cases; k++) {
        const ref_case *c = &r.cases[k];
        if (!c->lowercase || !c->strip_accents || !c->flags || memchr(c->text, '\0', c->len))
            continue;
        sv_expect_tokenize_forms(s.url, c->text, c->len, c->ids, c->n_ids, c->plain,
                                 c->n_plain);
        checked++;
    }
    assert_true(checked >= 30);
    /* with_pieces: the same ids, [CLS] and [SEP] spelled out, as the peer answers */
    sv_answer a;
    sv_post(s.url, "/tokenize",
            "{\"content\":\"hello world\",\"add_special\":true,\"with_pieces\":true}", &a);
    assert_int_equal(a.status, 200);
    char *tokens = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(a.json, "tokens"));
    assert_non_null(tokens);
    assert_string_equal(tokens, "[{\"id\":2,\"piece\":\"[CLS]\"},{\"id\":26,\"piece\":\" hello\"},"
                                "{\"id\":27,\"piece\":\" world\"},{\"id\":3,\"piece\":\"[SEP]\"}]");
    free(tokens);
    sv_answer_free(&a);
    sv_stop(&s);
    ts_model_free(model);
    vocab_clear(&r.vocab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_ids),
        cmocka_unit_test(test_special_and_case),
        cmocka_unit_test(test_detokenize),
        cmocka_unit_test(test_long_text),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_server_tokenize),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
