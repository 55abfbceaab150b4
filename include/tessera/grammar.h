/* tessera/grammar.h: grammars for constrained decoding: llama.cpp's GBNF, a regular
 * expression matched in full, or a choice among fixed strings, each compiled into one
 * immutable automaton over bytes that any number of requests may share (reference-counted,
 * as ts_schema). docs/API.md, "Grammars, regular expressions and choices", lists what each
 * front end accepts and its bounds. */
#ifndef TESSERA_GRAMMAR_H
#define TESSERA_GRAMMAR_H

#include <stddef.h>

#include "tessera/status.h"

typedef struct ts_grammar ts_grammar;

enum {
    TS_GRAMMAR_MAX_BYTES = 1 << 16, /* the largest grammar, pattern or choice text read */
    TS_GRAMMAR_MAX_CHOICES = 256,   /* strings of one choice */
};

/* Each compiler reads its text (len bytes, borrowed: nothing of it is kept) and on success
 * sets *out to one reference, the caller's, to drop with ts_grammar_release(). On failure
 * err says why, naming the line and column (GBNF), the offset (regex) or the choice:
 * TS_ERR_INVALID_ARG (malformed, an undefined rule, a rule that can never end, left
 * recursion), TS_ERR_UNSUPPORTED (a construct outside the subset), TS_ERR_TOO_LONG (over a
 * bound: size, rules, repetition counts), TS_ERR_NOMEM. */

/* GBNF: rules `name ::= ...` with "literals", [classes], ., ( ), |, *, +, ?, {m,n} and
 * # comments; generation starts at the rule `root`. */
ts_status ts_grammar_compile_gbnf(const char *text, size_t len, ts_grammar **out,
                                  ts_error *err);

/* A regular expression that the whole text must match: literals, escapes (\d \w \s and
 * their negations, \n \t \xHH \uHHHH ...), [classes], ., groups ( ) and (?: ), |, *, +, ?,
 * {m}, {m,}, {m,n}; a leading ^ and a trailing $ are accepted. No backreferences or
 * lookaround. */
ts_status ts_grammar_compile_regex(const char *pattern, size_t len, ts_grammar **out,
                                   ts_error *err);

/* Exactly one of the n strings (choices[i], lens[i] bytes, borrowed; 1..
 * TS_GRAMMAR_MAX_CHOICES of them, each valid UTF-8 and non-empty). */
ts_status ts_grammar_compile_choice(const char *const *choices, const size_t *lens, size_t n,
                                    ts_grammar **out, ts_error *err);

/* Takes one more reference to g and returns it. Thread-safe. */
ts_grammar *ts_grammar_retain(ts_grammar *g);

/* Drops one reference; the last one frees the grammar. Accepts NULL. Thread-safe. */
void ts_grammar_release(ts_grammar *g);

#endif /* TESSERA_GRAMMAR_H */
