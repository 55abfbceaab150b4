/* grammar_regex.c: a regular expression matched in full, and a choice among fixed
 * strings, compiled into a ts_grammar (the same automaton GBNF compiles to): each group
 * and each alternation a rule, each repetition rules of its own. Errors name the offset. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

typedef struct rx {
    const char *s;
    size_t len, pos, end; /* end: where the pattern stops (before a trailing $) */
    ts_grammar *g;
    ts_status st;
    ts_error *err;
    int depth;
} rx;

static bool fail(rx *x, ts_status st, const char *what)
{
    if (x->st == TS_OK)
        x->st = ts_error_set(x->err, st, "regex: at offset %zu: %s", x->pos, what);
    return false;
}

static int peek(const rx *x)
{
    return x->pos < x->end ? (unsigned char)x->s[x->pos] : -1;
}

static const gr_range DIGIT[] = {{'0', '9'}};
static const gr_range WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const gr_range SPACE[] = {{'\t', '\r'}, {' ', ' '}};

/* A class escape (\d \w \s, or negated \D \W \S): its ranges and whether negated; false
 * when c names none. */
static bool class_escape(int c, const gr_range **r, int *n, bool *negate)
{
    switch (c | 0x20) {
    case 'd': *r = DIGIT, *n = 1; break;
    case 'w': *r = WORD, *n = 4; break;
    case 's': *r = SPACE, *n = 2; break;
    default: return false;
    }
    *negate = c >= 'A' && c <= 'Z';
    return true;
}

static int hex_value(int c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One literal character (escaped or UTF-8) into *cp. */
static bool literal_char(rx *x, uint32_t *cp)
{
    if (peek(x) != '\\') {
        int n = grammar__utf8_decode(x->s + x->pos, x->end - x->pos, cp);
        if (!n)
            return fail(x, TS_ERR_INVALID_ARG, "invalid UTF-8");
        x->pos += (size_t)n;
        return true;
    }
    x->pos++;
    int c = peek(x);
    x->pos++;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++, x->pos++) {
            int h = hex_value(peek(x));
            if (h < 0)
                return fail(x, TS_ERR_INVALID_ARG, "expected a hex digit");
            v = v << 4 | (uint32_t)h;
        }
        if (v >= 0xD800 && v <= 0xDFFF)
            return fail(x, TS_ERR_UNSUPPORTED, "a surrogate code point");
        *cp = v;
        return true;
    }
    switch (c) {
    case 'n': *cp = '\n'; return true;
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = '\v'; return true;
    case '0': *cp = 0; return true;
    case -1: return fail(x, TS_ERR_INVALID_ARG, "a trailing backslash");
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            return x->pos--, fail(x, TS_ERR_UNSUPPORTED,
                                  "an escape outside the subset (backreferences, \\b, ...)");
        x->pos--;
        return literal_char(x, cp); /* an escaped punctuation character is itself */
    }
}

/* Appends ranges (n) or their complement to *r (n_r, capacity *cap). */
static bool add_ranges(gr_range **r, int *n_r, int *cap, const gr_range *add, int n,
                       bool negate)
{
    gr_range tmp[8];
    if (negate) { /* add is sorted: its complement within [0, 0x10FFFF] */
        int k = 0;
        uint32_t from = 0;
        for (int i = 0; i < n; i++) {
            if (add[i].lo > from)
                tmp[k++] = (gr_range){from, add[i].lo - 1};
            from = add[i].hi + 1;
        }
        tmp[k++] = (gr_range){from, 0x10FFFF};
        add = tmp;
        n = k;
    }
    if (*n_r + n > *cap) {
        int c = (*cap ? *cap * 2 : 16) + n;
        gr_range *q = realloc(*r, (size_t)c * sizeof *q);
        if (!q)
            return false;
        *r = q;
        *cap = c;
    }
    memcpy(*r + *n_r, add, (size_t)n * sizeof *add);
    *n_r += n;
    return true;
}

/* [class] into *e. */
static bool char_class(rx *x, gr_elem *e)
{
    x->pos++;
    bool negate = peek(x) == '^', ok = true;
    x->pos += negate;
    gr_range *r = NULL;
    int n = 0, cap = 0;
    for (bool first = true; ok && (peek(x) != ']' || first); first = false) {
        const gr_range *cls;
        int n_cls;
        bool neg_cls;
        uint32_t lo, hi;
        if (peek(x) < 0) {
            ok = fail(x, TS_ERR_INVALID_ARG, "unterminated character class");
        } else if (peek(x) == '\\' && x->pos + 1 < x->end &&
                   class_escape((unsigned char)x->s[x->pos + 1], &cls, &n_cls, &neg_cls)) {
            x->pos += 2;
            ok = add_ranges(&r, &n, &cap, cls, n_cls, neg_cls) ||
                 fail(x, TS_ERR_NOMEM, "out of memory");
        } else if ((ok = literal_char(x, &lo))) {
            hi = lo;
            if (peek(x) == '-' && x->pos + 1 < x->end && x->s[x->pos + 1] != ']') {
                x->pos++;
                ok = literal_char(x, &hi);
                if (ok && hi < lo)
                    ok = fail(x, TS_ERR_INVALID_ARG, "character range out of order");
            }
            ok = ok && (add_ranges(&r, &n, &cap, &(gr_range){lo, hi}, 1, false) ||
                        fail(x, TS_ERR_NOMEM, "out of memory"));
        }
    }
    x->pos++;
    ok = ok && (grammar__char_elem(x->g, r, n, negate, e) ||
                fail(x, TS_ERR_NOMEM, "out of memory"));
    free(r);
    return ok;
}

static bool count(rx *x, uint32_t *v)
{
    if (peek(x) < '0' || peek(x) > '9')
        return fail(x, TS_ERR_INVALID_ARG, "expected a number in { }");
    uint64_t a = 0;
    for (; peek(x) >= '0' && peek(x) <= '9'; x->pos++)
        if ((a = a * 10 + (uint64_t)(peek(x) - '0')) > GR_MAX_REPEAT)
            return fail(x, TS_ERR_TOO_LONG, "repetition count over 1000");
    *v = (uint32_t)a;
    return true;
}

/* A quantifier after an atom into *min, *max (1, 1 for none); a lazy '?' is accepted
 * (a full match has the same language). */
static bool quantifier(rx *x, uint32_t *min, uint32_t *max)
{
    int c = peek(x);
    *min = *max = 1;
    if (c == '*' || c == '+' || c == '?') {
        x->pos++;
        *min = c == '+';
        *max = c == '?' ? 1 : UINT32_MAX;
    } else if (c == '{' && x->pos + 1 < x->end && x->s[x->pos + 1] >= '0' &&
               x->s[x->pos + 1] <= '9') {
        x->pos++;
        if (!count(x, min))
            return false;
        *max = *min;
        if (peek(x) == ',') {
            x->pos++;
            *max = UINT32_MAX;
            if (peek(x) != '}' && !count(x, max))
                return false;
        }
        if (peek(x) != '}')
            return fail(x, TS_ERR_INVALID_ARG, "expected '}'");
        x->pos++;
        if (*max < *min)
            return fail(x, TS_ERR_INVALID_ARG, "repetition {m,n} with n < m");
    } else {
        return true;
    }
    if (peek(x) == '?')
        x->pos++;
    if (peek(x) == '*' || peek(x) == '+' || peek(x) == '?' || peek(x) == '{')
        return fail(x, TS_ERR_UNSUPPORTED, "a quantifier after a quantifier");
    return true;
}

static bool alternation(rx *x, int rule);

static bool push(rx *x, gr_seq *s, gr_elem e)
{
    return grammar__seq_push(s, e) || fail(x, TS_ERR_TOO_LONG, "pattern too large");
}

/* After "(": skips "?:", "?<name>" or "?P<name>" (a group like any other here, since
 * nothing refers back to it); false for any other "(?" form (lookaround). */
static bool group_prefix(rx *x)
{
    const char *s = x->s;
    size_t at = x->pos + 1; /* after '?' */
    if (at < x->end && s[at] == ':') {
        x->pos = at + 1;
        return true;
    }
    if (at < x->end && s[at] == 'P')
        at++;
    if (at >= x->end || s[at] != '<' || at + 1 >= x->end || s[at + 1] == '=' ||
        s[at + 1] == '!')
        return false;
    size_t name = ++at;
    while (at < x->end && (s[at] == '_' || (s[at] >= 'a' && s[at] <= 'z') ||
                           (s[at] >= 'A' && s[at] <= 'Z') || (s[at] >= '0' && s[at] <= '9')))
        at++;
    if (at == name || at >= x->end || s[at] != '>')
        return false;
    x->pos = at + 1;
    return true;
}

/* One atom into *e. */
static bool atom(rx *x, gr_elem *e)
{
    int c = peek(x);
    const gr_range *cls;
    int n_cls;
    bool neg;
    if (c == '(') {
        x->pos++;
        if (peek(x) == '?' && !group_prefix(x))
            return fail(x, TS_ERR_UNSUPPORTED, "lookaround and conditional groups");
        int r = grammar__add_rule(x->g);
        if (r < 0)
            return fail(x, TS_ERR_TOO_LONG, "too many groups");
        if (++x->depth > GR_MAX_NEST)
            return fail(x, TS_ERR_TOO_LONG, "groups nest too deeply");
        if (!alternation(x, r))
            return false;
        x->depth--;
        if (peek(x) != ')')
            return fail(x, TS_ERR_INVALID_ARG, "expected ')'");
        x->pos++;
        *e = (gr_elem){GR_REF, (uint32_t)r, 0};
        return true;
    }
    if (c == '[')
        return char_class(x, e);
    if (c == '.') {
        x->pos++;
        return grammar__char_elem(x->g, &(gr_range){'\n', '\n'}, 1, true, e) ||
               fail(x, TS_ERR_NOMEM, "out of memory");
    }
    if (c == '\\' && x->pos + 1 < x->end &&
        class_escape((unsigned char)x->s[x->pos + 1], &cls, &n_cls, &neg)) {
        x->pos += 2;
        return grammar__char_elem(x->g, cls, n_cls, neg, e) ||
               fail(x, TS_ERR_NOMEM, "out of memory");
    }
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return fail(x, TS_ERR_INVALID_ARG, "nothing to repeat");
    if (c == '^' || c == '$')
        return fail(x, TS_ERR_UNSUPPORTED, "an anchor inside the pattern");
    uint32_t cp;
    return literal_char(x, &cp) &&
           (grammar__char_elem(x->g, &(gr_range){cp, cp}, 1, false, e) ||
            fail(x, TS_ERR_NOMEM, "out of memory"));
}

/* Pieces up to '|', ')' or the end. */
static bool concatenation(rx *x, gr_seq *out)
{
    for (int c = peek(x); c >= 0 && c != '|' && c != ')'; c = peek(x)) {
        gr_elem e;
        uint32_t min, max;
        if (!atom(x, &e) || !quantifier(x, &min, &max))
            return false;
        if (min == 1 && max == 1 ? !push(x, out, e)
                                 : !grammar__repeat(x->g, e, min, max, out))
            return fail(x, TS_ERR_TOO_LONG, "pattern too large");
    }
    return true;
}

static bool alternation(rx *x, int rule)
{
    gr_seq s = {0};
    bool ok;
    for (;;) {
        s.n = 0;
        ok = concatenation(x, &s) && (grammar__add_alt(x->g, rule, &s) ||
                                      fail(x, TS_ERR_TOO_LONG, "pattern too large"));
        if (!ok || peek(x) != '|')
            break;
        x->pos++;
    }
    grammar__seq_free(&s);
    return ok;
}

ts_status ts_grammar_compile_regex(const char *pattern, size_t len, ts_grammar **out,
                                   ts_error *err)
{
    *out = NULL;
    if (len > TS_GRAMMAR_MAX_BYTES)
        return ts_error_set(err, TS_ERR_TOO_LONG, "regex: %zu bytes, over the limit of %d",
                            len, TS_GRAMMAR_MAX_BYTES);
    rx x = {.s = pattern, .len = len, .end = len, .g = grammar__new(), .err = err};
    if (!x.g)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a regex");
    x.pos = len && pattern[0] == '^';
    /* A trailing $ not escaped (an odd number of backslashes before it escapes it). */
    if (len > x.pos && pattern[len - 1] == '$') {
        size_t bs = 0;
        while (bs + 2 <= len && pattern[len - 2 - bs] == '\\')
            bs++;
        if (bs % 2 == 0)
            x.end = len - 1;
    }
    int root = grammar__add_rule(x.g);
    if (root >= 0 && alternation(&x, root) && x.pos < x.end)
        fail(&x, TS_ERR_INVALID_ARG, "unmatched ')'");
    if (root < 0)
        fail(&x, TS_ERR_NOMEM, "out of memory");
    x.g->root = root;
    if (x.st == TS_OK)
        x.st = grammar__finish(x.g, NULL, err);
    if (x.st != TS_OK) {
        grammar__free(x.g);
        return x.st;
    }
    *out = x.g;
    return TS_OK;
}

ts_status ts_grammar_compile_choice(const char *const *choices, const size_t *lens, size_t n,
                                    ts_grammar **out, ts_error *err)
{
    *out = NULL;
    if (n == 0 || n > TS_GRAMMAR_MAX_CHOICES)
        return ts_error_set(err, n ? TS_ERR_TOO_LONG : TS_ERR_INVALID_ARG,
                            "choice: %zu strings (1 to %d)", n, TS_GRAMMAR_MAX_CHOICES);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i];
    if (total > TS_GRAMMAR_MAX_BYTES)
        return ts_error_set(err, TS_ERR_TOO_LONG, "choice: %zu bytes, over the limit of %d",
                            total, TS_GRAMMAR_MAX_BYTES);
    ts_grammar *g = grammar__new();
    if (!g)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a choice");
    ts_status st = TS_OK;
    gr_seq s = {0};
    g->root = grammar__add_rule(g);
    for (size_t i = 0; i < n && st == TS_OK; i++) {
        s.n = 0;
        if (lens[i] == 0)
            st = ts_error_set(err, TS_ERR_INVALID_ARG, "choice %zu: an empty string", i);
        for (size_t at = 0; at < lens[i] && st == TS_OK;) {
            uint32_t cp;
            gr_elem e;
            int k = grammar__utf8_decode(choices[i] + at, lens[i] - at, &cp);
            if (!k)
                st = ts_error_set(err, TS_ERR_INVALID_ARG, "choice %zu: invalid UTF-8", i);
            else if (!grammar__char_elem(g, &(gr_range){cp, cp}, 1, false, &e) ||
                     !grammar__seq_push(&s, e))
                st = ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a choice");
            at += (size_t)k;
        }
        if (st == TS_OK && !grammar__add_alt(g, g->root, &s))
            st = ts_error_set(err, TS_ERR_TOO_LONG, "choice: too large");
    }
    grammar__seq_free(&s);
    if (st == TS_OK)
        st = grammar__finish(g, NULL, err);
    if (st != TS_OK) {
        grammar__free(g);
        return st;
    }
    *out = g;
    return TS_OK;
}
