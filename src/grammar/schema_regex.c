/* schema_regex.c: a string pattern (docs/API.md's subset) into a DFA over code points:
 * parse into a small syntax tree, build a Thompson NFA from it (so {m,n} copies its
 * operand), determinize with range splitting, and table which lengths each state can
 * still end in. The pattern must match the whole string (^ and $ are implicit), which
 * also satisfies JSON Schema's search semantics. Escapes mean, when ECMA-262 and
 * Python's re disagree, only what both accept (\d is [0-9], \w [A-Za-z0-9_]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_nfa.h"

enum {
    RX_MAX_NODES = 4096,  /* syntax tree nodes */
    RX_MAX_NFA = 16384,   /* NFA states after copying repetitions */
    RX_MAX_REPEAT = 1000, /* m and n of {m,n} */
};

#define CP_MAX SCH_CP_MAX

typedef sch_range range;
typedef sch_cset cset;
typedef sch_nfa_state nfa_state;

typedef enum rx_kind { RX_SET, RX_CAT, RX_ALT, RX_REP, RX_EMPTY } rx_kind;

typedef struct rx_node {
    rx_kind kind;
    int a, b;          /* CAT, ALT: operands; REP: a the operand */
    int set;           /* SET: index into sets */
    int min, max;      /* REP; max -1 = unbounded */
} rx_node;

typedef struct rx {
    const char *p, *end;
    rx_node *nodes;
    int n_nodes;
    cset *sets;
    int n_sets, cap_sets;
    nfa_state *nfa;
    int n_nfa;
    ts_status st;
    char *msg;
    size_t msg_size;
} rx;

static ts_status rx_fail(rx *x, ts_status st, const char *what)
{
    if (x->st == TS_OK) {
        x->st = st;
        snprintf(x->msg, x->msg_size, "pattern: %s", what);
    }
    return st;
}

/* ---- code point sets */

static bool cset_add(cset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        range *g = realloc(s->r, (size_t)cap * sizeof *g);
        if (!g)
            return false;
        s->r = g;
        s->cap = cap;
    }
    s->r[s->n++] = (range){lo, hi};
    return true;
}

static int range_cmp(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges s's ranges. */
static void cset_norm(cset *s)
{
    if (s->n < 2)
        return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, range_cmp);
    int o = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[o].hi + 1) {
            if (s->r[i].hi > s->r[o].hi)
                s->r[o].hi = s->r[i].hi;
        } else {
            s->r[++o] = s->r[i];
        }
    }
    s->n = o + 1;
}

/* s = [0, CP_MAX] minus s (s normalized). */
static bool cset_invert(cset *s)
{
    cset c = {0};
    uint32_t next = 0;
    bool ok = true;
    for (int i = 0; i < s->n && ok; i++) {
        if (s->r[i].lo > next)
            ok = cset_add(&c, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (ok && next <= CP_MAX)
        ok = cset_add(&c, next, CP_MAX);
    free(s->r);
    *s = c;
    return ok;
}

static int new_set(rx *x)
{
    if (x->n_sets == x->cap_sets) {
        int cap = x->cap_sets ? 2 * x->cap_sets : 16;
        cset *g = realloc(x->sets, (size_t)cap * sizeof *g);
        if (!g)
            return rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1;
        x->sets = g;
        x->cap_sets = cap;
    }
    x->sets[x->n_sets] = (cset){0};
    return x->n_sets++;
}

/* ---- parsing */

static int new_node(rx *x, rx_kind kind, int a, int b)
{
    if (x->n_nodes == RX_MAX_NODES)
        return rx_fail(x, TS_ERR_TOO_LONG, "too long"), -1;
    x->nodes[x->n_nodes] = (rx_node){kind, a, b, -1, 0, 0};
    return x->n_nodes++;
}

/* The next code point of the pattern (UTF-8; the text is valid JSON, so valid UTF-8). */
static uint32_t next_cp(rx *x)
{
    const unsigned char *s = (const unsigned char *)x->p;
    uint32_t c = s[0];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (x->end - x->p < n)
        n = (int)(x->end - x->p);
    if (n > 1)
        c &= 0x3Fu >> (n - 1);
    for (int i = 1; i < n; i++)
        c = (c << 6) | (s[i] & 0x3F);
    x->p += n;
    return c;
}

static int hex_value(rx *x, int digits)
{
    int v = 0;
    for (int i = 0; i < digits; i++, x->p++) {
        char c = x->p < x->end ? *x->p : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return rx_fail(x, TS_ERR_INVALID_ARG, "bad hex escape"), -1;
        v = v * 16 + d;
    }
    return v;
}

/* Adds class escape e (d w s D W S) to set: narrow where the class is used as is, wide
 * where it is negated, so that either way only what both regex dialects agree on is
 * generated. */
static bool add_class_escape(cset *s, char e, bool wide)
{
    static const range digit[] = {{'0', '9'}};
    static const range word[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const range space[] = {{'\t', '\r'}, {' ', ' '}};
    char lower = (char)(e | 0x20);
    const range *r = lower == 'd' ? digit : lower == 'w' ? word : space;
    int n = lower == 'd' ? 1 : lower == 'w' ? 4 : 2;
    bool negated = e >= 'A' && e <= 'Z';
    cset c = {0};
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = cset_add(&c, r[i].lo, r[i].hi);
    /* narrow \d: ASCII only; wide: and every non-ASCII point (other dialects' digits). */
    if (ok && negated == !wide)
        ok = cset_add(&c, 0x80, CP_MAX);
    cset_norm(&c);
    if (ok && negated)
        ok = cset_invert(&c);
    if (ok && negated && !wide) /* narrow \D \W \S: the ASCII part of the complement */
        for (int i = 0; i < c.n; i++)
            if (c.r[i].hi >= 0x80)
                c.r[i].hi = 0x7F, c.n = c.r[i].lo < 0x80 ? i + 1 : i;
    for (int i = 0; ok && i < c.n; i++)
        ok = cset_add(s, c.r[i].lo, c.r[i].hi);
    free(c.r);
    return ok;
}

/* After a backslash: a class escape into set, or a literal code point in *cp (returns
 * 1 for a literal, 0 for a class, -1 on error). */
static int parse_escape(rx *x, cset *set, bool wide, uint32_t *cp)
{
    if (x->p >= x->end)
        return rx_fail(x, TS_ERR_INVALID_ARG, "ends in a backslash"), -1;
    char c = *x->p++;
    if (strchr("dwsDWS", c))
        return add_class_escape(set, c, wide) ? 0 : (rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1);
    const char *ctl = strchr("n\nt\tr\rf\fv\v", c);
    if (ctl && (ctl - "n\nt\tr\rf\fv\v") % 2 == 0) {
        *cp = (uint32_t)(unsigned char)ctl[1];
        return 1;
    }
    if (c == 'u' || c == 'x') {
        int v = hex_value(x, c == 'u' ? 4 : 2);
        if (v < 0 || (v >= 0xD800 && v <= 0xDFFF))
            return rx_fail(x, TS_ERR_UNSUPPORTED, "escapes of surrogates are not supported"), -1;
        *cp = (uint32_t)v;
        return 1;
    }
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        char m[64];
        snprintf(m, sizeof m, "the escape \\%c is not supported", c);
        return rx_fail(x, TS_ERR_UNSUPPORTED, m), -1;
    }
    x->p--;
    *cp = next_cp(x); /* an escaped punctuation or other character: itself */
    return 1;
}

static int parse_alt(rx *x);

/* [...] after the '['. */
static int parse_class(rx *x)
{
    int si = new_set(x);
    if (si < 0)
        return -1;
    bool negate = x->p < x->end && *x->p == '^';
    x->p += negate;
    bool first = true;
    while (x->p < x->end && (*x->p != ']' || first)) {
        first = false;
        uint32_t lo;
        if (*x->p == '\\') {
            x->p++;
            int k = parse_escape(x, &x->sets[si], negate, &lo);
            if (k < 0)
                return -1;
            if (k == 0)
                continue;
        } else {
            lo = next_cp(x);
        }
        uint32_t hi = lo;
        if (x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']') {
            x->p++;
            if (*x->p == '\\') {
                x->p++;
                if (parse_escape(x, &x->sets[si], negate, &hi) != 1)
                    return rx_fail(x, TS_ERR_UNSUPPORTED, "a class range must end in a character"), -1;
            } else {
                hi = next_cp(x);
            }
            if (hi < lo)
                return rx_fail(x, TS_ERR_INVALID_ARG, "a class range out of order"), -1;
        }
        if (!cset_add(&x->sets[si], lo, hi))
            return rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1;
    }
    if (x->p >= x->end)
        return rx_fail(x, TS_ERR_INVALID_ARG, "an unclosed '['"), -1;
    x->p++;
    cset_norm(&x->sets[si]);
    if (negate && !cset_invert(&x->sets[si]))
        return rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1;
    int n = new_node(x, RX_SET, -1, -1);
    if (n >= 0)
        x->nodes[n].set = si;
    return n;
}

static int set_node(rx *x, uint32_t lo, uint32_t hi)
{
    int si = new_set(x);
    if (si < 0 || !cset_add(&x->sets[si], lo, hi))
        return rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1;
    int n = new_node(x, RX_SET, -1, -1);
    if (n >= 0)
        x->nodes[n].set = si;
    return n;
}

static int parse_atom(rx *x)
{
    char c = *x->p;
    if (c == '(') {
        x->p++;
        if (x->p < x->end && *x->p == '?') {
            if (x->end - x->p >= 2 && x->p[1] == ':')
                x->p += 2;
            else if (x->end - x->p >= 3 && (x->p[1] == '<' || x->p[1] == 'P') &&
                     x->p[2] != '=' && x->p[2] != '!') { /* a named group */
                const char *gt = memchr(x->p, '>', (size_t)(x->end - x->p));
                if (!gt)
                    return rx_fail(x, TS_ERR_INVALID_ARG, "an unclosed group name"), -1;
                x->p = gt + 1;
            } else {
                return rx_fail(x, TS_ERR_UNSUPPORTED, "lookaround and (?...) groups are not supported"), -1;
            }
        }
        int n = parse_alt(x);
        if (n < 0)
            return -1;
        if (x->p >= x->end || *x->p != ')')
            return rx_fail(x, TS_ERR_INVALID_ARG, "an unclosed '('"), -1;
        x->p++;
        return n;
    }
    if (c == '[') {
        x->p++;
        return parse_class(x);
    }
    if (c == '.') {
        x->p++;
        int si = new_set(x);
        if (si < 0)
            return -1;
        cset *s = &x->sets[si]; /* every point but the line terminators of both dialects */
        if (!cset_add(s, 0, 9) || !cset_add(s, 11, 12) || !cset_add(s, 14, 0x2027) ||
            !cset_add(s, 0x202A, CP_MAX))
            return rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1;
        int n = new_node(x, RX_SET, -1, -1);
        if (n >= 0)
            x->nodes[n].set = si;
        return n;
    }
    if (c == '\\') {
        x->p++;
        int si = new_set(x);
        uint32_t cp;
        int k = si < 0 ? -1 : parse_escape(x, &x->sets[si], false, &cp);
        if (k < 0)
            return -1;
        if (k == 1 && !cset_add(&x->sets[si], cp, cp))
            return rx_fail(x, TS_ERR_NOMEM, "out of memory"), -1;
        cset_norm(&x->sets[si]);
        int n = new_node(x, RX_SET, -1, -1);
        if (n >= 0)
            x->nodes[n].set = si;
        return n;
    }
    if (strchr("*+?{", c))
        return rx_fail(x, TS_ERR_INVALID_ARG, "a quantifier with nothing to repeat"), -1;
    if (c == '^' || c == '$')
        return rx_fail(x, TS_ERR_UNSUPPORTED, "'^' and '$' only at the ends (they are implicit)"), -1;
    if (c == ']' || c == '}')
        return rx_fail(x, TS_ERR_INVALID_ARG, "an unescaped ']' or '}'"), -1;
    uint32_t cp = next_cp(x);
    return set_node(x, cp, cp);
}

static int read_count(rx *x)
{
    int v = -1;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (*x->p++ - '0');
        if (v > RX_MAX_REPEAT)
            return rx_fail(x, TS_ERR_TOO_LONG, "a {m,n} count over 1000"), -2;
    }
    return v;
}

static int parse_repeat(rx *x)
{
    int n = parse_atom(x);
    while (n >= 0 && x->p < x->end && strchr("*+?{", *x->p)) {
        int min = 0, max = -1;
        char q = *x->p++;
        if (q == '+')
            min = 1;
        else if (q == '?')
            max = 1;
        else if (q == '{') {
            min = read_count(x);
            max = min;
            if (x->p < x->end && *x->p == ',') {
                x->p++;
                max = read_count(x);
            }
            if (min < 0 || max < -1 || x->p >= x->end || *x->p != '}')
                return min == -2 || max == -2 ? -1
                       : (rx_fail(x, TS_ERR_INVALID_ARG, "a malformed {m,n}"), -1);
            x->p++;
            if (max >= 0 && max < min)
                return rx_fail(x, TS_ERR_INVALID_ARG, "{m,n} with n < m"), -1;
        }
        if (x->p < x->end && *x->p == '?')
            x->p++; /* lazy: the same strings */
        if (x->p < x->end && strchr("*+{", *x->p))
            return rx_fail(x, TS_ERR_UNSUPPORTED, "a quantifier after a quantifier"), -1;
        int r = new_node(x, RX_REP, n, -1);
        if (r < 0)
            return -1;
        x->nodes[r].min = min;
        x->nodes[r].max = max;
        n = r;
    }
    return n;
}

static int parse_cat(rx *x)
{
    int n = -1;
    while (x->p < x->end && *x->p != '|' && *x->p != ')') {
        int a = parse_repeat(x);
        if (a < 0)
            return -1;
        n = n < 0 ? a : new_node(x, RX_CAT, n, a);
        if (n < 0)
            return -1;
    }
    return n < 0 ? new_node(x, RX_EMPTY, -1, -1) : n;
}

static int parse_alt(rx *x)
{
    int n = parse_cat(x);
    while (n >= 0 && x->p < x->end && *x->p == '|') {
        x->p++;
        int b = parse_cat(x);
        n = b < 0 ? -1 : new_node(x, RX_ALT, n, b);
    }
    return n;
}

/* ---- the NFA */

static int nfa_new(rx *x)
{
    if (x->n_nfa == RX_MAX_NFA)
        return rx_fail(x, TS_ERR_TOO_LONG, "too complex (its repetitions copy too much)"), -1;
    x->nfa[x->n_nfa] = (nfa_state){{-1, -1}, -1, -1};
    return x->n_nfa++;
}

static void nfa_eps(rx *x, int from, int to)
{
    nfa_state *s = &x->nfa[from];
    s->eps[s->eps[0] < 0 ? 0 : 1] = to;
}

/* Builds node n from state `in`; returns the state after it (-1 on error). */
static int nfa_build(rx *x, int n, int in)
{
    const rx_node *d = &x->nodes[n];
    switch (d->kind) {
    case RX_EMPTY: return in;
    case RX_SET: {
        int out = nfa_new(x);
        if (out >= 0)
            x->nfa[in].set = d->set, x->nfa[in].to = out;
        return out;
    }
    case RX_CAT: {
        int mid = nfa_build(x, d->a, in);
        int s = mid < 0 ? -1 : nfa_new(x); /* a fresh state keeps each one's edges few */
        if (s < 0)
            return -1;
        nfa_eps(x, mid, s);
        return nfa_build(x, d->b, s);
    }
    case RX_ALT: {
        int a = nfa_new(x), b = nfa_new(x), out = nfa_new(x);
        if (out < 0)
            return -1;
        nfa_eps(x, in, a);
        nfa_eps(x, in, b);
        int ea = nfa_build(x, d->a, a), eb = ea < 0 ? -1 : nfa_build(x, d->b, b);
        if (eb < 0)
            return -1;
        nfa_eps(x, ea, out);
        nfa_eps(x, eb, out);
        return out;
    }
    default: { /* RX_REP: min copies, then max - min optional ones or a loop */
        int cur = in;
        for (int i = 0; i < d->min; i++) {
            int s = nfa_new(x);
            int e = s < 0 ? -1 : nfa_build(x, d->a, s);
            if (e < 0)
                return -1;
            nfa_eps(x, cur, s);
            cur = e;
        }
        int out = nfa_new(x);
        if (out < 0)
            return -1;
        if (d->max < 0) {
            int s = nfa_new(x);
            int e = s < 0 ? -1 : nfa_build(x, d->a, s);
            if (e < 0)
                return -1;
            nfa_eps(x, cur, s);
            nfa_eps(x, cur, out);
            nfa_eps(x, e, s);
            nfa_eps(x, e, out);
            return out;
        }
        for (int i = d->min; i < d->max; i++) {
            int s = nfa_new(x), next = s < 0 ? -1 : nfa_new(x);
            int e = next < 0 ? -1 : nfa_build(x, d->a, s);
            if (e < 0)
                return -1;
            nfa_eps(x, cur, s);
            nfa_eps(x, cur, out); /* stop repeating here */
            nfa_eps(x, e, next);
            cur = next;
        }
        nfa_eps(x, cur, out);
        return out;
    }
    }
}

void schema__nfa_free(sch_nfa *nfa)
{
    for (int i = 0; i < nfa->n_sets; i++)
        free(nfa->sets[i].r);
    free(nfa->sets);
    free(nfa->s);
    *nfa = (sch_nfa){0};
}

ts_status schema__regex_nfa(const char *pattern, size_t len, sch_nfa *nfa, char *msg,
                            size_t msg_size)
{
    *nfa = (sch_nfa){0};
    rx x = {.p = pattern, .end = pattern + len, .msg = msg, .msg_size = msg_size};
    if (len && *x.p == '^')
        x.p++;
    if (x.end > x.p && x.end[-1] == '$') { /* unless escaped: an even run of '\\' before */
        const char *b = x.end - 1;
        while (b > x.p && b[-1] == '\\')
            b--;
        if ((x.end - 1 - b) % 2 == 0)
            x.end--;
    }
    x.nodes = malloc(RX_MAX_NODES * sizeof *x.nodes);
    x.nfa = malloc(RX_MAX_NFA * sizeof *x.nfa);
    int root = -1;
    if (!x.nodes || !x.nfa)
        rx_fail(&x, TS_ERR_NOMEM, "out of memory");
    else
        root = parse_alt(&x);
    if (root >= 0 && x.p < x.end)
        rx_fail(&x, TS_ERR_INVALID_ARG, "an unmatched ')'");
    int start = x.st == TS_OK ? nfa_new(&x) : -1;
    int accept = start >= 0 ? nfa_build(&x, root, start) : -1;
    free(x.nodes);
    nfa->s = x.nfa;
    nfa->n = x.n_nfa;
    nfa->sets = x.sets;
    nfa->n_sets = x.n_sets;
    nfa->start = start;
    nfa->accept = accept;
    if (x.st == TS_OK && accept < 0)
        rx_fail(&x, TS_ERR_INTERNAL, "could not be built");
    return x.st;
}
