/* schema_run.c: a compiled schema's automaton advanced byte by byte. A state is a set of
 * paths (schema.h); a path is a stack of open objects and arrays and the value being
 * read. Where the schema offers alternatives (anyOf, oneOf, a type array), a path splits
 * into one path per alternative when the value starts, and the paths that cannot take a
 * byte die; equal paths merge. Every byte a path takes leaves it able to finish (depths,
 * lengths, bounds and patterns are checked ahead), so a state never runs dry. */
#include <string.h>

#include "grammar/schema.h"

#define SCH_CP_LIMIT 0x10FFFFu

/* What a value being read did with a byte. */
typedef enum leaf_result {
    R_REJECT, /* cannot take it */
    R_MORE,   /* took it; the value goes on */
    R_CLOSED, /* took it; the value is complete */
    R_PASS,   /* did not take it, but the value is complete: the byte is its container's */
} leaf_result;

static bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Whitespace between JSON tokens, in the shapes SCH_MAX_INDENT allows, so a model can write
 * compact or indented JSON but cannot spin in whitespace. */
static bool ws_byte(sch_path *p, uint8_t c)
{
    if (p->ws == 0 && (c == ' ' || c == '\n'))
        p->ws = c == ' ' ? 1 : 2;
    else if (p->ws >= 2 && (c == ' ' || c == '\t') && p->ws - 2 < SCH_MAX_INDENT)
        p->ws++;
    else
        return false;
    return true;
}

static void emit(sch_state *to, const sch_path *p)
{
    if (to->n < SCH_MAX_PATHS) /* past the cap the later alternatives are dropped */
        to->path[to->n++] = *p;
}

/* Whether a value of node can begin in p: its nesting within the depth left, and the
 * values it must remember within the room left. */
static bool fits(const ts_schema *s, const sch_path *p, int node)
{
    uint16_t need = s->nodes[node].need;
    return need != SCH_NEED_NEVER && p->depth + need <= SCH_MAX_DEPTH &&
           p->n_mem + s->nodes[node].mem <= SCH_MAX_MEM;
}

static void set_leaf(sch_path *p, sch_leaf_kind kind, int node)
{
    memset(&p->leaf, 0, sizeof p->leaf);
    p->leaf.kind = (uint8_t)kind;
    p->leaf.node = (uint16_t)node;
}

static bool start_viable(const ts_schema *s, const sch_path *p, int node);

/* One path per alternative of node that p can still finish, each before its value. */
static void expand(const ts_schema *s, const sch_path *p, int node, sch_state *to)
{
    const sch_node *n = &s->nodes[node];
    int count = n->kind == SCH_UNION ? n->u.uni.n : 1;
    for (int i = 0; i < count; i++) {
        int t = n->kind == SCH_UNION ? s->targets[n->u.uni.first + i] : node;
        if (!fits(s, p, t) || !start_viable(s, p, t))
            continue;
        sch_path q = *p;
        set_leaf(&q, LEAF_START, t);
        emit(to, &q);
    }
}

/* ---- strings */

/* Whether one more code point (in [lo, hi]) can follow in string leaf l. */
static bool str_room(const ts_schema *s, const sch_leaf *l, uint32_t lo, uint32_t hi)
{
    const sch_node *n = &s->nodes[l->node];
    uint32_t count = l->u.str.count + 1;
    if (n->u.str.dfa < 0)
        return count <= n->u.str.max;
    return schema__dfa_any(&s->dfas[n->u.str.dfa], l->u.str.dfa, lo, hi, count, n->u.str.min,
                           n->u.str.max);
}

/* h continued with the UTF-8 bytes of cp. */
static uint32_t hash_cp(uint32_t h, uint32_t cp)
{
    uint8_t b[4];
    size_t n;
    if (cp < 0x80)
        b[0] = (uint8_t)cp, n = 1;
    else if (cp < 0x800)
        b[0] = (uint8_t)(0xC0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        b[0] = (uint8_t)(0xE0 | cp >> 12), b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)),
        b[2] = (uint8_t)(0x80 | (cp & 0x3F)), n = 3;
    else
        b[0] = (uint8_t)(0xF0 | cp >> 18), b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F)),
        b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), b[3] = (uint8_t)(0x80 | (cp & 0x3F)), n = 4;
    return schema__hash_bytes(h, b, n);
}

/* Reads code point cp into string leaf l. */
static bool str_char(const ts_schema *s, sch_leaf *l, uint32_t cp)
{
    const sch_node *n = &s->nodes[l->node];
    uint32_t count = l->u.str.count + 1;
    if (n->u.str.dfa >= 0) {
        const sch_dfa *d = &s->dfas[n->u.str.dfa];
        int t = schema__dfa_next(d, l->u.str.dfa, cp);
        if (t < 0 || !schema__dfa_feasible(d, t, count, n->u.str.min, n->u.str.max))
            return false;
        l->u.str.dfa = (uint16_t)t;
    } else if (count > n->u.str.max) {
        return false;
    }
    l->u.str.count = count;
    if (l->hashed)
        l->u.str.hash = hash_cp(l->u.str.hash, cp);
    return true;
}

static const char escapes[] = "\"\\/bfnrt";
static const char unescaped[] = "\"\\/\b\f\n\r\t";

static bool leaf_checked(const ts_schema *s, const sch_path *p);

static leaf_result str_byte(const ts_schema *s, sch_leaf *l, uint8_t c)
{
    const sch_node *n = &s->nodes[l->node];
    if (l->u.str.more) { /* a continuation byte narrows the character's range */
        if (c < 0x80 || c > 0xBF)
            return R_REJECT;
        unsigned shift = 6u * (l->u.str.more - 1u);
        uint32_t base = l->u.str.lo & ~((1u << (shift + 6)) - 1);
        uint32_t lo = base | (uint32_t)(c & 0x3F) << shift, hi = lo | ((1u << shift) - 1);
        lo = lo > l->u.str.lo ? lo : l->u.str.lo;
        hi = hi < l->u.str.hi ? hi : l->u.str.hi;
        if (lo > hi)
            return R_REJECT;
        if (--l->u.str.more == 0) {
            l->u.str.lo = l->u.str.hi = 0;
            return str_char(s, l, lo) ? R_MORE : R_REJECT;
        }
        if (!str_room(s, l, lo, hi))
            return R_REJECT;
        l->u.str.lo = lo;
        l->u.str.hi = hi;
        return R_MORE;
    }
    if (l->u.str.esc) {
        const char *e = c ? strchr(escapes, c) : NULL;
        l->u.str.esc = 0;
        return e && str_char(s, l, (uint8_t)unescaped[e - escapes]) ? R_MORE : R_REJECT;
    }
    if (c == '"') {
        bool ok = l->u.str.count >= n->u.str.min;
        if (ok && n->u.str.dfa >= 0)
            ok = schema__dfa_feasible(&s->dfas[n->u.str.dfa], l->u.str.dfa, l->u.str.count,
                                      l->u.str.count, l->u.str.count);
        return ok ? R_CLOSED : R_REJECT;
    }
    if (c == '\\') { /* only when some escape could come next */
        for (const char *u = unescaped; *u; u++) {
            sch_leaf t = *l;
            if (str_char(s, &t, (uint8_t)*u)) {
                l->u.str.esc = 1;
                return R_MORE;
            }
        }
        return R_REJECT;
    }
    if (c < 0x20)
        return R_REJECT;
    if (c < 0x80)
        return str_char(s, l, c) ? R_MORE : R_REJECT;
    uint32_t lo, hi; /* a lead byte: the code points its character may be (RFC 3629) */
    uint8_t more;
    if (c >= 0xC2 && c <= 0xDF)
        more = 1, lo = (uint32_t)(c & 0x1F) << 6, hi = lo | 0x3F;
    else if (c >= 0xE0 && c <= 0xEF) {
        more = 2, lo = (uint32_t)(c & 0x0F) << 12, hi = lo | 0xFFF;
        if (c == 0xE0)
            lo = 0x800;
        if (c == 0xED)
            hi = 0xD7FF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        more = 3, lo = (uint32_t)(c & 0x07) << 18, hi = lo | 0x3FFFF;
        if (c == 0xF0)
            lo = 0x10000;
        if (c == 0xF4)
            hi = 0x10FFFF;
    } else {
        return R_REJECT;
    }
    if (!str_room(s, l, lo, hi))
        return R_REJECT;
    l->u.str.more = more;
    l->u.str.lo = lo;
    l->u.str.hi = hi;
    return R_MORE;
}

/* ---- values */

static leaf_result lit_byte(const ts_schema *s, sch_leaf *l, uint8_t c)
{
    const sch_lit *at = &s->lits[l->u.lit];
    for (int32_t k = at->child; k >= 0; k = s->lits[k].sibling)
        if (s->lits[k].byte == c) {
            l->u.lit = (uint32_t)k;
            return s->lits[k].terminal && s->lits[k].child < 0 ? R_CLOSED : R_MORE;
        }
    return at->terminal ? R_PASS : R_REJECT;
}

static leaf_result any_byte(sch_leaf *l, uint8_t c)
{
    if (json_pda_step(&l->u.any, c))
        return json_pda_accepted(&l->u.any) ? R_CLOSED : R_MORE;
    return json_pda_can_end(&l->u.any) ? R_PASS : R_REJECT;
}

static bool push_frame(sch_path *p, int node, frame_phase phase)
{
    if (p->depth == SCH_MAX_DEPTH) /* fits() keeps this from happening */
        return false;
    p->frame[p->depth++] = (sch_frame){(uint16_t)node, 0, 0, 0, (uint8_t)phase, 0};
    set_leaf(p, LEAF_NONE, 0);
    return true;
}

/* The first byte of a value of node (not a union), or whitespace before it. */
static leaf_result start_byte(const ts_schema *s, sch_path *p, uint8_t c)
{
    int node = p->leaf.node;
    const sch_node *n = &s->nodes[node];
    if (is_ws(c)) /* none before the top-level value */
        return p->depth > 0 && ws_byte(p, c) ? R_MORE : R_REJECT;
    p->ws = 0;
    switch ((sch_kind)n->kind) {
    case SCH_OBJECT: return c == '{' && push_frame(p, node, F_OBJ_FIRST) ? R_MORE : R_REJECT;
    case SCH_ARRAY: return c == '[' && push_frame(p, node, F_ARR_FIRST) ? R_MORE : R_REJECT;
    case SCH_STRING:
        if (c != '"')
            return R_REJECT;
        set_leaf(p, LEAF_STRING, node);
        p->leaf.u.str.hash = SCH_HASH_STRING;
        p->leaf.hashed = leaf_checked(s, p);
        return R_MORE;
    case SCH_NUMBER: return schema__num_start(n, &p->leaf, c) ? R_MORE : R_REJECT;
    case SCH_LITERAL:
        set_leaf(p, LEAF_LITERAL, node);
        p->leaf.u.lit = n->u.lit.root;
        break;
    case SCH_ANY:
    case SCH_ANY_OBJECT:
        set_leaf(p, LEAF_ANY, node);
        if (n->kind == SCH_ANY)
            json_pda_init_value(&p->leaf.u.any);
        else
            json_pda_init(&p->leaf.u.any);
        break;
    default: return R_REJECT;
    }
    leaf_result r = n->kind == SCH_LITERAL ? lit_byte(s, &p->leaf, c) : any_byte(&p->leaf, c);
    return r == R_PASS ? R_REJECT : r; /* nothing is complete before its first byte */
}

/* ---- containers */

static const sch_prop *prop(const ts_schema *s, const sch_node *o, int k)
{
    return &s->props[o->u.obj.first + (uint32_t)k];
}

/* Whether property k may be the next one written when properties from i on may come:
 * those up to the first required one, each only if its value can be finished. */
static bool candidate(const ts_schema *s, const sch_path *p, const sch_node *o, int i, int k)
{
    for (int j = i; j < k; j++)
        if (prop(s, o, j)->required)
            return false;
    const sch_prop *pr = prop(s, o, k);
    if (!pr->required && !fits(s, p, pr->node))
        return false;
    /* minProperties and maxProperties stay within reach with k written next */
    uint32_t written = p->frame[p->depth - 1].written + 1u, required_after = 0;
    for (int j = k + 1; j < o->u.obj.n; j++)
        required_after += prop(s, o, j)->required;
    uint32_t most = written + (uint32_t)(o->u.obj.n - k - 1) +
                    (o->u.obj.extra != SCH_NO_NODE ? SCH_MAX_FREE : 0);
    return written + required_after <= o->u.obj.max && most >= o->u.obj.min;
}

static bool required_left(const ts_schema *s, const sch_node *o, int i)
{
    for (int k = i; k < o->u.obj.n; k++)
        if (prop(s, o, k)->required)
            return true;
    return false;
}

/* The values the top container remembers (its entries are the last of mem). */
static int mem_count(const sch_path *p)
{
    int k = 0;
    while (k < p->n_mem && p->mem[p->n_mem - 1 - k] >> 24 == p->depth)
        k++;
    return k;
}

/* Whether a key under additionalProperties may come next in the top object. */
static bool free_key_ok(const ts_schema *s, const sch_path *p, const sch_node *o)
{
    const sch_frame *f = &p->frame[p->depth - 1];
    return o->u.obj.extra != SCH_NO_NODE && !required_left(s, o, f->count) &&
           f->written < o->u.obj.max && mem_count(p) < SCH_MAX_FREE &&
           p->n_mem + 1 + s->nodes[o->u.obj.extra].mem <= SCH_MAX_MEM &&
           fits(s, p, o->u.obj.extra);
}

static int first_candidate(const ts_schema *s, const sch_path *p, const sch_node *o, int i)
{
    for (int k = i; k < o->u.obj.n; k++)
        if (candidate(s, p, o, i, k))
            return k;
    return -1;
}

/* Closes the top container: its value is complete, and the values it remembered are
 * forgotten. */
static void pop_frame(sch_path *p)
{
    while (p->n_mem > 0 && p->mem[p->n_mem - 1] >> 24 == p->depth)
        p->mem[--p->n_mem] = 0;
    p->frame[--p->depth] = (sch_frame){0};
}

/* A byte of a property name: the first candidate (from the one being read) whose name
 * goes on with c after the bytes read so far. */
static bool key_byte(const ts_schema *s, sch_path *p, sch_frame *f, const sch_node *o,
                     uint8_t c)
{
    const char *read = s->text + prop(s, o, f->key)->key;
    for (int k = f->key; k < o->u.obj.n; k++) {
        const sch_prop *pr = prop(s, o, k);
        const char *name = s->text + pr->key;
        if (pr->key_len > f->pos && (uint8_t)name[f->pos] == c &&
            !memcmp(name, read, f->pos) && candidate(s, p, o, f->count, k)) {
            f->key = (uint16_t)k;
            if (++f->pos == pr->key_len) {
                f->phase = F_OBJ_COLON;
                f->pos = 0;
            }
            return true;
        }
    }
    return false;
}

static void obj_byte(const ts_schema *s, sch_path *p, uint8_t c, sch_state *to)
{
    sch_frame *f = &p->frame[p->depth - 1];
    const sch_node *o = &s->nodes[f->node];
    if (f->phase == F_OBJ_KEY) {
        if (key_byte(s, p, f, o, c))
            emit(to, p);
        return;
    }
    if (is_ws(c)) {
        if (ws_byte(p, c))
            emit(to, p);
        return;
    }
    p->ws = 0;
    bool can_close = f->phase != F_OBJ_NEXT && f->phase != F_OBJ_COLON &&
                     !required_left(s, o, f->count) && f->written >= o->u.obj.min;
    if (c == '}' && can_close) {
        pop_frame(p);
        emit(to, p);
    } else if (c == '"' && (f->phase == F_OBJ_FIRST || f->phase == F_OBJ_NEXT)) {
        int k = first_candidate(s, p, o, f->count);
        if (free_key_ok(s, p, o)) { /* a key beyond properties, read as a string */
            sch_path q = *p;
            q.frame[q.depth - 1].phase = F_OBJ_FREE;
            set_leaf(&q, LEAF_STRING, o->u.obj.key);
            q.leaf.u.str.hash = SCH_HASH_STRING;
            q.leaf.hashed = 1;
            emit(to, &q);
        }
        if (k < 0)
            return;
        f->phase = F_OBJ_KEY;
        f->key = (uint16_t)k;
        f->pos = 1;
        emit(to, p);
    } else if (c == ':' && f->phase == F_OBJ_COLON) {
        int k = f->key;
        f->phase = F_AFTER;
        f->count = k == KEY_FREE ? o->u.obj.n : (uint16_t)(k + 1);
        f->key = 0;
        if (f->written < UINT16_MAX)
            f->written++;
        expand(s, p, k == KEY_FREE ? o->u.obj.extra : prop(s, o, k)->node, to);
    } else if (c == ',' && f->phase == F_AFTER && (first_candidate(s, p, o, f->count) >= 0 ||
                                                   free_key_ok(s, p, o))) {
        f->phase = F_OBJ_NEXT;
        emit(to, p);
    }
}

static void arr_byte(const ts_schema *s, sch_path *p, uint8_t c, sch_state *to);

/* ---- values told apart by hash: not, uniqueItems, keys beyond properties */

/* The hash of the complete value in leaf l (a string, number or literal). */
static uint32_t leaf_hash(const ts_schema *s, const sch_leaf *l)
{
    switch ((sch_leaf_kind)l->kind) {
    case LEAF_STRING: return l->u.str.hash;
    case LEAF_NUMBER:
        return schema__number_hash(l->u.num.mag, s->nodes[l->node].u.num.frac, l->u.num.neg);
    case LEAF_LITERAL: return s->lits[l->u.lit].hash;
    default: return 0;
    }
}

/* Whether the top container remembers values: a uniqueItems array, or an object reading
 * a key beyond its properties. */
static bool top_remembers(const ts_schema *s, const sch_path *p)
{
    if (p->depth == 0)
        return false;
    const sch_frame *f = &p->frame[p->depth - 1];
    const sch_node *c = &s->nodes[f->node];
    return (c->kind == SCH_ARRAY && c->u.arr.unique) ||
           (c->kind == SCH_OBJECT && f->phase == F_OBJ_FREE);
}

/* Whether the leaf's values are checked by hash at all. */
static bool leaf_checked(const ts_schema *s, const sch_path *p)
{
    const sch_leaf *l = &p->leaf;
    return (l->kind == LEAF_STRING && s->nodes[l->node].u.str.n_excl > 0) ||
           ((l->kind == LEAF_STRING || l->kind == LEAF_NUMBER || l->kind == LEAF_LITERAL) &&
            top_remembers(s, p));
}

/* Whether a complete value of hash h may stand in p's leaf: not excluded by `not`, not a
 * repeat where its container remembers, and no declared name as a key beyond them. */
static bool value_allowed(const ts_schema *s, const sch_path *p, uint32_t h)
{
    const sch_leaf *l = &p->leaf;
    if (l->kind == LEAF_STRING) {
        const sch_node *n = &s->nodes[l->node];
        for (uint16_t i = 0; i < n->u.str.n_excl; i++)
            if (s->hashes[n->u.str.excl + i] == h)
                return false;
    }
    if (!top_remembers(s, p))
        return true;
    const sch_frame *f = &p->frame[p->depth - 1];
    const sch_node *c = &s->nodes[f->node];
    for (uint16_t i = 0; c->kind == SCH_OBJECT && i < c->u.obj.n; i++)
        if (prop(s, c, i)->hash == h)
            return false;
    uint32_t entry = (uint32_t)p->depth << 24 | (h & 0xFFFFFF);
    for (int i = p->n_mem - 1; i >= 0 && p->mem[i] >> 24 == p->depth; i--)
        if (p->mem[i] == entry)
            return false;
    return true;
}

/* After the value in p's leaf completed with hash h (allowed): its container remembers
 * it, and a key beyond properties waits for its colon. */
static void remember(const ts_schema *s, sch_path *p, uint32_t h)
{
    if (!top_remembers(s, p))
        return;
    sch_frame *f = &p->frame[p->depth - 1];
    if (p->n_mem < SCH_MAX_MEM) /* the containers check for room before a value starts */
        p->mem[p->n_mem++] = (uint32_t)p->depth << 24 | (h & 0xFFFFFF);
    if (s->nodes[f->node].kind == SCH_OBJECT) {
        f->phase = F_OBJ_COLON;
        f->key = KEY_FREE;
    }
}

/* Whether some literal text at or below trie node k may still complete as an allowed
 * value. */
static bool lit_viable(const ts_schema *s, const sch_path *p, int32_t k)
{
    if (s->lits[k].terminal && value_allowed(s, p, s->lits[k].hash))
        return true;
    for (int32_t j = s->lits[k].child; j >= 0; j = s->lits[j].sibling)
        if (lit_viable(s, p, j))
            return true;
    return false;
}

enum { VIABLE_BUDGET = 4096 }; /* states a viability search visits at most */

/* Whether the number in l (of node n, in path p) can still end as an allowed value:
 * depth first over the digits and '.', which end soon (digit counts are bounded). */
static bool num_viable(const ts_schema *s, const sch_path *p, const sch_node *n,
                       const sch_leaf *l, int *budget)
{
    if (--*budget < 0)
        return true; /* past the budget: assumed, never searched forever */
    if (schema__num_can_end(n, l) && value_allowed(s, p, leaf_hash(s, l)))
        return true;
    for (const char *c = "0123456789."; *c; c++) {
        sch_leaf t = *l;
        if (schema__num_step(n, &t, (uint8_t)*c) && num_viable(s, p, n, &t, budget))
            return true;
    }
    return false;
}

/* Whether the string in l (of node n, whole characters read) can still end as an allowed
 * value. Without a pattern any string may follow, so only a full string must be allowed
 * already; with one, depth first over the pattern's transitions, trying from each range
 * one code point more than there are values to avoid (distinct code points make distinct
 * strings). */
static bool str_viable(const ts_schema *s, const sch_path *p, const sch_node *n,
                       const sch_leaf *l, int *budget)
{
    if (--*budget < 0)
        return true;
    bool can_close = l->u.str.count >= n->u.str.min &&
                     (n->u.str.dfa < 0 ||
                      schema__dfa_feasible(&s->dfas[n->u.str.dfa], l->u.str.dfa,
                                           l->u.str.count, l->u.str.count, l->u.str.count));
    if (can_close && value_allowed(s, p, l->u.str.hash))
        return true;
    if (n->u.str.dfa < 0)
        return l->u.str.count < n->u.str.max;
    const sch_dfa *d = &s->dfas[n->u.str.dfa];
    uint32_t tries = (uint32_t)(n->u.str.n_excl + p->n_mem) + 1;
    for (uint32_t k = d->first[l->u.str.dfa]; k < d->first[l->u.str.dfa + 1]; k++) {
        uint32_t lo = d->tr[k].lo < 0x20 ? 0x20 : d->tr[k].lo;
        for (uint32_t cp = lo; cp <= d->tr[k].hi && cp < lo + tries; cp++) {
            sch_leaf t = *l;
            if (str_char(s, &t, cp) && str_viable(s, p, n, &t, budget))
                return true;
        }
    }
    return false;
}

/* Whether a value of node (not a union) beginning in p can end as an allowed one: in a
 * uniqueItems array, some value of the item not written yet. */
static bool start_viable(const ts_schema *s, const sch_path *p, int node)
{
    const sch_node *n = &s->nodes[node];
    if (p->depth == 0 || p->frame[p->depth - 1].phase == F_OBJ_FREE ||
        s->nodes[p->frame[p->depth - 1].node].kind != SCH_ARRAY || !top_remembers(s, p))
        return true;
    sch_path q = *p;
    int budget = VIABLE_BUDGET;
    set_leaf(&q, LEAF_START, node);
    switch ((sch_kind)n->kind) {
    case SCH_LITERAL: return lit_viable(s, &q, (int32_t)n->u.lit.root);
    case SCH_STRING:
        set_leaf(&q, LEAF_STRING, node);
        q.leaf.hashed = 1;
        q.leaf.u.str.hash = SCH_HASH_STRING;
        return str_viable(s, &q, n, &q.leaf, &budget);
    case SCH_NUMBER:
        for (const char *c = "-0123456789"; *c; c++) {
            sch_leaf l = q.leaf;
            if (schema__num_start(n, &l, (uint8_t)*c) && num_viable(s, &q, n, &l, &budget))
                return true;
        }
        return false;
    default: return true;
    }
}

/* After the leaf took a byte and goes on: false when it has become a dead end, no
 * allowed value being reachable from it (every one it can still become is excluded by
 * `not` or written before). */
static bool leaf_viable(const ts_schema *s, const sch_path *p)
{
    const sch_leaf *l = &p->leaf;
    const sch_node *n = &s->nodes[l->node];
    int budget = VIABLE_BUDGET;
    if (l->kind == LEAF_LITERAL)
        return lit_viable(s, p, (int32_t)l->u.lit);
    if (l->kind == LEAF_NUMBER)
        return num_viable(s, p, n, l, &budget);
    if (l->u.str.more || l->u.str.esc)
        return true; /* judged when the character is whole */
    return str_viable(s, p, n, l, &budget);
}

/* Feeds c to path p (not modified) and adds what comes of it to to. */
static void step_path(const ts_schema *s, const sch_path *from, uint8_t c, sch_state *to)
{
    sch_path p = *from;
    leaf_result r = R_PASS;
    switch ((sch_leaf_kind)p.leaf.kind) {
    case LEAF_NONE: break;
    case LEAF_START: r = start_byte(s, &p, c); break;
    case LEAF_STRING: r = str_byte(s, &p.leaf, c); break;
    case LEAF_NUMBER:
        r = schema__num_step(&s->nodes[p.leaf.node], &p.leaf, c) ? R_MORE
            : schema__num_can_end(&s->nodes[p.leaf.node], &p.leaf) ? R_PASS : R_REJECT;
        break;
    case LEAF_LITERAL: r = lit_byte(s, &p.leaf, c); break;
    case LEAF_ANY: r = any_byte(&p.leaf, c); break;
    }
    if (r == R_REJECT)
        return;
    bool complete = r == R_CLOSED || (r == R_PASS && p.leaf.kind != LEAF_NONE);
    if (leaf_checked(s, &p)) {
        if (complete) {
            uint32_t h = leaf_hash(s, &p.leaf);
            if (!value_allowed(s, &p, h))
                return;
            remember(s, &p, h);
        } else if (r == R_MORE && !leaf_viable(s, &p)) {
            return;
        }
    }
    if (complete)
        set_leaf(&p, LEAF_NONE, 0); /* the value is complete: its container is in F_AFTER */
    if (r != R_PASS) {
        emit(to, &p);
        return;
    }
    if (p.depth == 0) /* the top-level value is complete: nothing may follow */
        return;
    if (s->nodes[p.frame[p.depth - 1].node].kind == SCH_OBJECT)
        obj_byte(s, &p, c, to);
    else
        arr_byte(s, &p, c, to);
}

static void arr_byte(const ts_schema *s, sch_path *p, uint8_t c, sch_state *to)
{
    sch_frame *f = &p->frame[p->depth - 1];
    const sch_node *a = &s->nodes[f->node];
    if (is_ws(c)) {
        if (ws_byte(p, c))
            emit(to, p);
        return;
    }
    p->ws = 0;
    int item = schema__item_node(s, a, f->count);
    bool more = f->count < a->u.arr.max && fits(s, p, item) &&
                (!a->u.arr.unique || p->n_mem < SCH_MAX_MEM);
    if (c == ']') {
        if (f->count >= a->u.arr.min) {
            pop_frame(p);
            emit(to, p);
        }
        return;
    }
    if (!more || (f->phase == F_AFTER && c != ','))
        return;
    bool first = f->phase == F_ARR_FIRST;
    f->phase = F_AFTER;
    if (f->count < UINT16_MAX)
        f->count++;
    if (!first) {
        expand(s, p, item, to);
        return;
    }
    sch_state starts; /* the first item's first byte is this one */
    starts.n = 0;
    expand(s, p, item, &starts);
    for (int i = 0; i < starts.n; i++)
        step_path(s, &starts.path[i], c, to);
}

/* ---- the state */

size_t sch_state_size(const sch_state *st)
{
    return offsetof(sch_state, path) + (size_t)st->n * sizeof(sch_path);
}

void sch_init(sch_state *st, const ts_schema *s)
{
    memset(st, 0, sizeof *st);
    sch_path p;
    memset(&p, 0, sizeof p);
    expand(s, &p, s->root, st);
}

bool sch_step(const ts_schema *s, const sch_state *from, uint8_t c, sch_state *to)
{
    to->n = 0;
    memset(to->pad, 0, sizeof to->pad);
    for (int i = 0; i < from->n; i++)
        step_path(s, &from->path[i], c, to);
    for (int i = 1; i < to->n; i++) /* equal paths merge, the first kept */
        for (int j = 0; j < i; j++)
            if (!memcmp(&to->path[i], &to->path[j], sizeof to->path[i])) {
                memmove(&to->path[i], &to->path[i + 1], (size_t)(to->n - i - 1) * sizeof to->path[0]);
                to->n--;
                i--;
                break;
            }
    return to->n > 0;
}

static bool path_can_end(const ts_schema *s, const sch_path *p)
{
    if (p->depth > 0)
        return false;
    const sch_leaf *l = &p->leaf;
    switch ((sch_leaf_kind)l->kind) {
    case LEAF_NONE: return true;
    case LEAF_NUMBER: return schema__num_can_end(&s->nodes[l->node], l);
    case LEAF_LITERAL: return s->lits[l->u.lit].terminal;
    case LEAF_ANY: return json_pda_can_end(&l->u.any);
    default: return false;
    }
}

bool sch_can_end(const ts_schema *s, const sch_state *st)
{
    for (int i = 0; i < st->n; i++)
        if (path_can_end(s, &st->path[i]))
            return true;
    return false;
}

bool sch_done(const ts_schema *s, const sch_state *st)
{
    if (!sch_can_end(s, st))
        return false;
    sch_state next;
    for (int c = 0; c < 256; c++)
        if (sch_step(s, st, (uint8_t)c, &next))
            return false;
    return true;
}

/* p with what cannot change its continuations cleared: a string's length where only
 * "enough" and "room for 257 more" matter (no token is longer than 256 bytes). */
static void canonical(const ts_schema *s, sch_path *p)
{
    sch_leaf *l = &p->leaf;
    if (l->kind == LEAF_ANY) {
        json_pda_canonical(&l->u.any);
    } else if (l->kind == LEAF_STRING) {
        const sch_node *n = &s->nodes[l->node];

        uint32_t count = l->u.str.count, min = n->u.str.min, max = n->u.str.max;
        if (n->u.str.dfa < 0) {
            uint32_t need = count < min ? min - count : 0, room = max - count;
            l->u.str.count = (need < 257 ? need : 257) << 16 | (room < 257 ? room : 257);
        } else if (max == UINT32_MAX && count >= min) {
            l->u.str.count = min;
        }
    }
}

bool sch_same(const ts_schema *s, const sch_state *a, const sch_state *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        sch_path x = a->path[i], y = b->path[i];
        canonical(s, &x);
        canonical(s, &y);
        if (memcmp(&x, &y, sizeof x))
            return false;
    }
    return true;
}

/* ---- for the closing cost (schema_close.c) */

bool schema__leaf_checked(const ts_schema *s, const sch_path *p) { return leaf_checked(s, p); }

bool schema__str_char(const ts_schema *s, sch_leaf *l, uint32_t cp) { return str_char(s, l, cp); }

bool schema__leaf_allowed(const ts_schema *s, const sch_path *p)
{
    return value_allowed(s, p, leaf_hash(s, &p->leaf));
}
