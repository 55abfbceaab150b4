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

/* A candidate merge of symbols left and right, valid while their sizes still add up. */
typedef struct spm_bigram {
    int left, right;
    float score;
    size_t size;
} spm_bigram;

typedef struct spm_heap {
    spm_bigram *v;
    size_t n, cap;
} spm_heap;

/* Heap order: the higher score first, then the leftmost pair. */
static int bigram_before(const spm_bigram *a, const spm_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(spm_heap *h, spm_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        spm_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return 0;
}

static spm_bigram heap_pop(spm_heap *h)
{
    spm_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!bigram_before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

typedef struct spm_ctx {
    const ts_tokenizer *tok;
    const char *s; /* the escaped text */
    spm_symbol *sym;
    spm_heap heap;
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
    spm_bigram b = {left, right, c->tok->vocab.tokens[id].score, size};
    return heap_push(&c->heap, b);
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
    if (len > INT32_MAX / 4)
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
        spm_bigram b = heap_pop(&c.heap);
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
    free(c.heap.v);
    free(c.sym);
    free(s);
    return st;
}
