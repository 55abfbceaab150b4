/* gbnf.c: llama.cpp's grammar format (GBNF) parsed into a ts_grammar: rules of
 * alternatives, literals, character classes, groups and repetitions (which become rules of
 * their own). Errors name the line and column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

typedef struct parser {
    const char *s;
    size_t len, pos;
    ts_grammar *g;
    char **names; /* (cap_names) a named rule's name, NULL for the rules made here */
    int cap_names;
    ts_status st; /* the first error */
    ts_error *err;
    int depth;    /* groups open */
} parser;

/* Records the first error at the current position; returns false for chaining. */
static bool fail(parser *p, ts_status st, const char *what)
{
    if (p->st != TS_OK)
        return false;
    int line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        col++;
        if (p->s[i] == '\n')
            line++, col = 1;
    }
    p->st = ts_error_set(p->err, st, "grammar: line %d column %d: %s", line, col, what);
    return false;
}

static bool nomem(parser *p)
{
    return fail(p, TS_ERR_NOMEM, "out of memory");
}

static int peek(const parser *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

/* Skips blanks and # comments, and newlines too when newlines is true. */
static void space(parser *p, bool newlines)
{
    for (int c = peek(p); c >= 0; c = peek(p)) {
        if (c == '#') {
            while (peek(p) >= 0 && peek(p) != '\n')
                p->pos++;
        } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
            p->pos++;
        } else {
            break;
        }
    }
}

static bool is_word(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* The rule named s[at .. at+n), made (without alternatives) on first use; -1 on error. */
static int rule_named(parser *p, size_t at, size_t n)
{
    for (int r = 0; r < p->g->n_rules; r++)
        if (r < p->cap_names && p->names[r] && strlen(p->names[r]) == n &&
            !memcmp(p->names[r], p->s + at, n))
            return r;
    int r = grammar__add_rule(p->g);
    if (r < 0)
        return fail(p, TS_ERR_TOO_LONG, "too many rules"), -1;
    if (r >= p->cap_names) {
        int cap = p->cap_names ? p->cap_names : 64;
        while (cap <= r)
            cap *= 2;
        char **q = realloc(p->names, (size_t)cap * sizeof *q);
        if (!q)
            return nomem(p), -1;
        memset(q + p->cap_names, 0, (size_t)(cap - p->cap_names) * sizeof *q);
        p->names = q;
        p->cap_names = cap;
    }
    p->names[r] = strndup(p->s + at, n);
    return p->names[r] ? r : (nomem(p), -1);
}

/* An anonymous rule (a group, a repeated literal); -1 on error. */
static int rule_anon(parser *p)
{
    int r = grammar__add_rule(p->g);
    if (r < 0)
        fail(p, TS_ERR_TOO_LONG, "too many rules");
    return r;
}

static int hex_value(int c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads one UTF-8 character of the grammar text into *cp. */
static bool utf8_char(parser *p, uint32_t *cp)
{
    int n = grammar__utf8_decode(p->s + p->pos, p->len - p->pos, cp);
    if (!n)
        return fail(p, TS_ERR_INVALID_ARG, "invalid UTF-8");
    p->pos += (size_t)n;
    return true;
}

/* One character of a literal or class, escapes included. */
static bool char_or_escape(parser *p, uint32_t *cp)
{
    if (peek(p) != '\\')
        return utf8_char(p, cp);
    p->pos++;
    int c = peek(p);
    p->pos++;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = hex_value(peek(p));
            if (h < 0)
                return fail(p, TS_ERR_INVALID_ARG, "expected a hex digit in an escape");
            v = v << 4 | (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return fail(p, TS_ERR_INVALID_ARG, "escape is not a Unicode scalar value");
        *cp = v;
        return true;
    }
    switch (c) {
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 't': *cp = '\t'; return true;
    case '0': *cp = 0; return true;
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '.':
    case '/': case '(': case ')': case '|': case '*': case '+': case '?': case '{':
    case '}':
        *cp = (uint32_t)c;
        return true;
    default:
        p->pos--;
        return fail(p, TS_ERR_INVALID_ARG, "unknown escape");
    }
}

static bool push(parser *p, gr_seq *s, gr_elem e)
{
    return grammar__seq_push(s, e) || fail(p, TS_ERR_TOO_LONG, "grammar too large");
}

static bool char_elem(parser *p, const gr_range *r, int n, bool negate, gr_elem *e)
{
    return grammar__char_elem(p->g, r, n, negate, e) || nomem(p);
}

/* "literal": one element per character. */
static bool literal(parser *p, gr_seq *out)
{
    p->pos++;
    while (peek(p) != '"') {
        uint32_t cp;
        gr_elem e;
        if (peek(p) < 0)
            return fail(p, TS_ERR_INVALID_ARG, "unterminated string literal");
        if (!char_or_escape(p, &cp) || !char_elem(p, &(gr_range){cp, cp}, 1, false, &e) ||
            !push(p, out, e))
            return false;
    }
    p->pos++;
    return true;
}

/* [class] or [^class]. */
static bool char_class(parser *p, gr_elem *e)
{
    p->pos++;
    bool negate = peek(p) == '^';
    p->pos += negate;
    gr_range *r = NULL;
    int n = 0, cap = 0;
    bool ok = true;
    while (ok && peek(p) != ']') {
        uint32_t lo, hi;
        if (peek(p) < 0) {
            ok = fail(p, TS_ERR_INVALID_ARG, "unterminated character class");
            break;
        }
        ok = char_or_escape(p, &lo);
        hi = lo;
        if (ok && peek(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] != ']') {
            p->pos++;
            ok = char_or_escape(p, &hi);
            if (ok && hi < lo)
                ok = fail(p, TS_ERR_INVALID_ARG, "character range out of order");
        }
        if (ok && n == cap) {
            cap = cap ? cap * 2 : 8;
            gr_range *q = realloc(r, (size_t)cap * sizeof *q);
            ok = q ? (r = q, true) : nomem(p);
        }
        if (ok)
            r[n++] = (gr_range){lo, hi};
    }
    if (ok) {
        p->pos++;
        ok = char_elem(p, r, n, negate, e);
    }
    free(r);
    return ok;
}

static bool alternatives(parser *p, int rule, bool nested);

/* A decimal count of {m,n}. */
static bool count(parser *p, uint32_t *v)
{
    if (peek(p) < '0' || peek(p) > '9')
        return fail(p, TS_ERR_INVALID_ARG, "expected a number in { }");
    uint64_t x = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        x = x * 10 + (uint64_t)(peek(p) - '0');
        p->pos++;
        if (x > GR_MAX_REPEAT)
            return fail(p, TS_ERR_TOO_LONG, "repetition count over 1000");
    }
    *v = (uint32_t)x;
    return true;
}

/* After an atom: *, +, ?, {m}, {m,}, {m,n}; min and max the counts (1, 1 when none). */
static bool postfix(parser *p, uint32_t *min, uint32_t *max)
{
    int c = peek(p);
    *min = *max = 1;
    if (c == '*' || c == '+' || c == '?') {
        p->pos++;
        *min = c == '+';
        *max = c == '?' ? 1 : UINT32_MAX;
        return true;
    }
    if (c != '{')
        return true;
    p->pos++;
    space(p, false);
    if (!count(p, min))
        return false;
    *max = *min;
    space(p, false);
    if (peek(p) == ',') {
        p->pos++;
        space(p, false);
        *max = UINT32_MAX;
        if (peek(p) != '}' && !count(p, max))
            return false;
        space(p, false);
    }
    if (peek(p) != '}')
        return fail(p, TS_ERR_INVALID_ARG, "expected '}'");
    p->pos++;
    if (*max < *min)
        return fail(p, TS_ERR_INVALID_ARG, "repetition {m,n} with n < m");
    return true;
}

/* One atom and its repetition appended to out. */
static bool atom(parser *p, gr_seq *out, bool nested)
{
    gr_seq part = {0};
    size_t at = p->pos;
    int c = peek(p);
    bool ok = true;
    gr_elem e;
    if (c == '"') {
        ok = literal(p, &part);
    } else if (c == '[') {
        ok = char_class(p, &e) && push(p, &part, e);
    } else if (c == '.') {
        p->pos++;
        ok = char_elem(p, NULL, 0, true, &e) && push(p, &part, e);
    } else if (c == '(') {
        p->pos++;
        if (++p->depth > GR_MAX_NEST) {
            grammar__seq_free(&part);
            return fail(p, TS_ERR_TOO_LONG, "groups nest too deeply");
        }
        int r = rule_anon(p);
        space(p, true);
        ok = r >= 0 && alternatives(p, r, true);
        if (ok && peek(p) != ')')
            ok = fail(p, TS_ERR_INVALID_ARG, "expected ')'");
        p->pos++;
        p->depth--;
        ok = ok && push(p, &part, (gr_elem){GR_REF, (uint32_t)r, 0});
    } else if (is_word(c)) {
        while (is_word(peek(p)))
            p->pos++;
        int r = rule_named(p, at, p->pos - at);
        ok = r >= 0 && push(p, &part, (gr_elem){GR_REF, (uint32_t)r, 0});
    } else {
        ok = fail(p, TS_ERR_INVALID_ARG, "expected a literal, class, group or rule name");
    }
    space(p, nested);
    uint32_t min, max;
    ok = ok && postfix(p, &min, &max);
    if (ok && (min != 1 || max != 1)) {
        if (part.n != 1) { /* a repeated literal of several characters: a rule of its own */
            int r = rule_anon(p);
            ok = r >= 0 && (grammar__add_alt(p->g, r, &part) || nomem(p));
            part.n = 0;
            ok = ok && push(p, &part, (gr_elem){GR_REF, (uint32_t)r, 0});
        }
        if (ok && !grammar__repeat(p->g, part.e[0], min, max, out))
            ok = fail(p, TS_ERR_TOO_LONG, "grammar too large");
    } else {
        for (int i = 0; ok && i < part.n; i++)
            ok = push(p, out, part.e[i]);
    }
    grammar__seq_free(&part);
    return ok;
}

/* Atoms up to '|', ')', the end of the line (outside a group) or of the text. */
static bool sequence(parser *p, gr_seq *out, bool nested)
{
    space(p, nested);
    for (int c = peek(p); c >= 0 && c != '|' && c != ')' && c != '\n' && c != '\r';
         c = peek(p)) {
        if (!atom(p, out, nested))
            return false;
        space(p, nested);
    }
    return true;
}

static bool alternatives(parser *p, int rule, bool nested)
{
    gr_seq s = {0};
    bool ok = true;
    for (;;) {
        s.n = 0;
        ok = sequence(p, &s, nested) && (grammar__add_alt(p->g, rule, &s) || nomem(p));
        if (!ok || peek(p) != '|')
            break;
        p->pos++;
        space(p, true);
    }
    grammar__seq_free(&s);
    return ok;
}

/* name ::= alternatives, up to the end of its line. */
static bool rule_def(parser *p)
{
    size_t at = p->pos;
    while (is_word(peek(p)))
        p->pos++;
    if (p->pos == at)
        return fail(p, TS_ERR_INVALID_ARG, "expected a rule name");
    int r = rule_named(p, at, p->pos - at);
    if (r < 0)
        return false;
    if (p->g->rules[r].n)
        return fail(p, TS_ERR_INVALID_ARG, "rule defined twice");
    space(p, false);
    if (p->len - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3))
        return fail(p, TS_ERR_INVALID_ARG, "expected '::='");
    p->pos += 3;
    space(p, true);
    if (!alternatives(p, r, false))
        return false;
    if (peek(p) == ')')
        return fail(p, TS_ERR_INVALID_ARG, "unmatched ')'");
    return true;
}

/* The first rule used but never defined, or -1. */
static int undefined_rule(const parser *p)
{
    for (int r = 0; r < p->g->n_rules; r++)
        if (r < p->cap_names && p->names[r] && p->g->rules[r].n == 0)
            return r;
    return -1;
}

ts_status ts_grammar_compile_gbnf(const char *text, size_t len, ts_grammar **out,
                                  ts_error *err)
{
    *out = NULL;
    if (len > TS_GRAMMAR_MAX_BYTES)
        return ts_error_set(err, TS_ERR_TOO_LONG, "grammar: %zu bytes, over the limit of %d",
                            len, TS_GRAMMAR_MAX_BYTES);
    parser p = {.s = text, .len = len, .g = grammar__new(), .err = err};
    if (!p.g)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a grammar");
    for (space(&p, true); p.st == TS_OK && peek(&p) >= 0; space(&p, true))
        rule_def(&p);
    int root = -1;
    if (p.st == TS_OK) {
        for (int r = 0; r < p.g->n_rules && root < 0; r++)
            if (r < p.cap_names && p.names[r] && !strcmp(p.names[r], "root"))
                root = r;
        int u = undefined_rule(&p);
        if (u >= 0)
            p.st = ts_error_set(err, TS_ERR_INVALID_ARG, "grammar: rule '%s' is not defined",
                                p.names[u]);
        else if (root < 0)
            p.st = ts_error_set(err, TS_ERR_INVALID_ARG, "grammar: no rule named 'root'");
    }
    if (p.st == TS_OK) {
        p.g->root = root;
        if (p.cap_names < p.g->n_rules) { /* names[] must cover every rule for finish */
            char **q = realloc(p.names, (size_t)p.g->n_rules * sizeof *q);
            if (q) {
                memset(q + p.cap_names, 0, (size_t)(p.g->n_rules - p.cap_names) * sizeof *q);
                p.names = q;
                p.cap_names = p.g->n_rules;
            } else {
                p.st = ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a grammar");
            }
        }
    }
    if (p.st == TS_OK)
        p.st = grammar__finish(p.g, (const char *const *)p.names, err);
    for (int r = 0; r < p.cap_names; r++)
        free(p.names[r]);
    free(p.names);
    if (p.st != TS_OK) {
        grammar__free(p.g);
        return p.st;
    }
    *out = p.g;
    return TS_OK;
}
