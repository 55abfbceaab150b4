/* token_trie.h: a vocabulary's token texts (as bytes: SentencePiece's '▁' a space, <0xNN>
 * its byte) in a prefix trie, so the tokens a byte automaton allows from a state are found
 * by one walk that abandons a prefix as soon as the automaton rejects it, instead of
 * testing every token's string. Built once per tokenizer; read-only after. */
#ifndef TESSERA_GRAMMAR_TOKEN_TRIE_H
#define TESSERA_GRAMMAR_TOKEN_TRIE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"
#include "tessera/tokenizer.h"

enum {
    TOKEN_TRIE_MAX_BYTES = 256, /* longer tokens are left out (never allowed) */
    TOKEN_TRIE_MAX_STATE = 128, /* the largest automaton state a walk copies */
};

typedef struct token_trie {
    int n_nodes;           /* node 0 is the root (the empty prefix) */
    int32_t *first_child;  /* (n_nodes) a node's first child, -1 for none */
    int32_t *next_sibling; /* (n_nodes) the next child of the same parent, -1 for none */
    uint8_t *byte;         /* (n_nodes) the byte on the edge into the node */
    int32_t *first_token;  /* (n_nodes) a token whose text ends here, -1 for none */
    int32_t *next_token;   /* (vocab_size) the next token with the same text, -1 */
    int vocab_size;
    int n_tokens;          /* tokens in the trie */
    int max_len;           /* bytes of the longest token in the trie (its depth) */
} token_trie;

/* Whether a token may ever be produced under a constraint: it has text, is not longer
 * than TOKEN_TRIE_MAX_BYTES, does not end generation, and is ordinary text or one byte
 * (a byte-fallback token). Control and special tokens are never allowed. */
bool token_trie_usable(const ts_tokenizer *tok, int32_t id);

/* Builds the trie of tok's usable tokens (tok borrowed, only during the call). On
 * failure t is left freeable. */
ts_status token_trie_build(token_trie *t, const ts_tokenizer *tok, ts_error *err);
void token_trie_free(token_trie *t);

/* A byte automaton: step advances *state (state_size bytes) by byte and says whether it
 * was allowed (a refused byte may leave *state changed: the walk discards it). */
typedef bool (*token_trie_step_fn)(void *state, uint8_t byte);

/* allowed (vocab_size bytes) gets 1 for every token whose whole text the automaton
 * accepts from *start, 0 for the others. start is borrowed and not changed;
 * state_size <= TOKEN_TRIE_MAX_STATE. Returns the number of allowed tokens. */
int token_trie_allowed(const token_trie *t, token_trie_step_fn step, const void *start,
                       size_t state_size, uint8_t *allowed);

/* A byte automaton with a context (ctx, borrowed: the compiled automaton) whose states are
 * at most state_size bytes but may use fewer: next writes into *to (never overlapping
 * *from) the state *from advanced by byte, touching only the bytes that state uses, and
 * says whether the byte was allowed. */
typedef bool (*token_trie_next_fn)(const void *ctx, const void *from, uint8_t byte, void *to);

/* As token_trie_allowed, for an automaton of any state size: one state per trie depth is
 * kept in a buffer allocated for the walk. Returns the number of allowed tokens, or -1
 * when that buffer cannot be allocated (allowed is then all 0). */
int token_trie_walk(const token_trie *t, token_trie_next_fn next, const void *ctx,
                    const void *start, size_t state_size, uint8_t *allowed);

/* A cost of an automaton state (what completing the text from it takes, in bytes). */
typedef uint32_t (*token_trie_cost_fn)(const void *ctx, const void *state);

/* As token_trie_walk, but a token is allowed only if cost(ctx, the state after its whole
 * text) <= limit; *max_cost gets the largest such cost among the allowed tokens (0 when
 * none). */
int token_trie_walk_within(const token_trie *t, token_trie_next_fn next,
                           token_trie_cost_fn cost, const void *ctx, const void *start,
                           size_t state_size, uint32_t limit, uint8_t *allowed,
                           uint32_t *max_cost);

#endif /* TESSERA_GRAMMAR_TOKEN_TRIE_H */
