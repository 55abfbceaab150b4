/* tokenizer_util.c: the string -> id hash map, the merge heap, UTF-8 decoding and
 * Unicode flag look-up the encoders share. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

ts_status tokenizer_map_init(tokenizer_map *m, size_t n_keys)
{
    size_t cap = 16;
    while (cap < 2 * n_keys)
        cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    return m->slots ? TS_OK : TS_ERR_NOMEM;
}

void tokenizer_map_free(tokenizer_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
}

void tokenizer_map_put(tokenizer_map *m, const char *key, uint32_t len, int32_t val)
{
    size_t i = hash_bytes(key, len) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        tokenizer_map_entry *e = &m->slots[i];
        if (!e->key || (e->len == len && memcmp(e->key, key, len) == 0)) {
            e->key = key;
            e->len = len;
            e->val = val;
            return;
        }
    }
}

int32_t tokenizer_map_get(const tokenizer_map *m, const char *key, size_t len)
{
    if (!m->slots)
        return -1;
    size_t i = hash_bytes(key, len) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        const tokenizer_map_entry *e = &m->slots[i];
        if (!e->key)
            return -1;
        if (e->len == len && memcmp(e->key, key, len) == 0)
            return e->val;
    }
}

/* Heap order: the higher score first, then the leftmost pair. */
static int bigram_before(const tokenizer_bigram *a, const tokenizer_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

int tokenizer_heap_push(tokenizer_heap *h, tokenizer_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        tokenizer_bigram *v = realloc(h->v, cap * sizeof *v);
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

tokenizer_bigram tokenizer_heap_pop(tokenizer_heap *h)
{
    tokenizer_bigram top = h->v[0], last = h->v[--h->n];
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

void tokenizer_heap_free(tokenizer_heap *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

size_t tokenizer_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        goto bad;
    }
    if (len > n)
        goto bad;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80)
            goto bad;
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xFFFD;
    return 1;
}

uint32_t tokenizer_cpt_flags(uint32_t cp)
{
    if (cp < 0x80) { /* ASCII by hand: the common case needs no search */
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
            return TOKENIZER_CPT_WHITESPACE | (cp == ' ' ? TOKENIZER_CPT_SEPARATOR : TOKENIZER_CPT_CONTROL);
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return TOKENIZER_CPT_LETTER | (cp >= 'a' ? TOKENIZER_CPT_LOWER : TOKENIZER_CPT_UPPER);
        if (cp >= '0' && cp <= '9')
            return TOKENIZER_CPT_NUMBER;
    }
    size_t lo = 0, hi = tokenizer_cpt_n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < tokenizer_cpt_ranges[mid].first)
            hi = mid;
        else if (cp > tokenizer_cpt_ranges[mid].last)
            lo = mid + 1;
        else
            return tokenizer_cpt_ranges[mid].flags;
    }
    return 0;
}

int32_t tokenizer_trie_child(const special_node *t, int32_t node, uint8_t b)
{
    for (int32_t c = t[node].first_child; c >= 0; c = t[c].next)
        if (t[c].byte == b)
            return c;
    return -1;
}

ts_status tokenizer_trie_build(special_node **out, const tokenizer_vocab *v,
                               bool (*keep)(const vocab_token *t), trie_duplicates dup,
                               const char *what, ts_error *err)
{
    size_t nodes = 1;
    for (int i = 0; i < v->n_tokens; i++)
        if (!keep || keep(&v->tokens[i]))
            nodes += v->tokens[i].len;
    if (nodes > INT32_MAX)
        return ts_error_set(err, TS_ERR_FORMAT, "%s spell %zu bytes, over %d", what, nodes - 1,
                            INT32_MAX - 1);
    special_node *t = *out = malloc(nodes * sizeof *t);
    if (!t)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot index %zu bytes of %s", nodes - 1, what);
    t[0] = (special_node){.first_child = -1, .next = -1, .token = -1};
    int32_t used = 1;
    for (int i = 0; i < v->n_tokens; i++) {
        const vocab_token *tk = &v->tokens[i];
        if ((keep && !keep(tk)) || tk->len == 0)
            continue;
        int32_t node = 0;
        for (uint32_t k = 0; k < tk->len; k++) {
            uint8_t b = (uint8_t)tk->text[k];
            int32_t c = tokenizer_trie_child(t, node, b);
            if (c < 0) {
                c = used++;
                t[c] = (special_node){.first_child = -1, .next = t[node].first_child,
                                      .token = -1, .byte = b};
                t[node].first_child = c;
            }
            node = c;
        }
        if (dup == TRIE_LAST_ID || t[node].token < 0)
            t[node].token = i;
    }
    return TS_OK;
}
