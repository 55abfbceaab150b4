/* test_tokenizer_ugm.c: the Unigram tokenizer of t5 vocabularies. The vocabulary, its
 * configurations and the expected ids come from tests/unigram/ugm_ref.txt, which
 * make_ref.py made with the llama.cpp peer's /tokenize on the same vocabulary, with
 * add_special and without; the test writes that vocabulary as a GGUF with our writer and
 * loads it as `tessera tokenize` does, and serves it behind /tokenize. */
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
#include "server/rerank.h"
#include "server_util.h"
#include "tessera/tokenizer.h"
#include "tokenizer/vocab.h"
#include "ref_util.h"
#include "util.h"

#define REF_PATH TS_SOURCE_DIR "/tests/unigram/ugm_ref.txt"

enum { MAX_TOKENS = 512, MAX_CASES = 512, MAX_IDS = 256, MAX_CONFIGS = 8 };

typedef struct ref_config {
    bool add_space_prefix, remove_extra_whitespaces;
    uint8_t charsmap[8192]; /* (charsmap_len) */
    uint32_t charsmap_len;
} ref_config;

typedef struct ref_case {
    int config;
    char text[1024];
    size_t len;
    int32_t ids[MAX_IDS]; /* with add_special: BOS and EOS */
    size_t n_ids;
    int32_t plain[MAX_IDS]; /* without */
    size_t n_plain;
} ref_case;

typedef struct ref_data {
    tokenizer_vocab vocab;
    ref_config configs[MAX_CONFIGS];
    int n_configs;
    ref_case cases[MAX_CASES];
    int n_cases;
} ref_data;

/* Puts configuration c (its flags and charsmap) into v. */
static void use_config(tokenizer_vocab *v, const ref_config *c)
{
    free(v->charsmap);
    v->charsmap = NULL;
    v->charsmap_len = 0;
    v->add_space_prefix = c->add_space_prefix;
    v->remove_extra_whitespaces = c->remove_extra_whitespaces;
    if (c->charsmap_len) {
        v->charsmap = malloc(c->charsmap_len);
        assert_non_null(v->charsmap);
        memcpy(v->charsmap, c->charsmap, c->charsmap_len);
        v->charsmap_len = c->charsmap_len;
    }
}

/* The reference file's vocabulary (its special ids as make_ref.py wrote them: <s> 0,
 * <pad> 1, </s> 2, <unk> 3; BOS and EOS around texts) under its first configuration,
 * and its texts with their ids and configurations. */
static void ref_load(ref_data *r)
{
    memset(r, 0, sizeof *r);
    char *file = ref_read(REF_PATH, NULL), *cursor = file;
    tokenizer_vocab *v = &r->vocab;
    v->tokens = calloc(MAX_TOKENS, sizeof *v->tokens);
    assert_non_null(v->tokens);
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        if (strncmp(line, "token ", 6) == 0) {
            assert_true(v->n_tokens < MAX_TOKENS);
            vocab_token *t = &v->tokens[v->n_tokens++];
            t->text = ref_unhex_dup(line + 6, &t->len);
            unsigned bits;
            assert_int_equal(sscanf(strchr(line + 6, ' ') + 1, "%d %x", &t->type, &bits), 2);
            memcpy(&t->score, &bits, 4);
        } else if (strncmp(line, "config ", 7) == 0) {
            assert_true(r->n_configs < MAX_CONFIGS);
            ref_config *c = &r->configs[r->n_configs++];
            int prefix, merge;
            assert_int_equal(sscanf(line + 7, "%d %d", &prefix, &merge), 2);
            c->add_space_prefix = prefix != 0;
            c->remove_extra_whitespaces = merge != 0;
            const char *map = strchr(strchr(line + 7, ' ') + 1, ' ') + 1;
            if (map[0] != '-')
                c->charsmap_len =
                    (uint32_t)ref_unhex(map, (char *)c->charsmap, sizeof c->charsmap);
        } else if (strncmp(line, "text ", 5) == 0) {
            assert_true(r->n_cases < MAX_CASES && r->n_configs > 0);
            ref_case *c = &r->cases[r->n_cases++];
            c->len = ref_unhex(line + 5, c->text, sizeof c->text);
            c->config = r->n_configs - 1;
        } else {
            assert_true(r->n_cases > 0);
            ref_case *c = &r->cases[r->n_cases - 1];
            ref_id_line(line, c->ids, &c->n_ids, c->plain, &c->n_plain, MAX_IDS);
        }
    }
    free(file);
    v->kind = VOCAB_KIND_UGM;
    v->bos_id = 0, v->pad_id = 1, v->eos_id = 2, v->unk_id = 3;
    v->eot_id = -1, v->sep_id = -1;
    v->add_bos = v->add_eos = true;
    assert_true(r->n_configs >= 3);
    assert_true(r->n_cases >= 300);
    use_config(v, &r->configs[0]);
}

/* The ids of text with special tokens parsed, and BOS and EOS as the vocabulary asks
 * when add_special (llama.cpp's /tokenize); *n receives their count. */
static int32_t *tokenize_as(const ts_tokenizer *tok, const char *text, size_t len,
                            bool add_special, size_t *n)
{
    ts_tokenize_opts o = {.add_special = add_special, .add_eos = true, .parse_special = true};
    int32_t *ids = NULL;
    assert_int_equal(ts_tokenize_alloc(tok, text, len, &o, &ids, n), TS_OK);
    return ids;
}

/* Fails, printing both, unless ids (n) are the peer's (n_want) for case k. */
static void expect_ids(int k, const ref_case *c, const char *how, const int32_t *ids, size_t n,
                       const int32_t *want, size_t n_want)
{
    char what[400];
    snprintf(what, sizeof what, "text %d '%.*s' (config %d, %s)", k, (int)c->len, c->text,
             c->config, how);
    ref_expect_ids(what, ids, n, want, n_want);
}

/* Every text, under each configuration, gives the peer's ids, with add_special (BOS and
 * EOS, as the vocabulary asks) and without. */
static void test_peer_ids(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    ts_error err = {0};
    ts_tokenizer *tok = NULL;
    int config = -1, configs = 0;
    for (int k = 0; k < r.n_cases; k++) {
        const ref_case *c = &r.cases[k];
        if (c->config != config) {
            ts_tokenizer_free(tok);
            config = c->config;
            use_config(&r.vocab, &r.configs[config]);
            assert_int_equal(tu_tokenizer_via_gguf(&r.vocab, "ugm.gguf", &tok, &err), TS_OK);
            configs++;
        }
        size_t n = 0;
        int32_t *ids = tokenize_as(tok, c->text, c->len, true, &n);
        expect_ids(k, c, "add_special", ids, n, c->ids, c->n_ids);
        free(ids);
        /* a prompt's reading (add_special without add_eos): the same ids but the closing EOS */
        ts_tokenize_opts prompt = {.add_special = true, .parse_special = true};
        assert_int_equal(ts_tokenize_alloc(tok, c->text, c->len, &prompt, &ids, &n), TS_OK);
        size_t closing = ts_tokenizer_text_eos(tok) ? 1 : 0;
        assert_true(c->n_ids >= closing);
        expect_ids(k, c, "add_special, no add_eos", ids, n, c->ids, c->n_ids - closing);
        free(ids);
        ids = tokenize_as(tok, c->text, c->len, false, &n);
        expect_ids(k, c, "plain", ids, n, c->plain, c->n_plain);
        free(ids);
    }
    assert_int_equal(configs, r.n_configs);
    ts_tokenizer_free(tok);
    vocab_clear(&r.vocab);
}

/* The case of the given configuration whose text is text. */
static const ref_case *find_case(const ref_data *r, int config, const char *text)
{
    for (int k = 0; k < r->n_cases; k++)
        if (r->cases[k].config == config && r->cases[k].len == strlen(text) &&
            memcmp(r->cases[k].text, text, r->cases[k].len) == 0)
            return &r->cases[k];
    fail_msg("no case '%s'", text);
    return NULL;
}

/* Without the special tokens a text has neither BOS nor EOS and "<s>" is plain text;
 * decoding gives the text back without the space prefix's space. */
static void test_plain_and_detokenize(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    ts_error err = {0};
    ts_tokenizer *tok = NULL;
    assert_int_equal(tu_tokenizer_via_gguf(&r.vocab, "ugm-plain.gguf", &tok, &err), TS_OK);
    const ref_case *c = find_case(&r, 0, "hello world");
    int32_t ids[16];
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, "hello world", 11, false, ids, 16, &n), TS_OK);
    assert_int_equal(n, c->n_ids - 2);
    assert_memory_equal(ids, c->ids + 1, n * sizeof *ids);
    char out[64];
    size_t len = ts_detokenize(tok, ids, n, out, sizeof out);
    assert_int_equal(len, 11);
    assert_memory_equal(out, "hello world", 11);
    assert_int_equal(ts_tokenize(tok, "<s>", 3, false, ids, 16, &n), TS_OK);
    assert_true(n > 1);
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(ids[i], 0);
    ts_tokenizer_free(tok);
    vocab_clear(&r.vocab);
}

/* Random texts (random bytes, pieces of the vocabulary, spaces and special tokens'
 * texts) under every configuration tokenize without error, each id in the vocabulary,
 * and a charsmap whose replacement offset points past its strings is an error, not a
 * read out of bounds. */
static void test_random_texts(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    ts_error err = {0};
    uint32_t seed = 12345;
    char text[512];
    for (int config = 0; config < r.n_configs; config++) {
        ts_tokenizer *tok = NULL;
        use_config(&r.vocab, &r.configs[config]);
        assert_int_equal(tu_tokenizer_via_gguf(&r.vocab, "ugm-fuzz.gguf", &tok, &err), TS_OK);
        for (int iter = 0; iter < 400; iter++) {
            size_t len = 0, want = (seed = seed * 1103515245u + 12345u) >> 23;
            while (len < want && len < sizeof text - 64) {
                seed = seed * 1103515245u + 12345u;
                uint32_t pick = seed >> 16;
                if (pick % 4 == 0) {
                    const vocab_token *t = &r.vocab.tokens[(pick >> 2) % (uint32_t)r.vocab.n_tokens];
                    memcpy(text + len, t->text, t->len);
                    len += t->len;
                } else if (pick % 4 == 1) {
                    text[len++] = ' ';
                } else {
                    text[len++] = (char)(pick >> 3);
                }
            }
            size_t n = 0;
            int32_t *ids = tokenize_as(tok, text, len, true, &n);
            for (size_t i = 0; i < n; i++)
                assert_true(ids[i] >= 0 && ids[i] < r.vocab.n_tokens);
            free(ids);
        }
        ts_tokenizer_free(tok);
    }
    vocab_clear(&r.vocab);
}

/* Writes a t5 vocabulary of the reference tokens with n_scores scores (none when 0) and
 * the given charsmap bytes (none when NULL), and tries to load it. */
static ts_status load_raw(const tokenizer_vocab *v, int n_scores, const void *map,
                          size_t map_len, ts_error *err)
{
    gguf_writer *g = NULL;
    const char *path = tu_tmp_path("ugm-raw.gguf");
    const char *texts[MAX_TOKENS];
    float scores[MAX_TOKENS] = {0};
    for (int i = 0; i < v->n_tokens; i++)
        texts[i] = v->tokens[i].text;
    assert_int_equal(gguf_writer_create(32, &g, err), TS_OK);
    gguf_writer_add_str(g, "tokenizer.ggml.model", "t5");
    gguf_writer_add_str_array(g, "tokenizer.ggml.tokens", texts, NULL, (uint64_t)v->n_tokens);
    if (n_scores)
        gguf_writer_add_array(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores,
                              (uint64_t)n_scores);
    if (map)
        gguf_writer_add_array(g, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8, map,
                              map_len);
    assert_int_equal(gguf_writer_write_file(g, path, err), TS_OK);
    gguf_writer_free(g);
    ts_tokenizer *tok = NULL;
    ts_status st = ts_tokenizer_load_gguf(path, &tok, err);
    ts_tokenizer_free(tok);
    remove(path);
    return st;
}

/* A t5 vocabulary without scores, with scores of the wrong length, without an unknown
 * token, or with a charsmap too short for its own header is refused, saying why; a
 * charsmap whose replacement lies outside it fails the text, not the process. */
static void test_malformed(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    tokenizer_vocab *v = &r.vocab;
    ts_error err = {0};
    int n = v->n_tokens;
    assert_int_equal(load_raw(v, n, NULL, 0, &err), TS_OK);
    assert_int_equal(load_raw(v, 0, NULL, 0, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.scores"));
    assert_int_equal(load_raw(v, n - 1, NULL, 0, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "entries"));
    static const uint8_t tiny[3] = {1, 2, 3}, overrun[8] = {200, 0, 0, 0, 1, 2, 3, 4};
    assert_int_equal(load_raw(v, n, tiny, sizeof tiny, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "precompiled_charsmap"));
    assert_int_equal(load_raw(v, n, overrun, sizeof overrun, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "precompiled_charsmap"));

    ts_tokenizer *tok = NULL;
    int32_t unk = v->unk_id;
    v->unk_id = -1;
    assert_int_equal(tokenizer_create(v, &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "unknown token"));
    v->unk_id = unk;

    /* "A" (0x41) maps to the replacement at offset 99 of a 2-byte string table: the walk
     * root (BASE 1) -> entry 1 ^ 0x41 = 64 (LCHECK 'A', a leaf, BASE 1) -> value entry 65 */
    uint32_t xcda[66] = {0};
    xcda[0] = 1u << 10;
    xcda[64] = (1u << 10) | (1u << 8) | 0x41;
    xcda[65] = (1u << 31) | 99;
    uint8_t map[4 + sizeof xcda + 2];
    uint32_t blob = sizeof xcda;
    memcpy(map, &blob, 4);
    memcpy(map + 4, xcda, sizeof xcda);
    memcpy(map + 4 + sizeof xcda, "a", 2);
    free(v->charsmap);
    v->charsmap = malloc(sizeof map);
    memcpy(v->charsmap, map, sizeof map);
    v->charsmap_len = sizeof map;
    assert_int_equal(tu_tokenizer_via_gguf(v, "ugm-badmap.gguf", &tok, &err), TS_OK);
    int32_t ids[8];
    size_t got = 0;
    assert_int_equal(ts_tokenize(tok, "bA", 2, false, ids, 8, &got), TS_ERR_FORMAT);
    assert_int_equal(ts_tokenize(tok, "b", 1, false, ids, 8, &got), TS_OK);
    ts_tokenizer_free(tok);
    /* the same map with offset 0 replaces "A" by "a" */
    xcda[65] = 1u << 31;
    memcpy(v->charsmap + 4, xcda, sizeof xcda);
    assert_int_equal(tu_tokenizer_via_gguf(v, "ugm-goodmap.gguf", &tok, &err), TS_OK);
    int32_t want[8];
    size_t n_want = 0;
    assert_int_equal(ts_tokenize(tok, "ab", 2, false, want, 8, &n_want), TS_OK);
    assert_int_equal(ts_tokenize(tok, "Ab", 2, false, ids, 8, &got), TS_OK);
    assert_int_equal(got, n_want);
    assert_memory_equal(ids, want, got * sizeof *ids);
    ts_tokenizer_free(tok);
    vocab_clear(v);
}

/* A rerank pair is the query and the document between BOS, EOS, the separator where the
 * file adds one (XLM-RoBERTa's <s> query </s></s> document </s>) and EOS. */
static void test_rerank_pair(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    tokenizer_vocab *v = &r.vocab;
    ts_error err = {0};
    ts_tokenizer *tok = NULL;
    assert_int_equal(tu_tokenizer_via_gguf(v, "ugm-pair0.gguf", &tok, &err), TS_OK);
    assert_int_equal(ts_tokenizer_sep(tok), -1);
    ts_tokenizer_free(tok);
    v->sep_id = 2;
    v->add_sep = true;
    assert_int_equal(tu_tokenizer_via_gguf(v, "ugm-pair.gguf", &tok, &err), TS_OK);
    assert_int_equal(ts_tokenizer_sep(tok), 2);
    const ref_case *q = find_case(&r, 0, "hello"), *d = find_case(&r, 0, "new york city");
    int32_t want[32];
    size_t n_want = 0;
    for (size_t i = 0; i + 1 < q->n_ids; i++) /* BOS and the query */
        want[n_want++] = q->ids[i];
    want[n_want++] = 2;
    want[n_want++] = 2;
    for (size_t i = 1; i < d->n_ids; i++) /* the document and EOS */
        want[n_want++] = d->ids[i];
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(rerank_pair_ids(tok, "hello", "new york city", &ids, &n), TS_OK);
    assert_int_equal(n, n_want);
    assert_memory_equal(ids, want, n * sizeof *ids);
    free(ids);
    ts_tokenizer_free(tok);
    v->sep_id = v->n_tokens;
    assert_int_equal(tu_tokenizer_via_gguf(v, "ugm-badsep.gguf", &tok, &err), TS_ERR_FORMAT);
    assert_null(tok);
    vocab_clear(v);
}

/* The ids as `tessera tokenize` prints them: "1 2 3\n" (into out, cap bytes). */
static void ids_line(char *out, size_t cap, const int32_t *ids, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%d", i ? " " : "", (int)ids[i]);
    snprintf(out + strlen(out), cap - strlen(out), "\n");
}

/* `tessera info` names the vocabulary's kind and `tessera tokenize` prints the peer's
 * ids, EOS included (none of BOS and EOS with --no-bos); a tiny bert model on the vocabulary embeds a text through `tessera embed` with
 * the peer's token count and a unit vector. */
static void test_cli_and_embed(void **state)
{
    (void)state;
    static ref_data r;
    ref_load(&r);
    char vocab[512], model[512], cmd[2048];
    snprintf(vocab, sizeof vocab, "%s", tu_tmp_path("ugm-cli.gguf"));
    snprintf(model, sizeof model, "%s", tu_tmp_path("ugm-bert.gguf"));
    tu_write_vocab_gguf(&r.vocab, vocab);
    int status = -1;
    snprintf(cmd, sizeof cmd, "%s/tessera info -m %s 2>/dev/null", TS_BUILD_DIR, vocab);
    char *out = tu_run(cmd, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "t5 (Unigram)"));
    free(out);

    const ref_case *c = find_case(&r, 0, "new york city");
    snprintf(cmd, sizeof cmd, "%s/tessera tokenize -m %s -p 'new york city' 2>/dev/null",
             TS_BUILD_DIR, vocab);
    out = tu_run(cmd, &status);
    assert_int_equal(status, 0);
    char want[256];
    ids_line(want, sizeof want, c->ids, c->n_ids);
    assert_int_equal(c->ids[c->n_ids - 1], 2); /* </s> */
    assert_string_equal(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/tessera tokenize --no-bos -m %s -p 'new york city' "
             "2>/dev/null", TS_BUILD_DIR, vocab);
    out = tu_run(cmd, &status);
    assert_int_equal(status, 0);
    ids_line(want, sizeof want, c->plain, c->n_plain);
    assert_string_equal(out, want);
    free(out);

    snprintf(cmd, sizeof cmd, "%s/tessera synth --tiny --shape bge-small --pooling cls "
             "--vocab %s -o %s >/dev/null 2>&1 && echo 'new york city' | %s/tessera embed -m %s "
             "--threads 1 2>/dev/null", TS_BUILD_DIR, vocab, model, TS_BUILD_DIR, model);
    out = tu_run(cmd, &status);
    assert_int_equal(status, 0);
    char tokens[32];
    snprintf(tokens, sizeof tokens, "\"tokens\":%zu", c->n_ids);
    if (!strstr(out, tokens))
        fail_msg("%s: %s", cmd, out);
    const char *v = strstr(out, "\"embedding\":[");
    assert_non_null(v);
    v += strlen("\"embedding\":[");
    double sq = 0;
    int dims = 0;
    for (char *end; *v && *v != ']'; v = end + (*end == ',')) {
        double x = strtod(v, &end);
        assert_true(end > v);
        sq += x * x;
        dims++;
    }
    assert_true(dims >= 16);
    assert_true(sq > 0.99 && sq < 1.01);
    free(out);
    remove(vocab);
    remove(model);
    vocab_clear(&r.vocab);
}

/* /tokenize on a model with the vocabulary answers the peer's ids for every text of the
 * first configuration: llama.cpp's body ("content") with add_special (BOS, EOS) and
 * without, its default being without; the OpenAI-style "prompt" with them by default.
 * Texts with a NUL byte are left out: a JSON string here is a C string. */
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
        if (c->config != 0 || memchr(c->text, '\0', c->len))
            continue;
        sv_expect_tokenize_forms(s.url, c->text, c->len, c->ids, c->n_ids, c->plain,
                                 c->n_plain);
        checked++;
    }
    assert_true(checked >= 100);
    /* with_pieces: the same ids, BOS and EOS spelled out ("<s>", "</s>"), as the peer's */
    const ref_case *c = find_case(&r, 0, "new york city");
    sv_answer a;
    sv_post(s.url, "/tokenize",
            "{\"content\":\"new york city\",\"add_special\":true,\"with_pieces\":true}", &a);
    assert_int_equal(a.status, 200);
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(a.json, "tokens");
    assert_int_equal(cJSON_GetArraySize(tokens), c->n_ids);
    for (size_t i = 0; i < c->n_ids; i++) {
        const cJSON *t = cJSON_GetArrayItem(tokens, (int)i);
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(t, "id")->valueint, c->ids[i]);
    }
    const cJSON *first = cJSON_GetArrayItem(tokens, 0);
    const cJSON *last = cJSON_GetArrayItem(tokens, (int)c->n_ids - 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(first, "piece")->valuestring, "<s>");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(last, "piece")->valuestring, "</s>");
    sv_answer_free(&a);
    /* the unused, user-defined, unknown and pad tokens as llama-server 3f545be shows them
     * (not U+2585 for <unk>, which is what <unk> decodes to) */
    sv_post(s.url, "/tokenize", "{\"content\":[5,4,3,1],\"with_pieces\":true}", &a);
    assert_int_equal(a.status, 200);
    static const char *const pieces[] = {"", "[USR]", "<unk>", "<pad>"};
    tokens = cJSON_GetObjectItemCaseSensitive(a.json, "tokens");
    assert_int_equal(cJSON_GetArraySize(tokens), 4);
    for (int i = 0; i < 4; i++) {
        const cJSON *t = cJSON_GetArrayItem(tokens, i);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "piece")->valuestring, pieces[i]);
    }
    sv_answer_free(&a);
    sv_stop(&s);
    ts_model_free(model);
    vocab_clear(&r.vocab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_ids),
        cmocka_unit_test(test_plain_and_detokenize),
        cmocka_unit_test(test_random_texts),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_rerank_pair),
        cmocka_unit_test(test_cli_and_embed),
        cmocka_unit_test(test_server_tokenize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
