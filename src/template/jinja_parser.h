/* jinja_parser.h: the parser's state and the helpers that its expression half
 * (jinja_parse.c) and statement half (jinja_parse_stmt.c) share. */
#ifndef TESSERA_TEMPLATE_JINJA_PARSER_H
#define TESSERA_TEMPLATE_JINJA_PARSER_H

#include "template/jinja_internal.h"

typedef struct jparser {
    jinja_arena *a;
    const jinja_limits *lim;
    jtok *t; /* ends with JT_EOF */
    size_t n, pos;
    size_t nodes;
    int depth;
    int loops;       /* for loops around the statement being parsed (break, continue) */
    int macro_depth; /* macro and call bodies around it */
    jnode **calls;   /* every call of a plain name, checked once the macros are known */
    size_t n_calls, cap_calls;
    jnode **macros;
    size_t n_macros, cap_macros;
    ts_error *err;
    ts_status st; /* the first error */
} jparser;

/* Records the first error with the token's line and column; returns false. */
bool jp_fail(jparser *p, const jtok *at, ts_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
jtok *jp_peek(jparser *p);
/* The current token, moving past it (never past JT_EOF). */
jtok *jp_next(jparser *p);
/* Whether k is of type t and, when s is not NULL, spells s. */
bool jp_tok_is(const jtok *k, jtok_type t, const char *s);
bool jp_is_op(jparser *p, const char *s);
bool jp_is_name(jparser *p, const char *s);
bool jp_accept_op(jparser *p, const char *s);
bool jp_accept_name(jparser *p, const char *s);
bool jp_expect_op(jparser *p, const char *s);
const char *jp_dupn(jparser *p, const char *s, size_t n);
/* A new node at token at, or NULL (error recorded) past max_nodes or out of memory. */
jnode *jp_node(jparser *p, jnode_kind k, const jtok *at);
bool jp_set_name(jparser *p, jnode *e, const jtok *k);
bool jp_append(jparser *p, jnode ***arr, size_t *n, size_t *cap, jnode *e);
/* Counts one level of nesting; false past max_depth. The caller decrements depth. */
bool jp_enter(jparser *p);
/* An expression with the conditional (jp_expr) or without it (jp_or, for loops). */
jnode *jp_expr(jparser *p);
jnode *jp_or(jparser *p);
/* NAME[(args)] (| NAME[(args)])* applied to e, for {% filter %}. */
jnode *jp_filters(jparser *p, jnode *e);

#endif /* TESSERA_TEMPLATE_JINJA_PARSER_H */
