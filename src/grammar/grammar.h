/* grammar.h: the body of ts_grammar (rules of alternatives over code-point sets, the
 * form every front end compiles to: gbnf.c, grammar_regex.c) and the per-sequence state
 * that walks it (grammar_run.c): a bounded set of parse stacks, as a plain value. Knows
 * nothing of tokens. */
#ifndef TESSERA_GRAMMAR_GRAMMAR_H
#define TESSERA_GRAMMAR_GRAMMAR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/grammar.h"

enum {
    GR_MAX_ELEMS = 60000,  /* elements of all rules (a position is 16 bits) */
    GR_MAX_RULES = 8192,   /* rules, those made for groups and repetitions included */
    GR_MAX_REPEAT = 1000,  /* m and n of {m,n} */
    GR_MAX_STACKS = 256,   /* parses followed at once; past the start, more are dropped
                            * (the text stays in the language: every kept stack is a
                            * parse of it); a start that needs more is refused */
    GR_MAX_DEPTH = 64,     /* open rules of one parse; a deeper parse is dropped */
    GR_MAX_CELLS = 4096,   /* stack cells of a state, all stacks together */
    GR_MAX_NEST = 200,     /* groups nested in one rule's text */
    GR_MAX_MASK_WORK = 1 << 26, /* gr_step_work units of one token mask (about 0.1 s on
                                 * one core); a grammar that needs more fails the request
                                 * (a JSON grammar over a 50k vocabulary needs ~3M) */
    GR_MAX_EXPAND = 2048,  /* rule expansions while taking one byte; past it the parses
                            * not yet expanded are dropped (the start may not need more) */
    GR_COST_NEVER = 0x3FFFFFFF,
};

typedef enum gr_op {
    GR_END,  /* the end of an alternative (a: its rule) */
    GR_CHAR, /* one code point in ranges[a .. a+n) */
    GR_REF,  /* rule a */
} gr_op;

typedef struct gr_elem {
    uint8_t op;  /* gr_op */
    uint32_t a, n;
} gr_elem;

typedef struct gr_range {
    uint32_t lo, hi; /* inclusive code points, sorted and disjoint within an element */
} gr_range;

typedef struct gr_rule {
    uint32_t first, n; /* alternatives alts[first .. first+n): positions in code */
} gr_rule;

struct ts_grammar {
    atomic_int refs;
    int root;
    gr_elem *code;      /* (n_code) the alternatives' elements, each ending in GR_END */
    int n_code, cap_code;
    gr_range *ranges;   /* (n_ranges) */
    int n_ranges, cap_ranges;
    uint32_t *alts;     /* (n_alts) the first position of each alternative */
    int n_alts, cap_alts;
    gr_rule *rules;     /* (n_rules) */
    int n_rules, cap_rules;
    uint32_t *rest;     /* (n_code) bytes of the shortest text matching the elements from
                         * a position to its alternative's end */
    uint32_t *rule_min; /* (n_rules) bytes of the shortest text of each rule */
    uint16_t *need;     /* (n_code) stack frames above its own that finishing the
                         * alternative from a position needs at least (GR_MAX_DEPTH + 1:
                         * more than a stack holds) */
    uint32_t max_cost;  /* no state's closing cost (gr_cost) exceeds it */
};

/* ---- building (grammar_build.c): every front end emits through these */

/* An empty grammar (refs 1) or NULL. */
ts_grammar *grammar__new(void);

/* A new rule with no alternatives; its index, or -1 past GR_MAX_RULES / out of memory. */
int grammar__add_rule(ts_grammar *g);

/* A sequence of elements being built: front ends build an alternative here and add it
 * with grammar__add_alt, in any order across rules (a group's rule is made while the
 * enclosing rule's alternative is still being built). */
typedef struct gr_seq {
    gr_elem *e; /* (n) */
    int n, cap;
} gr_seq;

/* Appends one element to s; false when out of memory or over GR_MAX_ELEMS. */
bool grammar__seq_push(gr_seq *s, gr_elem e);
void grammar__seq_free(gr_seq *s);

/* Adds s (copied) as an alternative of rule; false when out of memory or over a bound. */
bool grammar__add_alt(ts_grammar *g, int rule, const gr_seq *s);

/* A GR_CHAR element of the code points in ranges (n, any order, may overlap), or of their
 * complement when negate; false when out of memory. */
bool grammar__char_elem(ts_grammar *g, const gr_range *ranges, int n, bool negate,
                        gr_elem *out);

/* The element that repeats e between min and max times (max UINT32_MAX: unbounded),
 * made of new rules; false when out of memory or over a bound. */
bool grammar__repeat(ts_grammar *g, gr_elem e, uint32_t min, uint32_t max, gr_seq *out);

/* Checks the finished grammar (every rule reachable from root can end; no rule reaches
 * itself without reading a character) and computes the closing costs. */
ts_status grammar__finish(ts_grammar *g, const char *const *names, ts_error *err);

void grammar__free(ts_grammar *g);

/* Decodes one UTF-8 character of s (len > 0 bytes) into *cp: its byte count, or 0 when s
 * does not start with a valid character (overlong forms and surrogates are invalid). */
int grammar__utf8_decode(const char *s, size_t len, uint32_t *cp);

/* ---- the state (grammar_run.c) */

/* A plain value; only offsetof(cells) + n_cells * 2 bytes are live and copied. */
typedef struct gr_state {
    uint16_t n_stacks; /* parses alive, each waiting on a GR_CHAR */
    uint16_t n_cells;
    uint8_t more;      /* UTF-8 continuation bytes still to come */
    uint8_t accept;    /* a parse has ended: the text so far is complete */
    uint8_t pad[2];
    uint32_t cp;       /* the bits of the partial character read so far */
    uint32_t lo, hi;   /* the code points the partial character may still be */
    uint16_t cells[GR_MAX_CELLS]; /* the stacks one after another: a length, then that
                                   * many positions, bottom first; the top is a GR_CHAR */
} gr_state;

size_t gr_state_size(const gr_state *st);

/* The state before the first byte. g is borrowed and must outlive every state of it.
 * False when it cannot be built within the bounds (grammar__finish refuses such a
 * grammar, so a compiled grammar's start is always true). */
bool gr_init(gr_state *st, const ts_grammar *g);

/* to = from advanced by byte c; false when c cannot come next (to is then garbage). from
 * and to must not overlap. */
bool gr_step(const ts_grammar *g, const gr_state *from, uint8_t c, gr_state *to);

/* gr_step that adds to *work the units it spent (rule expansions and stacks compared):
 * a caller stepping many times (a token-trie walk) bounds its total with it. */
bool gr_step_work(const ts_grammar *g, const gr_state *from, uint8_t c, gr_state *to,
                  uint32_t *work);

/* True when the text so far is complete (more may still follow). */
bool gr_can_end(const gr_state *st);

/* True when the text is complete and no byte may follow. */
bool gr_done(const gr_state *st);

/* True when a and b allow the same continuations. */
bool gr_same(const gr_state *a, const gr_state *b);

/* Bytes of the shortest text that completes st (0 when complete). */
uint32_t gr_cost(const ts_grammar *g, const gr_state *st);

#endif /* TESSERA_GRAMMAR_GRAMMAR_H */
