/* grammar_oracle.h: an independent recogniser for the grammar tests: grammars written
 * again as combinators (characters, literals, sequences, alternatives, repetition, rule
 * references) and matched by exhaustive backtracking, sharing no code with the grammar
 * compiler or its automaton. */
#ifndef TESSERA_TESTS_GRAMMAR_ORACLE_H
#define TESSERA_TESTS_GRAMMAR_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A node of an oracle grammar (an index into the oracle's pool). */
typedef int go_node;

/* Clears the pool and the rules. */
void go_reset(void);

go_node go_chr(uint32_t lo, uint32_t hi);       /* one code point in [lo, hi] */
go_node go_set(const char *ascii);              /* one of the ASCII characters */
go_node go_not(const char *ascii, uint32_t lo, uint32_t hi); /* any code point outside
                                                 * ascii and [lo, hi] */
go_node go_lit(const char *s);
go_node go_seq(int n, ...);
go_node go_alt(int n, ...);
go_node go_star(go_node a);                     /* a must not match the empty text */
go_node go_plus(go_node a);
go_node go_opt(go_node a);
go_node go_eps(void);
go_node go_ref(int rule);
void go_rule(int rule, go_node body);           /* rules 0..63; rule 0 is the start */

/* True when the whole of s (n bytes, valid UTF-8) matches rule 0. */
bool go_match(const char *s, size_t n);

#endif
