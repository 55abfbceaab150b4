/* grammar_build.c: building a ts_grammar (rules, alternatives, code-point sets,
 * repetitions as new rules), the checks every grammar passes, and its closing costs. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

/* Grows *p (elements of size sz, capacity *cap) to hold need; false when out of memory. */
static bool grow(void **p, int *cap, int need, size_t sz)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * sz);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

ts_grammar *grammar__new(void)
{
    ts_grammar *g = calloc(1, sizeof *g);
    if (g)
        atomic_init(&g->refs, 1);
    return g;
}

void grammar__free(ts_grammar *g)
{
    if (!g)
        return;
    free(g->code);
    free(g->ranges);
    free(g->alts);
    free(g->rules);
    free(g->rest);
    free(g->rule_min);
    free(g->need);
    free(g);
}

ts_grammar *ts_grammar_retain(ts_grammar *g)
{
    if (g)
        atomic_fetch_add(&g->refs, 1);
    return g;
}

void ts_grammar_release(ts_grammar *g)
{
    if (g && atomic_fetch_sub(&g->refs, 1) == 1)
        grammar__free(g);
}

int grammar__add_rule(ts_grammar *g)
{
    if (g->n_rules >= GR_MAX_RULES ||
        !grow((void **)&g->rules, &g->cap_rules, g->n_rules + 1, sizeof *g->rules))
        return -1;
    g->rules[g->n_rules] = (gr_rule){0, 0};
    return g->n_rules++;
}

bool grammar__seq_push(gr_seq *s, gr_elem e)
{
    if (s->n >= GR_MAX_ELEMS || !grow((void **)&s->e, &s->cap, s->n + 1, sizeof *s->e))
        return false;
    s->e[s->n++] = e;
    return true;
}

void grammar__seq_free(gr_seq *s)
{
    free(s->e);
    *s = (gr_seq){0};
}

/* An alternative is recorded with its rule in rules[].n counting it and the rule's index
 * kept in the alternative's GR_END element (a), so grammar__finish can group them. */
bool grammar__add_alt(ts_grammar *g, int rule, const gr_seq *s)
{
    int need = g->n_code + s->n + 1;
    if (need > GR_MAX_ELEMS || !grow((void **)&g->code, &g->cap_code, need, sizeof *g->code) ||
        !grow((void **)&g->alts, &g->cap_alts, g->n_alts + 1, sizeof *g->alts))
        return false;
    g->alts[g->n_alts++] = (uint32_t)g->n_code;
    if (s->n)
        memcpy(g->code + g->n_code, s->e, (size_t)s->n * sizeof *s->e);
    g->n_code += s->n;
    g->code[g->n_code++] = (gr_elem){GR_END, (uint32_t)rule, 0};
    g->rules[rule].n++;
    return true;
}

static int cmp_range(const void *a, const void *b)
{
    const gr_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges r (n) in place; the new count. */
static int normalise(gr_range *r, int n)
{
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].lo > r[i].hi)
            continue;
        if (k && r[i].lo <= r[k - 1].hi + 1) {
            if (r[i].hi > r[k - 1].hi)
                r[k - 1].hi = r[i].hi;
        } else {
            r[k++] = r[i];
        }
    }
    return k;
}

/* Appends r's ranges minus the surrogates (which no UTF-8 text holds) to g->ranges. */
static bool append_ranges(ts_grammar *g, const gr_range *r, int n)
{
    for (int i = 0; i < n; i++) {
        gr_range parts[2] = {r[i], {1, 0}};
        if (r[i].lo <= 0xDFFF && r[i].hi >= 0xD800) {
            parts[0] = (gr_range){r[i].lo, 0xD7FF};
            parts[1] = (gr_range){0xE000, r[i].hi};
        }
        for (int k = 0; k < 2; k++) {
            if (parts[k].lo > parts[k].hi || parts[k].hi > 0x10FFFF)
                continue;
            if (!grow((void **)&g->ranges, &g->cap_ranges, g->n_ranges + 1, sizeof *g->ranges))
                return false;
            g->ranges[g->n_ranges++] = parts[k];
        }
    }
    return true;
}

bool grammar__char_elem(ts_grammar *g, const gr_range *ranges, int n, bool negate,
                        gr_elem *out)
{
    gr_range *r = malloc(((size_t)n + 1) * sizeof *r);
    if (!r)
        return false;
    if (n)
        memcpy(r, ranges, (size_t)n * sizeof *r);
    for (int i = 0; i < n; i++)
        if (r[i].hi > 0x10FFFF)
            r[i].hi = 0x10FFFF;
    n = normalise(r, n);
    if (negate) { /* the complement within [0, 0x10FFFF] */
        gr_range *c = malloc(((size_t)n + 1) * sizeof *c);
        if (!c) {
            free(r);
            return false;
        }
        int k = 0;
        uint32_t from = 0;
        for (int i = 0; i < n; i++) {
            if (r[i].lo > from)
                c[k++] = (gr_range){from, r[i].lo - 1};
            from = r[i].hi + 1;
        }
        if (from <= 0x10FFFF)
            c[k++] = (gr_range){from, 0x10FFFF};
        free(r);
        r = c;
        n = k;
    }
    uint32_t first = (uint32_t)g->n_ranges;
    bool ok = append_ranges(g, r, n);
    free(r);
    *out = (gr_elem){GR_CHAR, first, (uint32_t)g->n_ranges - first};
    return ok;
}

bool grammar__repeat(ts_grammar *g, gr_elem e, uint32_t min, uint32_t max, gr_seq *out)
{
    for (uint32_t i = 0; i < min; i++)
        if (!grammar__seq_push(out, e))
            return false;
    if (max == min)
        return true;
    gr_seq alt = {0}, empty = {0};
    int prev = -1;
    uint32_t links = max == UINT32_MAX ? 1 : max - min;
    bool ok = true;
    /* Unbounded: R ::= e R | "" (R refers to itself). Bounded: R1 ::= e | "",
     * Rk ::= e R(k-1) | "", so at most max - min more. */
    for (uint32_t k = 0; k < links && ok; k++) {
        int r = grammar__add_rule(g);
        alt.n = 0;
        ok = r >= 0 && grammar__seq_push(&alt, e);
        if (ok && max == UINT32_MAX)
            ok = grammar__seq_push(&alt, (gr_elem){GR_REF, (uint32_t)r, 0});
        else if (ok && prev >= 0)
            ok = grammar__seq_push(&alt, (gr_elem){GR_REF, (uint32_t)prev, 0});
        ok = ok && grammar__add_alt(g, r, &alt) && grammar__add_alt(g, r, &empty);
        prev = r;
    }
    grammar__seq_free(&alt);
    return ok && grammar__seq_push(out, (gr_elem){GR_REF, (uint32_t)prev, 0});
}

int grammar__utf8_decode(const char *s, size_t len, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    int n = u[0] < 0x80 ? 1 : (u[0] & 0xE0) == 0xC0 ? 2 : (u[0] & 0xF0) == 0xE0 ? 3
          : (u[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (size_t)n > len)
        return 0;
    uint32_t v = n == 1 ? u[0] : u[0] & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (u[i] & 0x3Fu);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* ---- finishing */

static uint32_t utf8_len(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

static uint32_t add_cost(uint32_t a, uint32_t b)
{
    return a + b >= GR_COST_NEVER ? GR_COST_NEVER : a + b;
}

static uint32_t elem_cost(const ts_grammar *g, const gr_elem *e)
{
    switch (e->op) {
    case GR_CHAR: return e->n ? utf8_len(g->ranges[e->a].lo) : GR_COST_NEVER;
    case GR_REF: return g->rule_min[e->a];
    default: return 0;
    }
}

/* The frames finishing from each position needs (ts_grammar.need): a rule reference
 * followed by more elements keeps its frame and stacks the rule's own need on it; one
 * at the end of an alternative replaces the frame (expansion pops it first). Relaxed
 * until nothing changes, from "more than a stack holds" down. */
static void depth_needs(ts_grammar *g, uint16_t *rule_need)
{
    const uint16_t never = GR_MAX_DEPTH + 1;
    for (int r = 0; r < g->n_rules; r++)
        rule_need[r] = never;
    for (bool changed = true; changed;) {
        changed = false;
        for (int p = g->n_code - 1; p >= 0; p--) {
            const gr_elem *e = &g->code[p];
            uint32_t here = 0;
            if (e->op == GR_REF)
                here = rule_need[e->a] + (g->code[p + 1].op != GR_END);
            uint32_t after = e->op == GR_END ? 0 : g->need[p + 1];
            uint32_t v = here > after ? here : after;
            g->need[p] = (uint16_t)(v > never ? never : v);
        }
        for (int r = 0; r < g->n_rules; r++) {
            const gr_rule *ru = &g->rules[r];
            for (uint32_t a = 0; a < ru->n; a++)
                if (g->need[g->alts[ru->first + a]] < rule_need[r]) {
                    rule_need[r] = g->need[g->alts[ru->first + a]];
                    changed = true;
                }
        }
    }
}

/* Groups the alternatives by rule (rules[].first/n), stably. */
static bool group_alts(ts_grammar *g)
{
    uint32_t *sorted = malloc(((size_t)g->n_alts + 1) * sizeof *sorted);
    if (!sorted)
        return false;
    uint32_t at = 0;
    for (int r = 0; r < g->n_rules; r++) {
        g->rules[r].first = at;
        at += g->rules[r].n;
        g->rules[r].n = 0;
    }
    for (int i = 0; i < g->n_alts; i++) {
        uint32_t p = g->alts[i], e = p;
        while (g->code[e].op != GR_END)
            e++;
        gr_rule *r = &g->rules[g->code[e].a];
        sorted[r->first + r->n++] = p;
    }
    free(g->alts);
    g->alts = sorted;
    return true;
}

/* Shortest text of every rule: relaxed until nothing changes. */
static void rule_costs(ts_grammar *g)
{
    for (int r = 0; r < g->n_rules; r++)
        g->rule_min[r] = GR_COST_NEVER;
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = g->n_rules - 1; r >= 0; r--) {
            const gr_rule *ru = &g->rules[r];
            for (uint32_t a = 0; a < ru->n; a++) {
                uint32_t c = 0;
                for (uint32_t p = g->alts[ru->first + a]; g->code[p].op != GR_END; p++)
                    c = add_cost(c, elem_cost(g, &g->code[p]));
                if (c < g->rule_min[r]) {
                    g->rule_min[r] = c;
                    changed = true;
                }
            }
        }
    }
}

static const char *rule_name(const char *const *names, int r)
{
    return names && names[r] ? names[r] : "(a group or repetition)";
}

typedef struct check {
    ts_grammar *g;
    const char *const *names;
    uint8_t *color; /* reach: 0 unseen, 1 seen; left: 2 on the path, 3 done */
    ts_error *err;
} check;

/* Marks the rules reachable from r (an explicit stack: a grammar may chain thousands of
 * rules); each must be able to end. */
static ts_status reach(check *c, int r, int *stack)
{
    const ts_grammar *g = c->g;
    int n = 0;
    stack[n++] = r;
    c->color[r] = 1;
    while (n) {
        int x = stack[--n];
        if (g->rule_min[x] >= GR_COST_NEVER)
            return ts_error_set(c->err, TS_ERR_INVALID_ARG,
                                "grammar rule '%s' can never end (every alternative needs "
                                "itself)", rule_name(c->names, x));
        const gr_rule *ru = &g->rules[x];
        for (uint32_t a = 0; a < ru->n; a++)
            for (uint32_t p = g->alts[ru->first + a]; g->code[p].op != GR_END; p++)
                if (g->code[p].op == GR_REF && !c->color[g->code[p].a]) {
                    c->color[g->code[p].a] = 1;
                    stack[n++] = (int)g->code[p].a;
                }
    }
    return TS_OK;
}

/* Follows the left edges of r (rules an alternative starts with, after elements that
 * can match nothing): reaching a rule on the path is left recursion, whose expansion
 * would never read a byte. */
static ts_status left_walk(check *c, int r, int depth)
{
    const ts_grammar *g = c->g;
    if (depth > 2000)
        return ts_error_set(c->err, TS_ERR_TOO_LONG, "grammar rules nest too deeply");
    c->color[r] = 2;
    const gr_rule *ru = &g->rules[r];
    for (uint32_t a = 0; a < ru->n; a++) {
        for (uint32_t p = g->alts[ru->first + a]; g->code[p].op != GR_END; p++) {
            const gr_elem *e = &g->code[p];
            if (e->op == GR_REF) {
                if (c->color[e->a] == 2)
                    return ts_error_set(c->err, TS_ERR_INVALID_ARG,
                                        "grammar rule '%s' is left-recursive",
                                        rule_name(c->names, (int)e->a));
                if (c->color[e->a] == 1) {
                    ts_status st = left_walk(c, (int)e->a, depth + 1);
                    if (st != TS_OK)
                        return st;
                }
            }
            if (elem_cost(g, e) != 0)
                break;
        }
    }
    c->color[r] = 3;
    return TS_OK;
}

/* Orders each rule's alternatives by the bytes of their shortest text, cheapest first
 * (stably): expansion then meets a cheapest parse first, and a bound that drops parses
 * drops the dearer ones, which keeps the closing cost exact. */
static void order_alts(ts_grammar *g)
{
    for (int r = 0; r < g->n_rules; r++) {
        uint32_t *a = g->alts + g->rules[r].first;
        for (uint32_t i = 1; i < g->rules[r].n; i++) /* insertion: rules have few */
            for (uint32_t j = i; j > 0 && g->rest[a[j]] < g->rest[a[j - 1]]; j--) {
                uint32_t t = a[j];
                a[j] = a[j - 1];
                a[j - 1] = t;
            }
    }
}

ts_status grammar__finish(ts_grammar *g, const char *const *names, ts_error *err)
{
    g->rest = malloc(((size_t)g->n_code + 1) * sizeof *g->rest);
    g->rule_min = malloc(((size_t)g->n_rules + 1) * sizeof *g->rule_min);
    g->need = calloc((size_t)g->n_code + 1, sizeof *g->need);
    uint8_t *color = calloc((size_t)g->n_rules + 1, 1);
    int *stack = malloc(((size_t)g->n_rules + 1) * sizeof *stack);
    if (!g->rest || !g->rule_min || !g->need || !color || !stack || !group_alts(g)) {
        free(color);
        free(stack);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a grammar");
    }
    rule_costs(g);
    uint16_t *rule_need = malloc(((size_t)g->n_rules + 1) * sizeof *rule_need);
    if (!rule_need) {
        free(color);
        free(stack);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a grammar");
    }
    depth_needs(g, rule_need);
    free(rule_need);
    check c = {g, names, color, err};
    ts_status st = reach(&c, g->root, stack);
    for (int r = 0; r < g->n_rules && st == TS_OK; r++)
        if (color[r] == 1)
            st = left_walk(&c, r, 0);
    free(color);
    free(stack);
    if (st != TS_OK)
        return st;
    uint32_t max_rest = 0;
    for (int p = g->n_code - 1; p >= 0; p--) {
        g->rest[p] = g->code[p].op == GR_END
                         ? 0 : add_cost(elem_cost(g, &g->code[p]), g->rest[p + 1]);
        if (g->rest[p] < GR_COST_NEVER && g->rest[p] > max_rest)
            max_rest = g->rest[p];
    }
    g->max_cost = (uint32_t)add_cost((uint32_t)GR_MAX_DEPTH * max_rest, 4);
    order_alts(g);
    gr_state *start = malloc(sizeof *start);
    if (!start)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling a grammar");
    bool ok = gr_init(start, g);
    free(start);
    if (!ok)
        return ts_error_set(err, TS_ERR_TOO_LONG,
                            "grammar: its start expands to too many parses or nests too "
                            "deeply (limits %d parses, %d open rules)", GR_MAX_STACKS,
                            GR_MAX_DEPTH);
    return TS_OK;
}
