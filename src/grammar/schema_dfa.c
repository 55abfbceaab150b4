/* schema_dfa.c: a pattern's NFA determinized into a DFA over ranges of code points (only
 * the code points a generated JSON string can hold), the table of lengths each state can
 * still end in, and the queries a string being read makes of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"
#include "grammar/schema_nfa.h"

enum {
    DFA_MAX_STATES = 256,
    DFA_MAX_MIN_LEN = 4096, /* minLength beside a pattern: the length table grows with it */
};

/* The code points our JSON strings hold: of the controls only those with a short escape
 * (\b \t \n \f \r; \u escapes are never generated), and no surrogates. */
static const sch_range emittable[] = {{8, 10}, {12, 13}, {0x20, 0xD7FF}, {0xE000, 0x10FFFF}};

typedef struct det {
    const sch_nfa *nfa;
    int words;        /* 64-bit words of an NFA state set */
    uint64_t *sets;   /* (DFA_MAX_STATES * words) the NFA states of each DFA state */
    int n_states;
    sch_dfa_tr *tr;
    uint32_t n_tr, cap_tr;
    uint32_t *first;  /* (DFA_MAX_STATES + 1) */
    bool *accept;     /* (DFA_MAX_STATES) */
    int *stack;       /* (nfa->n) closure work */
    uint32_t *bounds; /* range ends of one state's edges */
    size_t cap_bounds;
} det;

static bool has_bit(const uint64_t *set, int i) { return (set[i >> 6] >> (i & 63)) & 1; }

/* Adds to set everything reachable from its members by empty edges. */
static void closure(det *d, uint64_t *set)
{
    int n = 0;
    for (int i = 0; i < d->nfa->n; i++)
        if (has_bit(set, i))
            d->stack[n++] = i;
    while (n > 0) {
        const sch_nfa_state *s = &d->nfa->s[d->stack[--n]];
        for (int e = 0; e < 2; e++) {
            int t = s->eps[e];
            if (t >= 0 && !has_bit(set, t)) {
                set[t >> 6] |= 1ull << (t & 63);
                d->stack[n++] = t;
            }
        }
    }
}

/* The DFA state of NFA set (closed), added when new; -1 when there are too many. */
static int state_of(det *d, const uint64_t *set)
{
    size_t bytes = (size_t)d->words * sizeof(uint64_t);
    for (int i = 0; i < d->n_states; i++)
        if (!memcmp(d->sets + (size_t)i * d->words, set, bytes))
            return i;
    if (d->n_states == DFA_MAX_STATES)
        return -1;
    memcpy(d->sets + (size_t)d->n_states * d->words, set, bytes);
    d->accept[d->n_states] = has_bit(set, d->nfa->accept);
    return d->n_states++;
}

static bool add_bound(det *d, uint32_t b)
{
    size_t n = d->bounds[0];
    if (n + 1 >= d->cap_bounds) {
        size_t cap = d->cap_bounds * 2;
        uint32_t *g = realloc(d->bounds, cap * sizeof *g);
        if (!g)
            return false;
        d->bounds = g;
        d->cap_bounds = cap;
    }
    d->bounds[++d->bounds[0]] = b;
    return true;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool add_tr(det *d, uint32_t lo, uint32_t hi, int to, uint32_t first)
{
    if (d->n_tr > first && d->tr[d->n_tr - 1].to == to && d->tr[d->n_tr - 1].hi + 1 == lo) {
        d->tr[d->n_tr - 1].hi = hi;
        return true;
    }
    if (d->n_tr == d->cap_tr) {
        uint32_t cap = d->cap_tr ? 2 * d->cap_tr : 64;
        sch_dfa_tr *g = realloc(d->tr, cap * sizeof *g);
        if (!g)
            return false;
        d->tr = g;
        d->cap_tr = cap;
    }
    d->tr[d->n_tr++] = (sch_dfa_tr){lo, hi, (uint16_t)to};
    return true;
}

/* The transitions of DFA state q: the code line is cut at every edge's range ends, and each
 * piece that a generated string can hold goes where its NFA edges go. */
static ts_status expand(det *d, int q, uint64_t *scratch)
{
    const sch_nfa *nfa = d->nfa;
    const uint64_t *set = d->sets + (size_t)q * d->words;
    d->bounds[0] = 0;
    bool ok = true;
    for (size_t e = 0; e < sizeof emittable / sizeof emittable[0] && ok; e++)
        ok = add_bound(d, emittable[e].lo) && add_bound(d, emittable[e].hi + 1);
    for (int i = 0; i < nfa->n && ok; i++) {
        if (!has_bit(set, i) || nfa->s[i].set < 0)
            continue;
        const sch_cset *c = &nfa->sets[nfa->s[i].set];
        for (int r = 0; r < c->n && ok; r++)
            ok = add_bound(d, c->r[r].lo) && add_bound(d, c->r[r].hi + 1);
    }
    if (!ok)
        return TS_ERR_NOMEM;
    uint32_t nb = d->bounds[0], *b = d->bounds + 1;
    qsort(b, nb, sizeof *b, u32_cmp);
    d->first[q] = d->n_tr;
    size_t e = 0, n_emit = sizeof emittable / sizeof emittable[0];
    for (uint32_t k = 0; k + 1 < nb; k++) {
        uint32_t lo = b[k], hi = b[k + 1] - 1;
        if (b[k + 1] == b[k])
            continue;
        while (e < n_emit && emittable[e].hi < lo)
            e++;
        if (e == n_emit || emittable[e].lo > lo)
            continue; /* a piece no generated string holds */
        memset(scratch, 0, (size_t)d->words * sizeof *scratch);
        bool any = false;
        for (int i = 0; i < nfa->n; i++) {
            const sch_nfa_state *s = &nfa->s[i];
            if (!has_bit(set, i) || s->set < 0)
                continue;
            const sch_cset *c = &nfa->sets[s->set];
            for (int r = 0; r < c->n; r++)
                if (c->r[r].lo <= lo && lo <= c->r[r].hi) {
                    scratch[s->to >> 6] |= 1ull << (s->to & 63);
                    any = true;
                    break;
                }
        }
        if (!any)
            continue;
        closure(d, scratch);
        int to = state_of(d, scratch);
        if (to < 0)
            return TS_ERR_TOO_LONG;
        if (!add_tr(d, lo, hi, to, d->first[q]))
            return TS_ERR_NOMEM;
    }
    return TS_OK;
}

/* dfa->feas: bit k of state s when an accepting state is k code points away. */
static ts_status lengths(sch_dfa *dfa, const bool *accept, uint32_t min_len)
{
    dfa->k_max = min_len + (uint32_t)dfa->n_states;
    dfa->words = dfa->k_max / 64 + 1;
    dfa->feas = calloc((size_t)dfa->n_states * dfa->words, sizeof(uint64_t));
    if (!dfa->feas)
        return TS_ERR_NOMEM;
    for (int s = 0; s < dfa->n_states; s++)
        if (accept[s])
            dfa->feas[(size_t)s * dfa->words] |= 1;
    for (uint32_t k = 1; k <= dfa->k_max; k++)
        for (int s = 0; s < dfa->n_states; s++)
            for (uint32_t t = dfa->first[s]; t < dfa->first[s + 1]; t++) {
                const uint64_t *row = dfa->feas + (size_t)dfa->tr[t].to * dfa->words;
                if ((row[(k - 1) >> 6] >> ((k - 1) & 63)) & 1) {
                    dfa->feas[(size_t)s * dfa->words + (k >> 6)] |= 1ull << (k & 63);
                    break;
                }
            }
    return TS_OK;
}

ts_status schema__regex_compile(const char *pattern, size_t len, uint32_t min_len,
                                uint32_t max_len, sch_dfa *dfa, char *msg, size_t msg_size)
{
    memset(dfa, 0, sizeof *dfa);
    if (min_len > DFA_MAX_MIN_LEN) {
        snprintf(msg, msg_size, "minLength over %d beside a pattern is not supported",
                 DFA_MAX_MIN_LEN);
        return TS_ERR_TOO_LONG;
    }
    sch_nfa nfa;
    ts_status st = schema__regex_nfa(pattern, len, &nfa, msg, msg_size);
    det d = {.nfa = &nfa, .words = nfa.n / 64 + 1};
    uint64_t *scratch = NULL;
    if (st == TS_OK) {
        d.sets = malloc((size_t)DFA_MAX_STATES * d.words * sizeof(uint64_t));
        d.first = malloc((DFA_MAX_STATES + 1) * sizeof *d.first);
        d.accept = malloc(DFA_MAX_STATES * sizeof *d.accept);
        d.stack = malloc((size_t)nfa.n * sizeof *d.stack);
        d.cap_bounds = 256;
        d.bounds = malloc(d.cap_bounds * sizeof *d.bounds);
        scratch = calloc((size_t)d.words, sizeof *scratch);
        if (!d.sets || !d.first || !d.accept || !d.stack || !d.bounds || !scratch)
            st = TS_ERR_NOMEM;
    }
    if (st == TS_OK) {
        scratch[nfa.start >> 6] |= 1ull << (nfa.start & 63);
        closure(&d, scratch);
        state_of(&d, scratch);
        for (int q = 0; q < d.n_states && st == TS_OK; q++) /* n_states grows as it goes */
            st = expand(&d, q, scratch);
        if (st == TS_ERR_TOO_LONG)
            snprintf(msg, msg_size, "pattern: too complex (over %d DFA states)", DFA_MAX_STATES);
        else if (st == TS_ERR_NOMEM)
            snprintf(msg, msg_size, "out of memory compiling a pattern");
    }
    if (st == TS_OK) {
        d.first[d.n_states] = d.n_tr;
        dfa->n_states = d.n_states;
        dfa->first = d.first;
        dfa->tr = d.tr;
        d.first = NULL;
        d.tr = NULL;
        st = lengths(dfa, d.accept, min_len);
        if (st == TS_OK && !schema__dfa_feasible(dfa, 0, 0, min_len, max_len)) {
            snprintf(msg, msg_size, "no string of %u..%u characters matches the pattern "
                     "(as generated: see docs/API.md)", min_len, max_len);
            st = TS_ERR_INVALID_ARG;
        }
    }
    free(scratch);
    free(d.sets);
    free(d.first);
    free(d.accept);
    free(d.stack);
    free(d.bounds);
    free(d.tr);
    schema__nfa_free(&nfa);
    if (st != TS_OK)
        schema__dfa_free(dfa);
    return st;
}

void schema__dfa_free(sch_dfa *dfa)
{
    free(dfa->first);
    free(dfa->tr);
    free(dfa->feas);
    memset(dfa, 0, sizeof *dfa);
}

int schema__dfa_next(const sch_dfa *d, int s, uint32_t cp)
{
    uint32_t lo = d->first[s], hi = d->first[s + 1];
    while (lo < hi) {
        uint32_t m = (lo + hi) / 2;
        if (cp < d->tr[m].lo)
            hi = m;
        else if (cp > d->tr[m].hi)
            lo = m + 1;
        else
            return d->tr[m].to;
    }
    return -1;
}

bool schema__dfa_feasible(const sch_dfa *d, int s, uint32_t count, uint32_t min,
                          uint32_t max)
{
    if (count > max)
        return false;
    /* Lengths lo..hi more; a path longer than lo + n_states - 1 has a loop to cut out, so
     * looking that far is enough (and within k_max: lo <= min_len). */
    uint32_t lo = count < min ? min - count : 0, hi = max - count;
    if (hi - lo > (uint32_t)d->n_states - 1)
        hi = lo + (uint32_t)d->n_states - 1;
    const uint64_t *row = d->feas + (size_t)s * d->words;
    for (uint32_t k = lo; k <= hi;) {
        uint64_t w = row[k >> 6] >> (k & 63);
        if (w) {
            k += (uint32_t)__builtin_ctzll(w);
            return k <= hi;
        }
        k = (k | 63) + 1;
    }
    return false;
}

bool schema__dfa_any(const sch_dfa *d, int s, uint32_t lo, uint32_t hi, uint32_t count,
                     uint32_t min, uint32_t max)
{
    for (uint32_t t = d->first[s]; t < d->first[s + 1]; t++)
        if (d->tr[t].hi >= lo && d->tr[t].lo <= hi &&
            schema__dfa_feasible(d, d->tr[t].to, count, min, max))
            return true;
    return false;
}
