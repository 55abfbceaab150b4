/* spm.c: SentencePiece-BPE encoding as llama.cpp's llm_tokenizer_spm does it: escape
 * spaces as U+2581, split into characters, merge the best-scoring adjacent pair until
 * none is in the vocabulary, then fall back to byte tokens for what is left. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* A run of the escaped text, linked to its neighbours; n == 0 once merged away. */
typedef struct spm_symbol {
    int prev, next;
    size_t off, n;
} spm_symbol;

typedef struct spm_ctx {
    const ts_tokenizer *tok;
    const char *s; /* the escaped text */
    spm_symbol *sym;
    tokenizer_heap heap;
} spm_ctx;

static int try_add_bigram(spm_ctx *c, int left, int right)
{
    if (left < 0 || right < 0)
        return 0;
    const spm_symbol *l = &c->sym[left], *r = &c->sym[right];
    size_t size = l->n + r->n;
    int32_t id = tokenizer_map_get(&c->tok->text_to_id, c->s + l->off, size);
    if (id < 0)
        return 0;
    tokenizer_bigram b = {left, right, c->tok->vocab.tokens[id].score, size};
    return tokenizer_heap_push(&c->heap, b);
}

/* Escapes text into a fresh buffer: U+2581 for every space, one in front when the
 * vocabulary adds a space prefix. */
static char *escape(const tokenizer_vocab *v, const char *text, size_t len, size_t *out_len)
{
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t n = len + 2 * spaces + (v->add_space_prefix ? 3 : 0);
    char *s = malloc(n ? n : 1);
    if (!s)
        return NULL;
    size_t k = 0;
    if (v->add_space_prefix) {
        memcpy(s, SPM_SPACE, 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s + k, SPM_SPACE, 3);
            k += 3;
        } else {
            s[k++] = text[i];
        }
    }
    *out_len = k;
    return s;
}

ts_status tokenizer_spm_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out)
{
    if (len == 0)
        return TS_OK;
    if (len > TOKENIZER_MAX_TEXT)
        return TS_ERR_TOO_LONG;
    ts_status st = TS_ERR_NOMEM;
    spm_ctx c = {.tok = tok};
    size_t n = 0;
    char *s = escape(&tok->vocab, text, len, &n);
    c.s = s;
    c.sym = malloc(n * sizeof *c.sym);
    if (!s || !c.sym)
        goto done;

    int n_sym = 0;
    for (size_t off = 0; off < n;) {
        uint32_t cp;
        size_t k = tokenizer_utf8_next(s + off, n - off, &cp);
        c.sym[n_sym] = (spm_symbol){n_sym - 1, n_sym + 1, off, k};
        n_sym++;
        off += k;
    }
    c.sym[n_sym - 1].next = -1;
    for (int i = 1; i < n_sym; i++)
        if (try_add_bigram(&c, i - 1, i) != 0)
            goto done;

    while (c.heap.n > 0) {
        tokenizer_bigram b = tokenizer_heap_pop(&c.heap);
        spm_symbol *l = &c.sym[b.left], *r = &c.sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* outdated: one side has merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            c.sym[r->next].prev = b.left;
        if (try_add_bigram(&c, l->prev, b.left) != 0 || try_add_bigram(&c, b.left, l->next) != 0)
            goto done;
    }

    for (int i = 0; i != -1; i = c.sym[i].next) {
        const spm_symbol *sy = &c.sym[i];
        int32_t id = tokenizer_map_get(&tok->text_to_id, s + sy->off, sy->n);
        if (id >= 0) {
            tokenizer_emit(out, id);
            continue;
        }
        for (size_t k = 0; k < sy->n; k++) {
            int32_t b = tok->byte_token[(unsigned char)s[sy->off + k]];
            if (b >= 0)
                tokenizer_emit(out, b);
        }
    }
    st = TS_OK;
done:
    tokenizer_heap_free(&c.heap);
    free(c.sym);
    free(s);
    return st;
}
