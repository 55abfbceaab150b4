/* constraint.h: one sequence's output constraint (a byte automaton and its state): which
 * tokens may come next (through the vocabulary's token trie), advancing by a token, and
 * whether the text is complete. Knows nothing of requests or HTTP. */
#ifndef TESSERA_GRAMMAR_CONSTRAINT_H
#define TESSERA_GRAMMAR_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "grammar/json_pda.h"
#include "grammar/schema.h"
#include "grammar/token_trie.h"
#include "tessera/engine.h"

/* A plain value: copy it to fork a sequence's state. */
typedef struct constraint {
    ts_constraint_kind kind;  /* TS_CONSTRAINT_NONE: every token allowed */
    const ts_schema *schema;  /* TS_CONSTRAINT_JSON_SCHEMA: borrowed; must outlive c and
                               * every copy of it */
    const ts_grammar *grammar; /* TS_CONSTRAINT_GRAMMAR: borrowed, as schema */
    union {
        json_pda json;        /* TS_CONSTRAINT_JSON_OBJECT */
        sch_state sch;        /* TS_CONSTRAINT_JSON_SCHEMA */
        gr_state gr;          /* TS_CONSTRAINT_GRAMMAR */
    };
} constraint;

/* The state before any text; schema is used (borrowed) with TS_CONSTRAINT_JSON_SCHEMA,
 * grammar (borrowed) with TS_CONSTRAINT_GRAMMAR. */
void constraint_init(constraint *c, ts_constraint_kind kind, const ts_schema *schema,
                     const ts_grammar *grammar);

enum {
    CONSTRAINT_NOMEM = -1,      /* constraint_allowed*: out of memory */
    CONSTRAINT_TOO_COSTLY = -2, /* ... a grammar's mask needed more than GR_MAX_MASK_WORK */
};

/* allowed (t->vocab_size bytes) gets 1 for each token that may come next, 0 otherwise;
 * returns their count (0: nothing may follow), or CONSTRAINT_NOMEM or
 * CONSTRAINT_TOO_COSTLY (allowed all 0). c is not changed. */
int constraint_allowed(const constraint *c, const token_trie *t, uint8_t *allowed);

/* Advances c by a token's bytes (borrowed, len); false (c unchanged) when they cannot
 * come next. */
bool constraint_advance(constraint *c, const char *bytes, size_t len);

/* True when a and b allow exactly the same continuations (same kind, equivalent state). */
bool constraint_same(const constraint *a, const constraint *b);

/* True when the text is complete and nothing more may follow. */
bool constraint_done(const constraint *c);

/* True when the text is complete as it is, though more may follow (a JSON-schema value
 * that is a number): the end-of-generation token may end it. */
bool constraint_can_end(const constraint *c);

/* ---- closing within a token budget */

/* True when c's automaton knows its closing cost (TS_CONSTRAINT_GRAMMAR, _JSON_OBJECT,
 * _JSON_SCHEMA). */
bool constraint_closes(const constraint *c);

/* Bytes of the shortest text that completes c from its state (0: complete; 0 as well
 * when c does not close). */
uint32_t constraint_close_cost(const constraint *c);

/* As constraint_allowed, keeping only the tokens after which the text can still be
 * completed in at most limit bytes (constraint_close_cost); *max_cost gets the largest
 * such cost among the allowed tokens. Where c does not close, limit is ignored and
 * *max_cost is 0. The engine passes the tokens left after this one as limit: one token per
 * byte of the shortest completion (every byte is a token in a byte-level BPE or a
 * SentencePiece vocabulary with byte fallback). */
int constraint_allowed_within(const constraint *c, const token_trie *t, uint32_t limit,
                              uint8_t *allowed, uint32_t *max_cost);

#endif /* TESSERA_GRAMMAR_CONSTRAINT_H */
