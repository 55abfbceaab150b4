/* token_trie.c: building the vocabulary's prefix trie and walking it with an automaton. */
#include "grammar/token_trie.h"

#include <stdlib.h>
#include <string.h>

bool token_trie_usable(const ts_tokenizer *tok, int32_t id)
{
    size_t len = 0;
    const char *b = ts_token_bytes(tok, id, &len);
    return b && len > 0 && len <= TOKEN_TRIE_MAX_BYTES && !ts_token_is_eog(tok, id) &&
           (ts_token_is_plain(tok, id) || len == 1);
}

void token_trie_free(token_trie *t)
{
    if (!t)
        return;
    free(t->first_child);
    free(t->next_sibling);
    free(t->byte);
    free(t->first_token);
    free(t->next_token);
    memset(t, 0, sizeof *t);
}

/* The child of node under byte c, created when absent; -1 when out of memory. */
static int32_t child(token_trie *t, int32_t node, uint8_t c, int cap)
{
    for (int32_t k = t->first_child[node]; k >= 0; k = t->next_sibling[k])
        if (t->byte[k] == c)
            return k;
    if (t->n_nodes == cap)
        return -1;
    int32_t k = t->n_nodes++;
    t->byte[k] = c;
    t->first_child[k] = -1;
    t->first_token[k] = -1;
    t->next_sibling[k] = t->first_child[node];
    t->first_child[node] = k;
    return k;
}

ts_status token_trie_build(token_trie *t, const ts_tokenizer *tok, ts_error *err)
{
    memset(t, 0, sizeof *t);
    int V = ts_tokenizer_vocab_size(tok);
    size_t cap = 1;
    for (int32_t id = 0; id < V; id++) {
        size_t len = 0;
        ts_token_bytes(tok, id, &len);
        if (token_trie_usable(tok, id))
            cap += len;
    }
    if (cap > INT32_MAX)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "token trie: vocabulary too large");
    t->vocab_size = V;
    t->first_child = malloc(cap * sizeof(int32_t));
    t->next_sibling = malloc(cap * sizeof(int32_t));
    t->byte = malloc(cap);
    t->first_token = malloc(cap * sizeof(int32_t));
    t->next_token = malloc((size_t)(V > 0 ? V : 1) * sizeof(int32_t));
    if (!t->first_child || !t->next_sibling || !t->byte || !t->first_token || !t->next_token) {
        token_trie_free(t);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for the token trie");
    }
    t->n_nodes = 1;
    t->first_child[0] = t->next_sibling[0] = t->first_token[0] = -1;
    t->byte[0] = 0;
    for (int32_t id = V - 1; id >= 0; id--) { /* backwards: each node lists ids ascending */
        t->next_token[id] = -1;
        if (!token_trie_usable(tok, id))
            continue;
        size_t len = 0;
        const uint8_t *b = (const uint8_t *)ts_token_bytes(tok, id, &len);
        int32_t node = 0;
        for (size_t i = 0; i < len; i++)
            node = child(t, node, b[i], (int)cap); /* cap counts every byte: never full */
        if ((int)len > t->max_len)
            t->max_len = (int)len;
        t->next_token[id] = t->first_token[node];
        t->first_token[node] = id;
        t->n_tokens++;
    }
    return TS_OK;
}

typedef struct walk {
    const token_trie *t;
    token_trie_step_fn step;
    size_t state_size;
    uint8_t *allowed;
    int n_allowed;
} walk;

/* Visits the children of node from state (the automaton after node's prefix). */
static void visit(walk *w, int32_t node, const void *state)
{
    unsigned char next[TOKEN_TRIE_MAX_STATE];
    for (int32_t k = w->t->first_child[node]; k >= 0; k = w->t->next_sibling[k]) {
        memcpy(next, state, w->state_size);
        if (!w->step(next, w->t->byte[k]))
            continue;
        for (int32_t id = w->t->first_token[k]; id >= 0; id = w->t->next_token[id]) {
            w->allowed[id] = 1;
            w->n_allowed++;
        }
        if (w->t->first_child[k] >= 0)
            visit(w, k, next);
    }
}

int token_trie_allowed(const token_trie *t, token_trie_step_fn step, const void *start,
                       size_t state_size, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)t->vocab_size);
    if (state_size > TOKEN_TRIE_MAX_STATE)
        return 0;
    walk w = {t, step, state_size, allowed, 0};
    visit(&w, 0, start);
    return w.n_allowed;
}

typedef struct walk_ctx {
    const token_trie *t;
    token_trie_next_fn next;
    token_trie_cost_fn cost; /* NULL: every token the automaton takes */
    uint32_t limit, max_cost;
    const void *ctx;
    size_t state_size;
    unsigned char *states; /* (max_len + 1) * state_size: the state after each depth */
    uint8_t *allowed;
    int n_allowed;
} walk_ctx;

/* Visits the children of node, whose prefix (depth bytes) led to the state at depth. */
static void visit_ctx(walk_ctx *w, int32_t node, int depth)
{
    const unsigned char *state = w->states + (size_t)depth * w->state_size;
    unsigned char *next = w->states + (size_t)(depth + 1) * w->state_size;
    for (int32_t k = w->t->first_child[node]; k >= 0; k = w->t->next_sibling[k]) {
        if (!w->next(w->ctx, state, w->t->byte[k], next))
            continue;
        uint32_t c = w->cost && w->t->first_token[k] >= 0 ? w->cost(w->ctx, next) : 0;
        if (c <= w->limit) {
            for (int32_t id = w->t->first_token[k]; id >= 0; id = w->t->next_token[id]) {
                w->allowed[id] = 1;
                w->n_allowed++;
            }
            if (w->t->first_token[k] >= 0 && c > w->max_cost)
                w->max_cost = c;
        }
        if (w->t->first_child[k] >= 0) /* a longer token may still fit */
            visit_ctx(w, k, depth + 1);
    }
}

int token_trie_walk(const token_trie *t, token_trie_next_fn next, const void *ctx,
                    const void *start, size_t state_size, uint8_t *allowed)
{
    uint32_t max_cost;
    return token_trie_walk_within(t, next, NULL, ctx, start, state_size, UINT32_MAX, allowed,
                                  &max_cost);
}

int token_trie_walk_within(const token_trie *t, token_trie_next_fn next,
                           token_trie_cost_fn cost, const void *ctx, const void *start,
                           size_t state_size, uint32_t limit, uint8_t *allowed,
                           uint32_t *max_cost)
{
    memset(allowed, 0, (size_t)t->vocab_size);
    *max_cost = 0;
    walk_ctx w = {t, next, cost, limit, 0, ctx, state_size,
                  malloc(((size_t)t->max_len + 1) * state_size), allowed, 0};
    if (!w.states)
        return -1;
    memcpy(w.states, start, state_size);
    visit_ctx(&w, 0, 0);
    free(w.states);
    *max_cost = w.max_cost;
    return w.n_allowed;
}
