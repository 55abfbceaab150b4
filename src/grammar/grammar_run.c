/* grammar_run.c: the state of a ts_grammar as text is read: a set of parse stacks (the
 * positions to return to, the top one waiting on a character), expanded through rules
 * until each waits on a character, and a partial UTF-8 character while one is read. */
#include <string.h>

#include "grammar/grammar.h"

/* Expanding into a state under construction. */
typedef struct build {
    const ts_grammar *g;
    gr_state *to;
    int work;     /* expansions so far */
    uint32_t cost; /* work units: expansions plus stacks compared */
    bool overrun; /* work went past GR_MAX_EXPAND */
    bool dropped; /* a stack was dropped at a bound */
} build;

size_t gr_state_size(const gr_state *st)
{
    return offsetof(gr_state, cells) + (size_t)st->n_cells * sizeof st->cells[0];
}

/* Adds stack stk (len positions, its top a GR_CHAR) to the state unless it is there
 * already; past GR_MAX_STACKS or GR_MAX_CELLS it is dropped. */
static void add_stack(build *b, const uint16_t *stk, int len)
{
    gr_state *to = b->to;
    b->cost += to->n_stacks + 1;
    for (int i = 0; i < len; i++) /* every frame must be able to finish within the depth */
        if (i + 1 + b->g->need[stk[i]] > GR_MAX_DEPTH) {
            b->dropped = true;
            return;
        }
    for (int k = 0, i = 0; i < to->n_stacks; i++, k += to->cells[k] + 1)
        if (to->cells[k] == len && to->cells[k + len] == stk[len - 1] &&
            !memcmp(to->cells + k + 1, stk, (size_t)len * 2))
            return;
    if (to->n_stacks >= GR_MAX_STACKS || to->n_cells + len + 1 > GR_MAX_CELLS) {
        b->dropped = true;
        return;
    }
    to->cells[to->n_cells] = (uint16_t)len;
    memcpy(to->cells + to->n_cells + 1, stk, (size_t)len * 2);
    to->n_cells = (uint16_t)(to->n_cells + len + 1);
    to->n_stacks++;
}

static void expand(build *b, const uint16_t *stk, int len);

/* Pushes each alternative of rule onto stk (len positions, with room for one more). */
static void expand_rule(build *b, uint16_t *stk, int len, uint32_t rule)
{
    const ts_grammar *g = b->g;
    if (len >= GR_MAX_DEPTH) {
        b->dropped = true; /* too deep: this parse is dropped */
        return;
    }
    /* Alternatives that start with a character first (each is one stack, at once), then
     * the others, each in the compiled order (cheapest first): a long chain of optional
     * rules then leaves a stack at every level before the work bound, never none. */
    const gr_rule *r = &g->rules[rule];
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t a = 0; a < r->n; a++) {
            uint32_t p = g->alts[r->first + a];
            if ((g->code[p].op == GR_CHAR) != (pass == 0))
                continue;
            stk[len] = (uint16_t)p;
            expand(b, stk, len + 1);
        }
}

/* Brings stack stk (len positions) to stacks whose tops are characters: finished
 * alternatives return to the position below, rules are replaced by their alternatives
 * (a rule at the end of an alternative returns straight to the one below: repetitions
 * do not deepen the stack). An empty stack is a complete parse. */
static void expand(build *b, const uint16_t *stk, int len)
{
    const gr_elem *code = b->g->code;
    if (b->work >= GR_MAX_EXPAND) {
        b->overrun = true; /* the parses found so far are kept */
        return;
    }
    b->work++;
    b->cost++;
    while (len > 0 && code[stk[len - 1]].op == GR_END)
        len--;
    if (len == 0) {
        b->to->accept = 1;
        return;
    }
    uint32_t p = stk[len - 1];
    if (code[p].op == GR_CHAR) {
        add_stack(b, stk, len);
        return;
    }
    uint16_t next[GR_MAX_DEPTH + 1];
    memcpy(next, stk, (size_t)len * 2);
    next[len - 1] = (uint16_t)(p + 1);
    int n = len;
    while (n > 0 && code[next[n - 1]].op == GR_END)
        n--;
    expand_rule(b, next, n, code[p].a);
}

static void clear(gr_state *st)
{
    memset(st, 0, offsetof(gr_state, cells));
}

bool gr_init(gr_state *st, const ts_grammar *g)
{
    clear(st);
    build b = {.g = g, .to = st};
    uint16_t stk[GR_MAX_DEPTH + 1];
    expand_rule(&b, stk, 0, (uint32_t)g->root);
    return !b.overrun && !b.dropped && (st->n_stacks || st->accept);
}

static bool char_has(const ts_grammar *g, const gr_elem *e, uint32_t lo, uint32_t hi)
{
    const gr_range *r = g->ranges + e->a;
    for (uint32_t i = 0; i < e->n; i++)
        if (r[i].lo <= hi && r[i].hi >= lo)
            return true;
    return false;
}

/* The cost of the stack at cell k of st (a partial character counts its bytes left). */
static uint64_t stack_cost(const ts_grammar *g, const gr_state *st, int k)
{
    int len = st->cells[k];
    const uint16_t *stk = st->cells + k + 1;
    uint64_t c = st->more ? st->more + g->rest[stk[len - 1] + 1] : g->rest[stk[len - 1]];
    for (int f = 0; f < len - 1; f++)
        c += g->rest[stk[f]];
    return c;
}

/* The cell of st's cheapest stack, -1 for none. */
static int cheapest(const ts_grammar *g, const gr_state *st)
{
    int best = -1;
    uint64_t best_cost = UINT64_MAX;
    for (int k = 0, i = 0; i < st->n_stacks; i++, k += st->cells[k] + 1) {
        uint64_t c = stack_cost(g, st, k);
        if (c < best_cost)
            best = k, best_cost = c;
    }
    return best;
}

/* Moves stack stk (len positions) into b if its top character can be a code point of
 * [lo, hi]: past the character when lo == hi and the character is whole (done),
 * unchanged otherwise. */
static void take_stack(build *b, const uint16_t *stk, int len, uint32_t lo, uint32_t hi,
                       bool done)
{
    if (!char_has(b->g, &b->g->code[stk[len - 1]], lo, hi))
        return;
    if (!done) {
        add_stack(b, stk, len);
        return;
    }
    uint16_t next[GR_MAX_DEPTH + 1];
    memcpy(next, stk, (size_t)len * 2);
    next[len - 1]++;
    expand(b, next, len);
}

/* take_stack for every stack of from, the cheapest first, so that the bounds which drop
 * parses never drop the cheapest completion. */
static void take(build *b, const gr_state *from, uint32_t lo, uint32_t hi, bool done)
{
    int first = cheapest(b->g, from);
    if (first >= 0)
        take_stack(b, from->cells + first + 1, from->cells[first], lo, hi, done);
    for (int k = 0, i = 0; i < from->n_stacks; i++, k += from->cells[k] + 1)
        if (k != first)
            take_stack(b, from->cells + k + 1, from->cells[k], lo, hi, done);
}

/* The code points a UTF-8 lead byte c may begin ([*lo, *hi]), its continuation count and
 * payload bits; false for a byte that begins no character. */
static bool lead_byte(uint8_t c, int *more, uint32_t *bits, uint32_t *lo, uint32_t *hi)
{
    static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
    int n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 0;
    if (!n)
        return false;
    *more = n;
    *bits = c & (0x3Fu >> n);
    *lo = *bits << (6 * n);
    *hi = *lo | ((1u << (6 * n)) - 1);
    if (*lo < least[n])
        *lo = least[n];
    if (*hi > 0x10FFFF)
        *hi = 0x10FFFF;
    if (*lo < 0xD800 && *hi >= 0xD800 && *hi <= 0xDFFF)
        *hi = 0xD7FF;
    return *lo <= *hi;
}

static bool advance(build *b, const gr_state *from, uint8_t c);

bool gr_step(const ts_grammar *g, const gr_state *from, uint8_t c, gr_state *to)
{
    uint32_t work = 0;
    return gr_step_work(g, from, c, to, &work);
}

bool gr_step_work(const ts_grammar *g, const gr_state *from, uint8_t c, gr_state *to,
                  uint32_t *work)
{
    clear(to);
    build b = {.g = g, .to = to};
    bool ok = advance(&b, from, c);
    *work += b.cost + from->n_stacks + 1;
    return ok;
}

/* gr_step into b->to. */
static bool advance(build *b, const gr_state *from, uint8_t c)
{
    gr_state *to = b->to;
    if (from->more == 0) {
        if (c < 0x80) {
            take(b, from, c, c, true);
        } else {
            int more;
            if (!lead_byte(c, &more, &to->cp, &to->lo, &to->hi))
                return false;
            to->more = (uint8_t)more;
            take(b, from, to->lo, to->hi, false);
        }
    } else {
        if ((c & 0xC0) != 0x80)
            return false;
        int more = from->more - 1;
        uint32_t cp = from->cp << 6 | (c & 0x3Fu);
        uint32_t lo = cp << (6 * more), hi = lo | ((1u << (6 * more)) - 1);
        if (lo < from->lo)
            lo = from->lo;
        if (hi > from->hi)
            hi = from->hi;
        if (lo > hi)
            return false;
        if (more) {
            to->more = (uint8_t)more;
            to->cp = cp;
            to->lo = lo;
            to->hi = hi;
        }
        take(b, from, lo, hi, more == 0);
    }
    return to->n_stacks || to->accept;
}

bool gr_can_end(const gr_state *st)
{
    return st->accept && !st->more;
}

bool gr_done(const gr_state *st)
{
    return gr_can_end(st) && st->n_stacks == 0;
}

bool gr_same(const gr_state *a, const gr_state *b)
{
    return a->n_stacks == b->n_stacks && a->n_cells == b->n_cells && a->more == b->more &&
           a->accept == b->accept && a->cp == b->cp && a->lo == b->lo && a->hi == b->hi &&
           !memcmp(a->cells, b->cells, (size_t)a->n_cells * sizeof a->cells[0]);
}

uint32_t gr_cost(const ts_grammar *g, const gr_state *st)
{
    if (gr_can_end(st))
        return 0;
    int k = cheapest(g, st);
    if (k < 0)
        return GR_COST_NEVER;
    uint64_t c = stack_cost(g, st, k);
    return c < GR_COST_NEVER ? (uint32_t)c : GR_COST_NEVER;
}
