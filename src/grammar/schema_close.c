/* schema_close.c: what finishing a JSON Schema value takes from a state of its automaton,
 * in bytes of compact JSON: the value being read finished, then each open container given
 * the properties or items it still requires and its closer. The engine keeps this within
 * the tokens left, so a schema answer closes before max_tokens. Values are written as
 * short as the schema allows: no whitespace, the fewest characters, digits and items. */
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"

enum {
    NUM_EXACT_DEPTH = 3,     /* bytes over which a number's shortest ending is exact */
    NUM_SEARCH_DEPTH = 24,   /* bytes a number's ending is searched over */
    NUM_SEARCH_BUDGET = 2048, /* states one search visits at most */
    CHECKED_BUDGET = 4096,   /* states a checked string's search visits at most */
};

static uint32_t add(uint32_t a, uint32_t b)
{
    uint64_t c = (uint64_t)a + b;
    return c >= SCH_COST_NEVER ? SCH_COST_NEVER : (uint32_t)c;
}

static uint32_t least(uint32_t a, uint32_t b) { return a < b ? a : b; }

static uint32_t shortest(const ts_schema *s, int node)
{
    return node == SCH_NO_NODE ? SCH_COST_NEVER : s->shortest[node];
}

/* ---- values being read */

/* Bytes of the cheapest code point in [lo, hi] inside a JSON string: printable ASCII 1,
 * a quote, backslash or control character 2 (escaped), others their UTF-8 length. */
static uint32_t cp_bytes(uint32_t lo, uint32_t hi)
{
    if (lo < 0x80) {
        for (uint32_t cp = lo < 0x20 ? 0x20 : lo; cp <= hi && cp < 0x80; cp++)
            if (cp != '"' && cp != '\\')
                return 1;
        return 2; /* escaped, or U+0080 and up */
    }
    return lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
}

/* Bytes more a string of node n needs after count code points read, its pattern (if
 * any) in state st, for the pattern and the length bounds to allow its end: the fewest
 * code points, each the cheapest one that keeps that length feasible. */
static uint32_t str_rest(const sch_node *n, const ts_schema *s, int st, uint32_t count)
{
    uint32_t min = n->u.str.min, max = n->u.str.max;
    uint32_t lo = count < min ? min - count : 0;
    if (n->u.str.dfa < 0)
        return count + lo <= max ? lo : SCH_COST_NEVER;
    const sch_dfa *d = &s->dfas[n->u.str.dfa];
    for (uint32_t k = lo; k <= lo + (uint32_t)d->n_states && count + k <= max; k++) {
        uint32_t end = count + k, bytes = 0;
        if (!schema__dfa_feasible(d, st, count, end, end))
            continue;
        for (uint32_t i = count; i < end; i++) {
            uint32_t best = SCH_COST_NEVER, next = 0;
            for (uint32_t t = d->first[st]; t < d->first[st + 1]; t++) {
                uint32_t b = cp_bytes(d->tr[t].lo, d->tr[t].hi);
                if (b < best && schema__dfa_feasible(d, d->tr[t].to, i + 1, end, end))
                    best = b, next = d->tr[t].to;
            }
            if (best == SCH_COST_NEVER)
                return SCH_COST_NEVER;
            bytes += best;
            st = (int)next;
        }
        return bytes;
    }
    return SCH_COST_NEVER;
}

/* As str_rest after one more code point cp (its bytes not counted). */
static uint32_t char_rest(const sch_node *n, const ts_schema *s, int st, uint32_t count,
                          uint32_t cp)
{
    if (n->u.str.dfa >= 0) {
        st = schema__dfa_next(&s->dfas[n->u.str.dfa], st, cp);
        if (st < 0)
            return SCH_COST_NEVER;
    }
    return str_rest(n, s, st, count + 1);
}

/* Bytes of one more code point and the rest, over a few candidates for it (each range's
 * first two), so a string whose text so far is excluded can go on to another. */
static uint32_t str_more(const sch_node *n, const ts_schema *s, int st, uint32_t count)
{
    if (n->u.str.dfa < 0)
        return add(1, char_rest(n, s, st, count, 'a'));
    const sch_dfa *d = &s->dfas[n->u.str.dfa];
    uint32_t best = SCH_COST_NEVER;
    for (uint32_t k = d->first[st]; k < d->first[st + 1]; k++) {
        uint32_t lo = d->tr[k].lo < 0x20 ? 0x20 : d->tr[k].lo;
        for (uint32_t cp = lo; cp <= d->tr[k].hi && cp < lo + 2 && cp < 0x80; cp++)
            best = least(best, add(cp_bytes(cp, cp), char_rest(n, s, st, count, cp)));
    }
    return best;
}

/* Whether the string in q's leaf (whole characters) can end as an allowed value after
 * exactly end code points in all, each code point tried cheapest first (a few of each
 * range: one more than there are values to avoid); *bytes gets the bytes of the first
 * such ending found. The same order from the state after its first code point finds the
 * same ending, so each of its bytes takes one off. */
static bool checked_ending(const ts_schema *s, sch_path *q, uint32_t end, uint32_t tries,
                           uint32_t *bytes, int *budget)
{
    const sch_node *n = &s->nodes[q->leaf.node];
    const sch_leaf l = q->leaf;
    const sch_dfa *d = n->u.str.dfa >= 0 ? &s->dfas[n->u.str.dfa] : NULL;
    if (--*budget < 0 || (d && !schema__dfa_feasible(d, l.u.str.dfa, l.u.str.count, end, end)))
        return false;
    if (l.u.str.count == end) {
        *bytes = 0;
        return schema__leaf_allowed(s, q);
    }
    for (uint32_t cost = 1; cost <= 4; cost++) {
        uint32_t n_tr = d ? d->first[l.u.str.dfa + 1] - d->first[l.u.str.dfa] : 1;
        for (uint32_t k = 0; k < n_tr; k++) {
            uint32_t lo = d ? d->tr[d->first[l.u.str.dfa] + k].lo : 'a';
            uint32_t hi = d ? d->tr[d->first[l.u.str.dfa] + k].hi : 0x10FFFF;
            static const uint32_t base[5] = {0, 0x20, 0x80, 0x800, 0x10000};
            static const uint32_t top[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
            lo = lo < base[cost] ? base[cost] : lo;
            hi = hi > top[cost] ? top[cost] : hi;
            for (uint32_t cp = lo, tried = 0; cp <= hi && tried < tries; cp++) {
                if (cp == '"' || cp == '\\' || (cp >= 0xD800 && cp <= 0xDFFF))
                    continue; /* escaped (two bytes), or not a character */
                tried++;
                q->leaf = l;
                uint32_t rest;
                if (schema__str_char(s, &q->leaf, cp) &&
                    checked_ending(s, q, end, tries, &rest, budget)) {
                    q->leaf = l;
                    *bytes = cost + rest;
                    return true;
                }
            }
        }
    }
    q->leaf = l;
    return false;
}

/* Bytes that end the checked string in p (whole characters) as an allowed value, over
 * lengths from the fewest on; SCH_COST_NEVER when the search finds none. */
static uint32_t checked_rest(const ts_schema *s, const sch_path *p)
{
    const sch_node *n = &s->nodes[p->leaf.node];
    uint32_t count = p->leaf.u.str.count;
    uint32_t first = count < n->u.str.min ? n->u.str.min : count;
    uint32_t tries = (uint32_t)(n->u.str.n_excl + p->n_mem) + 1;
    sch_path q = *p;
    int budget = CHECKED_BUDGET;
    for (uint32_t end = first; end <= first + 4 && end <= n->u.str.max; end++) {
        uint32_t bytes;
        if (checked_ending(s, &q, end, tries, &bytes, &budget))
            return bytes;
    }
    return SCH_COST_NEVER;
}

static uint32_t str_cost(const ts_schema *s, const sch_path *p)
{
    const sch_leaf *l = &p->leaf;
    const sch_node *n = &s->nodes[l->node];
    int st = l->u.str.dfa;
    uint32_t count = l->u.str.count, rest;
    if (l->u.str.more) { /* the character's last bytes, then what follows it */
        rest = SCH_COST_NEVER;
        if (n->u.str.dfa < 0) {
            rest = str_rest(n, s, st, count + 1);
        } else {
            const sch_dfa *d = &s->dfas[n->u.str.dfa];
            for (uint32_t k = d->first[st]; k < d->first[st + 1]; k++)
                if (d->tr[k].lo <= l->u.str.hi && d->tr[k].hi >= l->u.str.lo)
                    rest = least(rest, str_rest(n, s, d->tr[k].to, count + 1));
        }
        return add(add(l->u.str.more, rest), 1);
    }
    if (l->u.str.esc) { /* the escaped character, then what follows it */
        static const char unescaped[] = "\"\\/\b\f\n\r\t";
        rest = SCH_COST_NEVER;
        for (const char *u = unescaped; *u; u++)
            rest = least(rest, char_rest(n, s, st, count, (uint8_t)*u));
        return add(add(1, rest), 1);
    }
    if (schema__leaf_checked(s, p)) {
        rest = checked_rest(s, p);
        if (rest < SCH_COST_NEVER)
            return add(rest, 1);
    }
    rest = str_rest(n, s, st, count);
    if (rest == 0 && schema__leaf_checked(s, p) && !schema__leaf_allowed(s, p))
        rest = str_more(n, s, st, count);
    return add(rest, 1);
}

/* Whether the number in l (path p's leaf) can end as an allowed value within depth more
 * bytes. */
static bool num_ends_within(const ts_schema *s, sch_path *p, const sch_leaf *l, int depth,
                            bool checked, int *budget)
{
    const sch_node *n = &s->nodes[l->node];
    if (--*budget < 0)
        return false;
    if (schema__num_can_end(n, l)) {
        p->leaf = *l;
        if (!checked || schema__leaf_allowed(s, p))
            return true;
    }
    if (depth == 0)
        return false;
    for (const char *c = "0123456789."; *c; c++) {
        sch_leaf t = *l;
        if (schema__num_step(n, &t, (uint8_t)*c) &&
            num_ends_within(s, p, &t, depth - 1, checked, budget))
            return true;
    }
    return false;
}

/* Bytes that end the number l in path p: the fewest when within NUM_EXACT_DEPTH
 * (deepening search), else those of the first ending a depth-first search finds, digits
 * in order. Either way the byte it begins with leaves a number costing one less. */
static uint32_t num_cost(const ts_schema *s, const sch_path *p, const sch_leaf *l)
{
    sch_path q = *p;
    q.leaf = *l;
    bool checked = schema__leaf_checked(s, &q);
    int budget = NUM_SEARCH_BUDGET;
    for (int depth = 0; depth <= NUM_EXACT_DEPTH; depth++)
        if (num_ends_within(s, &q, l, depth, checked, &budget))
            return (uint32_t)depth;
    sch_leaf at = *l;
    for (uint32_t bytes = 1; bytes <= NUM_SEARCH_DEPTH; bytes++) {
        bool stepped = false;
        for (const char *c = "0123456789."; *c && !stepped; c++) {
            sch_leaf t = at;
            budget = NUM_SEARCH_BUDGET;
            if (schema__num_step(&s->nodes[l->node], &t, (uint8_t)*c) &&
                num_ends_within(s, &q, &t, NUM_SEARCH_DEPTH - (int)bytes, checked, &budget)) {
                at = t;
                stepped = true;
            }
        }
        if (!stepped)
            return SCH_COST_NEVER;
        budget = NUM_SEARCH_BUDGET;
        if (num_ends_within(s, &q, &at, 0, checked, &budget))
            return bytes;
    }
    return SCH_COST_NEVER;
}

/* Bytes from literal trie node k to the end of an allowed text below it. */
static uint32_t lit_cost(const ts_schema *s, sch_path *p, int32_t k, bool checked)
{
    const sch_lit *at = &s->lits[k];
    if (at->terminal) {
        p->leaf.u.lit = (uint32_t)k;
        if (!checked || schema__leaf_allowed(s, p))
            return 0;
    }
    uint32_t best = SCH_COST_NEVER;
    for (int32_t j = at->child; j >= 0; j = s->lits[j].sibling)
        best = least(best, add(1, lit_cost(s, p, j, checked)));
    return best;
}

/* Bytes of the shortest allowed value of node (not a union) starting in p. */
static uint32_t start_cost(const ts_schema *s, const sch_path *p, int node)
{
    const sch_node *n = &s->nodes[node];
    sch_path q = *p;
    memset(&q.leaf, 0, sizeof q.leaf);
    q.leaf.node = (uint16_t)node;
    switch ((sch_kind)n->kind) {
    case SCH_LITERAL:
        q.leaf.kind = LEAF_LITERAL;
        return lit_cost(s, &q, (int32_t)n->u.lit.root, schema__leaf_checked(s, &q));
    case SCH_STRING:
        q.leaf.kind = LEAF_STRING;
        q.leaf.u.str.hash = SCH_HASH_STRING;
        q.leaf.hashed = schema__leaf_checked(s, &q);
        return add(1, str_cost(s, &q));
    case SCH_NUMBER: {
        uint32_t best = SCH_COST_NEVER;
        for (const char *c = "-0123456789"; *c; c++) {
            sch_leaf l = q.leaf;
            if (schema__num_start(n, &l, (uint8_t)*c))
                best = least(best, add(1, num_cost(s, &q, &l)));
        }
        return best;
    }
    default: return shortest(s, node);
    }
}

static uint32_t leaf_cost(const ts_schema *s, const sch_path *p)
{
    const sch_leaf *l = &p->leaf;
    switch ((sch_leaf_kind)l->kind) {
    case LEAF_NONE: return 0;
    case LEAF_START: return start_cost(s, p, l->node);
    case LEAF_STRING: return str_cost(s, p);
    case LEAF_NUMBER: return num_cost(s, p, l);
    case LEAF_LITERAL: {
        sch_path q = *p;
        return lit_cost(s, &q, (int32_t)l->u.lit, schema__leaf_checked(s, p));
    }
    case LEAF_ANY: return (uint32_t)json_pda_close_cost(&l->u.any);
    }
    return SCH_COST_NEVER;
}

/* ---- containers */

static const sch_prop *prop(const ts_schema *s, const sch_node *o, int k)
{
    return &s->props[o->u.obj.first + (uint32_t)k];
}

static uint32_t member_cost(const ts_schema *s, const sch_node *o, int k)
{
    const sch_prop *pr = prop(s, o, k);
    return add(pr->key_len + 1u, shortest(s, pr->node));
}

/* A key beyond properties with its value; the keys after the first one written get one
 * character more, to differ. */
static uint32_t free_member_cost(const ts_schema *s, const sch_node *o, bool later)
{
    return add(add(shortest(s, o->u.obj.key), later + 1u), shortest(s, o->u.obj.extra));
}

/* Bytes that finish object o with properties from `from` on still to come and written
 * written: the required ones, the cheapest others minProperties asks for (at least one
 * member in all when one must come), commas (none before the first member when first),
 * and '}'. */
static uint32_t obj_rest(const ts_schema *s, const sch_node *o, int from, uint32_t written,
                         bool first, bool one_needed)
{
    uint32_t cost = 1, members = 0, optional_cost[SCH_MAX_PROPS];
    int n_optional = 0;
    for (int k = from; k < o->u.obj.n; k++) {
        if (prop(s, o, k)->required) {
            cost = add(cost, member_cost(s, o, k));
            members++;
        } else {
            optional_cost[n_optional++] = member_cost(s, o, k);
        }
    }
    uint32_t need = o->u.obj.min > written + members ? o->u.obj.min - written - members : 0;
    if (one_needed && members == 0 && need == 0)
        need = 1;
    bool free_written = written > 0 && from >= o->u.obj.n;
    for (uint32_t j = 0; j < need; j++) { /* the cheapest member left, one at a time */
        int best = -1;
        for (int i = 0; i < n_optional; i++)
            if (best < 0 || optional_cost[i] < optional_cost[best])
                best = i;
        uint32_t c = o->u.obj.extra != SCH_NO_NODE ? free_member_cost(s, o, free_written || j > 0)
                                                  : SCH_COST_NEVER;
        if (best >= 0 && optional_cost[best] <= c) {
            c = optional_cost[best];
            optional_cost[best] = SCH_COST_NEVER;
        }
        cost = add(cost, c);
        members++;
    }
    return add(cost, members > 0 ? members - first : 0);
}

/* Bytes that finish array a with count items begun (the last one complete), or none
 * (first). Items of a uniqueItems array after the first get one byte more, to differ. */
static uint32_t enum_items_rest(const ts_schema *s, const sch_node *a, uint32_t count,
                                bool first, const sch_path *p, int i, uint32_t also);

static uint32_t arr_rest(const ts_schema *s, const sch_node *a, uint32_t count, bool first)
{
    if (a->u.arr.unique && a->u.arr.n_prefix == 0 && s->nodes[a->u.arr.items].kind == SCH_LITERAL)
        return enum_items_rest(s, a, count, first, NULL, 0, UINT32_MAX);
    uint32_t cost = 1;
    for (uint32_t i = count; i < a->u.arr.min; i++) {
        cost = add(cost, shortest(s, schema__item_node(s, a, i)));
        cost = add(cost, (i > 0 || !first) + (a->u.arr.unique && i > 0));
        if (cost == SCH_COST_NEVER)
            break;
    }
    return cost;
}

/* ---- uniqueItems arrays of enum items: the cheapest texts not written yet */

enum { MAX_TEXTS = 256 }; /* enum texts an exact count considers */

typedef struct lit_text {
    uint32_t len;  /* bytes from the trie node the search began at */
    uint32_t hash; /* its value's hash, low 24 bits (as remembered) */
} lit_text;

static int lit_texts(const ts_schema *s, int32_t k, uint32_t depth, lit_text *out, int n)
{
    if (s->lits[k].terminal && n < MAX_TEXTS)
        out[n++] = (lit_text){depth, s->lits[k].hash & 0xFFFFFF};
    for (int32_t j = s->lits[k].child; j >= 0; j = s->lits[j].sibling)
        n = lit_texts(s, j, depth + 1, out, n);
    return n;
}

/* Whether frame i of p is a uniqueItems array of enum items alone (no prefixItems). */
static bool unique_enum(const ts_schema *s, const sch_path *p, int i)
{
    const sch_node *a = &s->nodes[p->frame[i].node];
    return a->kind == SCH_ARRAY && a->u.arr.unique && a->u.arr.n_prefix == 0 &&
           s->nodes[a->u.arr.items].kind == SCH_LITERAL;
}

/* Whether hash h is remembered by frame i of p. */
static bool remembered(const sch_path *p, int i, uint32_t h)
{
    for (int k = 0; k < p->n_mem; k++)
        if (p->mem[k] == ((uint32_t)(i + 1) << 24 | h))
            return true;
    return false;
}

/* arr_rest for a uniqueItems array a of enum items with count items begun (first: none
 * complete): its cheapest texts, each once, and none remembered by frame i of p nor
 * equal to also (the value being written; UINT32_MAX: none). p NULL: nothing remembered. */
static uint32_t enum_items_rest(const ts_schema *s, const sch_node *a, uint32_t count,
                                bool first, const sch_path *p, int i, uint32_t also)
{
    if (count >= a->u.arr.min)
        return 1;
    lit_text t[MAX_TEXTS];
    int n = lit_texts(s, (int32_t)s->nodes[a->u.arr.items].u.lit.root, 0, t, 0);
    uint32_t cost = 1;
    for (uint32_t item = count; item < a->u.arr.min; item++) {
        int best = -1;
        for (int k = 0; k < n; k++)
            if (t[k].len != SCH_COST_NEVER && t[k].hash != also &&
                !(p && remembered(p, i, t[k].hash)) && (best < 0 || t[k].len < t[best].len))
                best = k;
        if (best < 0)
            return SCH_COST_NEVER;
        cost = add(cost, t[best].len + (item > 0 || !first));
        t[best].len = SCH_COST_NEVER;
    }
    return cost;
}

/* enum_items_rest for frame i of p (items begun counting the one being written). */
static uint32_t unique_enum_rest(const ts_schema *s, const sch_path *p, int i, uint32_t also)
{
    const sch_frame *f = &p->frame[i];
    return enum_items_rest(s, &s->nodes[f->node], f->count, f->phase == F_ARR_FIRST, p, i,
                           also);
}

/* The value being read in p (an enum item of the unique array that is its top frame) and
 * that array's rest: the cheapest over the texts the value can still become. */
static uint32_t unique_enum_item_cost(const ts_schema *s, const sch_path *p)
{
    const sch_leaf *l = &p->leaf;
    int32_t k = l->kind == LEAF_START ? (int32_t)s->nodes[l->node].u.lit.root : (int32_t)l->u.lit;
    lit_text t[MAX_TEXTS];
    int n = lit_texts(s, k, 0, t, 0);
    uint32_t best = SCH_COST_NEVER;
    for (int j = 0; j < n; j++)
        if (!remembered(p, p->depth - 1, t[j].hash))
            best = least(best, add(t[j].len, unique_enum_rest(s, p, p->depth - 1, t[j].hash)));
    return best;
}

/* Bytes that finish the frame at index i of p once what it holds now is complete. */
static uint32_t frame_cost(const ts_schema *s, const sch_path *p, int i)
{
    const sch_frame *f = &p->frame[i];
    const sch_node *c = &s->nodes[f->node];
    if (c->kind == SCH_ARRAY && unique_enum(s, p, i))
        return unique_enum_rest(s, p, i, UINT32_MAX);
    if (c->kind == SCH_ARRAY)
        return arr_rest(s, c, f->count, f->phase == F_ARR_FIRST);
    switch ((frame_phase)f->phase) {
    case F_OBJ_FIRST: return obj_rest(s, c, f->count, f->written, true, false);
    case F_OBJ_NEXT: return obj_rest(s, c, f->count, f->written, true, true);
    case F_OBJ_KEY: { /* the cheapest name that goes on from the bytes read */
        const char *read = s->text + prop(s, c, f->key)->key;
        uint32_t best = SCH_COST_NEVER;
        for (int k = f->key; k < c->u.obj.n; k++) {
            const sch_prop *pr = prop(s, c, k);
            if (pr->key_len >= f->pos && !memcmp(s->text + pr->key, read, f->pos))
                best = least(best, add(add(pr->key_len - f->pos + 1u, shortest(s, pr->node)),
                                       obj_rest(s, c, k + 1, f->written + 1u, false, false)));
            if (pr->required)
                break; /* no name after a required one can come first */
        }
        return best;
    }
    case F_OBJ_COLON:
    case F_OBJ_FREE: {
        bool free_key = f->phase == F_OBJ_FREE || f->key == KEY_FREE;
        int value = free_key ? c->u.obj.extra : prop(s, c, f->key)->node;
        int next = free_key ? c->u.obj.n : f->key + 1;
        return add(add(1, shortest(s, value)),
                   obj_rest(s, c, next, f->written + 1u, false, false));
    }
    default: return obj_rest(s, c, f->count, f->written, false, false);
    }
}

static uint32_t path_cost(const ts_schema *s, const sch_path *p)
{
    int below = p->depth; /* frames whose cost is still to add */
    uint32_t cost;
    if (p->depth > 0 && unique_enum(s, p, p->depth - 1) &&
        (p->leaf.kind == LEAF_LITERAL || p->leaf.kind == LEAF_START) &&
        s->nodes[p->leaf.node].kind == SCH_LITERAL) {
        cost = unique_enum_item_cost(s, p); /* the item and its array together */
        below--;
    } else {
        cost = leaf_cost(s, p);
    }
    for (int i = below - 1; i >= 0 && cost < SCH_COST_NEVER; i--)
        cost = add(cost, frame_cost(s, p, i));
    return cost;
}

uint32_t sch_close_cost(const ts_schema *s, const sch_state *st)
{
    uint32_t best = SCH_COST_NEVER;
    for (int i = 0; i < st->n; i++)
        best = least(best, path_cost(s, &st->path[i]));
    return best;
}

/* ---- shortest values of nodes */

static uint32_t node_shortest(const ts_schema *s, int node)
{
    const sch_node *n = &s->nodes[node];
    switch ((sch_kind)n->kind) {
    case SCH_ANY: return 1;
    case SCH_ANY_OBJECT: return 2;
    case SCH_OBJECT: return add(1, obj_rest(s, n, 0, 0, true, false));
    case SCH_ARRAY: return add(1, arr_rest(s, n, 0, true));
    case SCH_UNION: {
        uint32_t best = SCH_COST_NEVER;
        for (uint16_t i = 0; i < n->u.uni.n; i++)
            best = least(best, s->shortest[s->targets[n->u.uni.first + i]]);
        return best;
    }
    case SCH_NEVER: return SCH_COST_NEVER;
    default: {
        sch_path empty;
        memset(&empty, 0, sizeof empty);
        return start_cost(s, &empty, node);
    }
    }
}

ts_status schema__shortest_lengths(ts_schema *s)
{
    free(s->shortest);
    s->shortest = malloc((size_t)s->n_nodes * sizeof *s->shortest);
    if (!s->shortest)
        return TS_ERR_NOMEM;
    for (int i = 0; i < s->n_nodes; i++)
        s->shortest[i] = SCH_COST_NEVER;
    for (bool changed = true; changed;) { /* least fixpoint: lengths only fall */
        changed = false;
        for (int i = 0; i < s->n_nodes; i++) {
            uint32_t k = node_shortest(s, i);
            if (k < s->shortest[i]) {
                s->shortest[i] = k;
                changed = true;
            }
        }
    }
    return TS_OK;
}
