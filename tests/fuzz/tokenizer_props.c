/* tokenizer_props.c: round-trip properties of the tokenizers (see tokenizer_props.h). */
#include "tokenizer_props.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tokenizer/vocab.h"

#define SPM_SPACE "\xe2\x96\x81"

static bool reads_u2581_as_space(const ts_tokenizer *tok)
{
    return tokenizer_get_vocab(tok)->kind == VOCAB_KIND_SPM;
}

/* text with every U+2581 read as ' ' when spm; dst holds len bytes. */
static size_t expected_text(char *dst, const char *text, size_t len, bool spm)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (spm && i + 2 < len && memcmp(text + i, SPM_SPACE, 3) == 0) {
            dst[n++] = ' ';
            i += 2;
        } else {
            dst[n++] = text[i];
        }
    }
    return n;
}

/* All ids of text read with o, checking the two-call protocol and the id range. Caller
 * frees. */
static int32_t *tokenize_opts(const ts_tokenizer *tok, const char *text, size_t len,
                              const ts_tokenize_opts *o, size_t *n_ids)
{
    size_t n = 0;
    ts_status st = ts_tokenize_ex(tok, text, len, o, NULL, 0, &n);
    FUZZ_CHECK(st == TS_OK, "ts_tokenize(%zu bytes) failed: %s", len, ts_status_str(st));
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    FUZZ_CHECK(ids != NULL, "out of memory");
    size_t n2 = 0;
    st = ts_tokenize_ex(tok, text, len, o, ids, n, &n2);
    FUZZ_CHECK(st == TS_OK && n2 == n, "ts_tokenize: %zu ids counted, %zu written", n, n2);
    int vocab = ts_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d at %zu outside the vocabulary",
                   (int)ids[i], i);
    if (o->add_special && ts_tokenizer_add_bos(tok))
        FUZZ_CHECK(n > 0 && ids[0] == ts_tokenizer_bos(tok), "BOS is not the first id");
    if (n > 1) { /* a short buffer gets the first ids and the full count */
        size_t half = n / 2, n3 = 0;
        int32_t *part = malloc(half * sizeof *part);
        FUZZ_CHECK(part != NULL, "out of memory");
        st = ts_tokenize_ex(tok, text, len, o, part, half, &n3);
        FUZZ_CHECK(st == TS_OK && n3 == n && memcmp(part, ids, half * sizeof *ids) == 0,
                   "ts_tokenize with cap %zu disagrees with the full answer", half);
        free(part);
    }
    *n_ids = n;
    return ids;
}

/* tokenize_opts as ts_tokenize reads text. */
static int32_t *tokenize_all(const ts_tokenizer *tok, const char *text, size_t len,
                             bool add_special, size_t *n_ids)
{
    ts_tokenize_opts o = {.add_special = add_special};
    return tokenize_opts(tok, text, len, &o, n_ids);
}

/* The whole decoded text of ids, checking that the count does not depend on cap. */
static char *detokenize_all(const ts_tokenizer *tok, const int32_t *ids, size_t n_ids,
                            size_t *len)
{
    size_t n = ts_detokenize(tok, ids, n_ids, NULL, 0);
    char *s = malloc(n ? n : 1);
    FUZZ_CHECK(s != NULL, "out of memory");
    size_t n2 = ts_detokenize(tok, ids, n_ids, s, n);
    FUZZ_CHECK(n2 == n, "ts_detokenize counted %zu bytes, then %zu", n, n2);
    *len = n;
    return s;
}

/* Aborts unless got (n_got bytes) is text as tok's decoder gives it back (expected_text);
 * returns whether that is text itself, i.e. text holds no U+2581 a SentencePiece decoder
 * turns into a space. */
static bool check_decoded(const ts_tokenizer *tok, const char *what, const char *got,
                          size_t n_got, const char *text, size_t len)
{
    char *want = malloc(len ? len : 1);
    FUZZ_CHECK(want != NULL, "out of memory");
    size_t n_want = expected_text(want, text, len, reads_u2581_as_space(tok));
    if (n_got != n_want || memcmp(got, want, n_got) != 0) {
        size_t i = 0;
        while (i < n_got && i < n_want && got[i] == want[i])
            i++;
        fuzz_fail("%s: %zu bytes decoded, %zu expected; first difference at byte %zu", what,
                  n_got, n_want, i);
    }
    free(want);
    return n_want == len;
}

void fuzz_tokenizer_require_bytes(const ts_tokenizer *tok)
{
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        size_t n = 0, len = 0;
        int32_t *ids = tokenize_all(tok, &c, 1, false, &n);
        char *s = detokenize_all(tok, ids, n, &len);
        FUZZ_CHECK(len == 1 && s[0] == c, "the vocabulary cannot spell byte 0x%02X alone", b);
        free(s);
        free(ids);
    }
}

static void check_text(const ts_tokenizer *tok, const char *text, size_t len,
                       bool add_special)
{
    size_t n_ids = 0, n_out = 0;
    int32_t *ids = tokenize_all(tok, text, len, add_special, &n_ids);
    char *out = detokenize_all(tok, ids, n_ids, &n_out);
    check_decoded(tok, "detokenize(tokenize(text))", out, n_out, text, len);
    free(out);
    free(ids);
}

static void check_ids(const ts_tokenizer *tok, const uint8_t *p, size_t size,
                      bool add_special)
{
    size_t n = size / 2;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    FUZZ_CHECK(ids != NULL, "out of memory");
    int vocab = ts_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)((p[2 * i] | p[2 * i + 1] << 8) % vocab);
    size_t n_s = 0, n_c = 0, n_s2 = 0;
    char *s = detokenize_all(tok, ids, n, &n_s);
    int32_t *c = tokenize_all(tok, s, n_s, add_special, &n_c);
    char *s2 = detokenize_all(tok, c, n_c, &n_s2);
    if (check_decoded(tok, "detokenize(tokenize(detokenize(ids)))", s2, n_s2, s, n_s)) {
        /* no U+2581 in s: its canonical ids are a fixed point */
        size_t n_c2 = 0;
        int32_t *c2 = tokenize_all(tok, s2, n_s2, add_special, &n_c2);
        FUZZ_CHECK(n_c2 == n_c && memcmp(c2, c, n_c * sizeof *c) == 0,
                   "tokenize(detokenize(c)) != c for c = tokenize(text): %zu ids, then %zu",
                   n_c, n_c2);
        free(c2);
    }
    free(s2);
    free(c);
    free(s);
    free(ids);
}

/* Special tokens read from text, with a plain span from each byte 0x02 up to the next
 * (or the end): tokenize_opts' checks, ts_tokenize_alloc gives the same ids, and one span
 * over the whole text gives exactly ts_tokenize's answer. */
static void check_special(const ts_tokenizer *tok, const char *text, size_t len,
                          bool add_special)
{
    ts_text_span spans[64];
    size_t n_spans = 0;
    for (size_t i = 0; i < len && n_spans < 64; i++) {
        if (text[i] != 2)
            continue;
        size_t j = i + 1;
        while (j < len && text[j] != 2)
            j++;
        spans[n_spans++] = (ts_text_span){i, j - i};
        i = j; /* past the closing 0x02 */
    }
    ts_tokenize_opts o = {.add_special = add_special, .parse_special = true, .plain = spans,
                          .n_plain = n_spans};
    size_t n = 0, n_alloc = 0;
    int32_t *ids = tokenize_opts(tok, text, len, &o, &n), *alloc = NULL;
    ts_status st = ts_tokenize_alloc(tok, text, len, &o, &alloc, &n_alloc);
    FUZZ_CHECK(st == TS_OK && n_alloc == n && (n == 0 || memcmp(alloc, ids, n * sizeof *ids) == 0),
               "ts_tokenize_alloc disagrees with the two-call protocol (%s)", ts_status_str(st));
    free(alloc);
    free(ids);

    ts_text_span all = {0, len};
    o.plain = &all;
    o.n_plain = 1;
    size_t n_ref = 0;
    ids = tokenize_opts(tok, text, len, &o, &n);
    int32_t *ref = tokenize_all(tok, text, len, add_special, &n_ref);
    FUZZ_CHECK(n == n_ref && (n == 0 || memcmp(ids, ref, n * sizeof *ref) == 0),
               "a plain span over the whole text differs from ts_tokenize");
    free(ref);
    free(ids);
}

void fuzz_tokenizer_check(const ts_tokenizer *tok, const uint8_t *data, size_t size)
{
    if (size == 0)
        return;
    uint8_t mode = data[0];
    bool add_special = mode & 2;
    if (mode & 1)
        check_ids(tok, data + 1, size - 1, add_special);
    else if (mode & 4)
        check_special(tok, (const char *)data + 1, size - 1, add_special);
    else
        check_text(tok, (const char *)data + 1, size - 1, add_special);
}

void fuzz_tokenizer_use(const ts_tokenizer *tok, const char *text, size_t len)
{
    int vocab = ts_tokenizer_vocab_size(tok);
    for (int special = 0; special < 2; special++) {
        ts_tokenize_opts o = {.add_special = true, .parse_special = special};
        int32_t ids[512];
        size_t n = 0;
        FUZZ_CHECK(ts_tokenize_ex(tok, text, len, &o, ids, 512, &n) == TS_OK,
                   "tokenizing with a loaded vocabulary failed");
        size_t kept = n < 512 ? n : 512;
        for (size_t i = 0; i < kept; i++)
            FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d outside the vocabulary",
                       (int)ids[i]);
        char out[8192];
        ts_detokenize(tok, ids, kept, out, sizeof out);
    }
}
