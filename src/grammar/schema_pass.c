/* schema_pass.c: the passes over a compiled schema's graph after the walk: unions flattened
 * to the nodes that read bytes, the least nesting each node needs (so a path never opens a
 * value it cannot close within SCH_MAX_DEPTH), and oneOf's alternatives checked never to
 * match one value together (generating oneOf as anyOf is then exact). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_build.h"

typedef struct pass {
    schema_builder *b;
    int *union_of;  /* (n_nodes) index into b->unions, -1 */
    uint8_t *mark;  /* (n_nodes) flattening: 0 new, 1 on the stack, 2 seen in this union */
    int *list;      /* (n_nodes) the targets being gathered */
    int n_list;
    char *msg, *path;
    size_t msg_size, path_size;
} pass;

static ts_status fail_at(pass *p, const char *where, ts_status st, const char *fmt,
                         const char *arg)
{
    snprintf(p->msg, p->msg_size, fmt, arg);
    if (p->path)
        snprintf(p->path, p->path_size, "%s", where);
    return st;
}

/* Gathers the non-union nodes under node into p->list; false on a cycle of unions. */
static bool gather(pass *p, int node)
{
    int u = p->union_of[node];
    if (u < 0) {
        if (p->mark[node] != 2) {
            p->mark[node] = 2;
            p->list[p->n_list++] = node;
        }
        return true;
    }
    if (p->mark[node] == 1)
        return false;
    if (p->mark[node] == 2)
        return true;
    p->mark[node] = 1;
    const sb_union *un = &p->b->unions[u];
    for (int i = 0; i < un->n; i++)
        if (!gather(p, un->alts[i]))
            return false;
    p->mark[node] = 2;
    return true;
}

static ts_status flatten(pass *p)
{
    ts_schema *s = p->b->s;
    for (int i = 0; i < p->b->n_unions; i++) {
        const sb_union *un = &p->b->unions[i];
        memset(p->mark, 0, (size_t)s->n_nodes);
        p->n_list = 0;
        if (!gather(p, un->node))
            return fail_at(p, un->path, TS_ERR_INVALID_ARG,
                           "a cycle of $ref/anyOf/oneOf that reads nothing%s", "");
        int need = s->n_targets + p->n_list;
        if (need > s->cap_targets) {
            int cap = s->cap_targets ? s->cap_targets : 64;
            while (cap < need)
                cap *= 2;
            uint16_t *g = realloc(s->targets, (size_t)cap * sizeof *g);
            if (!g)
                return TS_ERR_NOMEM;
            s->targets = g;
            s->cap_targets = cap;
        }
        sch_node *n = &s->nodes[un->node];
        n->u.uni.first = (uint32_t)s->n_targets;
        n->u.uni.n = (uint16_t)p->n_list;
        for (int k = 0; k < p->n_list; k++)
            s->targets[s->n_targets++] = (uint16_t)p->list[k];
    }
    return TS_OK;
}

static uint16_t need_of(const ts_schema *s, const sch_node *n)
{
    switch ((sch_kind)n->kind) {
    case SCH_OBJECT: {
        int most = 0;
        for (uint16_t i = 0; i < n->u.obj.n; i++) {
            const sch_prop *pr = &s->props[n->u.obj.first + i];
            int k = s->nodes[pr->node].need;
            if (pr->required && k > most)
                most = k;
        }
        if (n->u.obj.extra != SCH_NO_NODE && n->u.obj.min > 0 &&
            s->nodes[n->u.obj.extra].need > most) /* extra keys may be what min needs */
            most = s->nodes[n->u.obj.extra].need;
        return most >= SCH_NEED_NEVER ? SCH_NEED_NEVER : (uint16_t)(most + 1);
    }
    case SCH_ARRAY: { /* the first min items are written */
        int k = 0;
        for (uint32_t i = 0; i < n->u.arr.min && i <= n->u.arr.n_prefix; i++) {
            int ki = s->nodes[schema__item_node(s, n, i)].need;
            k = ki > k ? ki : k;
        }
        return k >= SCH_NEED_NEVER ? SCH_NEED_NEVER : (uint16_t)(k + 1);
    }
    case SCH_UNION: {
        uint16_t least = SCH_NEED_NEVER;
        for (uint16_t i = 0; i < n->u.uni.n; i++) {
            uint16_t k = s->nodes[s->targets[n->u.uni.first + i]].need;
            if (k < least)
                least = k;
        }
        return least;
    }
    default: return n->need; /* leaves: set by the walk */
    }
}

/* Least fixpoint from "never": containers and unions need what their parts need. */
static void needs(ts_schema *s)
{
    for (int i = 0; i < s->n_nodes; i++) {
        sch_kind k = (sch_kind)s->nodes[i].kind;
        if (k == SCH_OBJECT || k == SCH_ARRAY || k == SCH_UNION)
            s->nodes[i].need = SCH_NEED_NEVER;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < s->n_nodes; i++) {
            uint16_t k = need_of(s, &s->nodes[i]);
            if (k < s->nodes[i].need) {
                s->nodes[i].need = k;
                changed = true;
            }
        }
    }
}

/* The values each node's instances make a path remember at least: a uniqueItems array's
 * minItems, an object's keys beyond properties that minProperties asks for; a union the
 * least of its targets. Nested containers are not added up. */
static void mem_needs(ts_schema *s)
{
    for (int i = 0; i < s->n_nodes; i++) {
        sch_node *n = &s->nodes[i];
        uint32_t k = 0;
        if (n->kind == SCH_ARRAY && n->u.arr.unique)
            k = n->u.arr.min;
        else if (n->kind == SCH_OBJECT && n->u.obj.extra != SCH_NO_NODE && n->u.obj.min > n->u.obj.n)
            k = (uint32_t)(n->u.obj.min - n->u.obj.n);
        n->mem = (uint8_t)(k < SCH_MAX_MEM ? k : SCH_MAX_MEM);
    }
    for (int i = 0; i < s->n_nodes; i++) {
        sch_node *n = &s->nodes[i];
        if (n->kind != SCH_UNION)
            continue;
        n->mem = SCH_MAX_MEM;
        for (uint16_t t = 0; t < n->u.uni.n; t++)
            if (s->nodes[s->targets[n->u.uni.first + t]].mem < n->mem)
                n->mem = s->nodes[s->targets[n->u.uni.first + t]].mem;
    }
}

/* ---- oneOf: no value may match two alternatives */

enum { T_NULL = 1, T_BOOL = 2, T_NUM = 4, T_STR = 8, T_ARR = 16, T_OBJ = 32, T_ALL = 63 };

static int json_type(const cJSON *v)
{
    return cJSON_IsNull(v) ? T_NULL : cJSON_IsBool(v) ? T_BOOL : cJSON_IsNumber(v) ? T_NUM
           : cJSON_IsString(v) ? T_STR : cJSON_IsArray(v) ? T_ARR : T_OBJ;
}

static int type_of(const schema_builder *b, int node)
{
    const sch_node *n = &b->s->nodes[node];
    switch ((sch_kind)n->kind) {
    case SCH_ANY: return T_ALL;
    case SCH_ANY_OBJECT:
    case SCH_OBJECT: return T_OBJ;
    case SCH_ARRAY: return T_ARR;
    case SCH_STRING: return T_STR;
    case SCH_NUMBER: return T_NUM;
    case SCH_LITERAL: {
        int t = 0;
        for (int i = 0; i < b->n_values[node]; i++)
            t |= json_type(b->values[node][i]);
        return t;
    }
    default: return 0;
    }
}

static bool disjoint(const schema_builder *b, int x, int y, int depth);

/* A literal value v against node y: disjoint when y cannot hold v. Conservative: only
 * numbers out of y's range and unequal literals count. */
static bool value_outside(const schema_builder *b, const cJSON *v, int y)
{
    const sch_node *n = &b->s->nodes[y];
    if (!(type_of(b, y) & json_type(v)))
        return true;
    if (n->kind == SCH_NUMBER && cJSON_IsNumber(v)) { /* the schema's bounds, not ours */
        double d = v->valuedouble;
        return d < b->num_lo[y] || d > b->num_hi[y] || (n->u.num.frac == 0 && d != floor(d));
    }
    if (n->kind == SCH_LITERAL) {
        for (int i = 0; i < b->n_values[y]; i++)
            if (cJSON_Compare(v, b->values[y][i], true))
                return false;
        return true;
    }
    return false;
}

/* Scalars ordered by type, then number or string; objects and arrays after them all,
 * unordered among themselves. */
static int lit_cmp(const void *pa, const void *pb)
{
    const cJSON *a = *(const cJSON *const *)pa, *b = *(const cJSON *const *)pb;
    int ta = a->type & 0xff, tb = b->type & 0xff;
    bool ca = ta == cJSON_Object || ta == cJSON_Array, cb = tb == cJSON_Object || tb == cJSON_Array;
    if (ca || cb)
        return ca - cb;
    if (ta != tb)
        return ta < tb ? -1 : 1;
    if (ta == cJSON_Number)
        return (a->valuedouble > b->valuedouble) - (a->valuedouble < b->valuedouble);
    if (ta == cJSON_String)
        return strcmp(a->valuestring, b->valuestring);
    return 0;
}

/* A sorted malloc'd copy of literal node's values, or NULL. */
static const cJSON **sorted_values(const schema_builder *b, int node)
{
    int n = b->n_values[node];
    const cJSON **v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (v) {
        memcpy(v, b->values[node], (size_t)n * sizeof *v);
        qsort(v, (size_t)n, sizeof *v, lit_cmp);
    }
    return v;
}

enum { LIT_PAIRS_MAX = 1 << 20 }; /* objects and arrays compared pairwise between two enums */

/* Two literal nodes share no value: their values sorted and merged, O(n log n), where
 * comparing each with each was quadratic (two 20k enums under oneOf took 17 s). Objects
 * and arrays are compared pairwise, up to LIT_PAIRS_MAX pairs; past that, or out of
 * memory, the answer is "unsure" (false). */
static bool literals_disjoint(const schema_builder *b, int x, int y)
{
    int nx = b->n_values[x], ny = b->n_values[y], i = 0, j = 0;
    const cJSON **vx = sorted_values(b, x), **vy = sorted_values(b, y);
    bool apart = vx && vy;
    while (apart && i < nx && j < ny) {
        int c = lit_cmp(&vx[i], &vy[j]);
        if (cJSON_Compare(vx[i], vy[j], true)) /* also numbers equal within cJSON's epsilon */
            apart = false;
        else if (c < 0)
            i++;
        else if (c > 0)
            j++;
        else
            break; /* both at the objects and arrays */
    }
    /* what is left at i and j, if anything, is objects and arrays on both sides */
    if (apart && i < nx && j < ny && (double)(nx - i) * (ny - j) > LIT_PAIRS_MAX)
        apart = false;
    for (int p = i; apart && p < nx && j < ny; p++)
        for (int q = j; apart && q < ny; q++)
            apart = !cJSON_Compare(vx[p], vy[q], true);
    free(vx);
    free(vy);
    return apart;
}

/* Two objects differ in a property both require whose schemas are disjoint. */
static bool objects_disjoint(const schema_builder *b, const sch_node *x, const sch_node *y,
                             int depth)
{
    const ts_schema *s = b->s;
    for (uint16_t i = 0; i < x->u.obj.n; i++) {
        const sch_prop *p = &s->props[x->u.obj.first + i];
        for (uint16_t j = 0; p->required && j < y->u.obj.n; j++) {
            const sch_prop *q = &s->props[y->u.obj.first + j];
            if (q->required && p->key_len == q->key_len &&
                !memcmp(s->text + p->key, s->text + q->key, p->key_len) &&
                disjoint(b, p->node, q->node, depth + 1))
                return true;
        }
    }
    return false;
}

static bool leaves_disjoint(const schema_builder *b, int x, int y, int depth)
{
    const sch_node *nx = &b->s->nodes[x], *ny = &b->s->nodes[y];
    if (!(type_of(b, x) & type_of(b, y)))
        return true;
    if (nx->kind == SCH_LITERAL && ny->kind == SCH_LITERAL)
        return literals_disjoint(b, x, y);
    if (nx->kind == SCH_LITERAL || ny->kind == SCH_LITERAL) {
        int lit = nx->kind == SCH_LITERAL ? x : y, other = lit == x ? y : x;
        for (int i = 0; i < b->n_values[lit]; i++)
            if (!value_outside(b, b->values[lit][i], other))
                return false;
        return true;
    }
    if (nx->kind == SCH_NUMBER && ny->kind == SCH_NUMBER)
        return b->num_hi[x] < b->num_lo[y] || b->num_hi[y] < b->num_lo[x];
    if (nx->kind == SCH_OBJECT && ny->kind == SCH_OBJECT)
        return objects_disjoint(b, nx, ny, depth);
    return false;
}

/* Whether no value matches both x and y as the schema means them (false when unsure):
 * what a node writes is within what its schema means, so then no value written for one
 * alternative matches the other. */
static bool disjoint(const schema_builder *b, int x, int y, int depth)
{
    if (depth > 8)
        return false;
    const ts_schema *s = b->s;
    const sch_node *nx = &s->nodes[x], *ny = &s->nodes[y];
    if (nx->kind == SCH_NEVER || ny->kind == SCH_NEVER) /* the false schema */
        return true;
    if (nx->kind == SCH_UNION) {
        for (uint16_t i = 0; i < nx->u.uni.n; i++)
            if (!disjoint(b, s->targets[nx->u.uni.first + i], y, depth))
                return false;
        return true;
    }
    if (ny->kind == SCH_UNION)
        return disjoint(b, y, x, depth);
    return leaves_disjoint(b, x, y, depth);
}

static ts_status check_one_of(pass *p)
{
    for (int u = 0; u < p->b->n_unions; u++) {
        const sb_union *un = &p->b->unions[u];
        for (int i = 0; un->one_of && i < un->n; i++)
            for (int j = i + 1; j < un->n; j++)
                if (!disjoint(p->b, un->alts[i], un->alts[j], 0)) {
                    char where[TS_SCHEMA_PATH_LEN];
                    sb_path_join(where, sizeof where, un->path, "oneOf");
                    snprintf(p->msg, p->msg_size,
                             "oneOf alternatives %d and %d may both match one value; tessera "
                             "generates oneOf only when its alternatives cannot overlap "
                             "(different types, disjoint enums or ranges, or a required "
                             "property with disjoint values): use anyOf", i, j);
                    if (p->path)
                        snprintf(p->path, p->path_size, "%s", where);
                    return TS_ERR_UNSUPPORTED;
                }
    }
    return TS_OK;
}

ts_status sb_finish(schema_builder *b, char *msg, size_t msg_size, char *path,
                    size_t path_size)
{
    ts_schema *s = b->s;
    pass p = {b, malloc((size_t)s->n_nodes * sizeof(int)), malloc((size_t)s->n_nodes),
              malloc((size_t)s->n_nodes * sizeof(int)), 0, msg, path, msg_size, path_size};
    ts_status st = TS_OK;
    if (!p.union_of || !p.mark || !p.list) {
        st = TS_ERR_NOMEM;
        snprintf(msg, msg_size, "out of memory compiling a schema");
    } else {
        for (int i = 0; i < s->n_nodes; i++)
            p.union_of[i] = -1;
        for (int i = 0; i < b->n_unions; i++)
            p.union_of[b->unions[i].node] = i;
        st = flatten(&p);
    }
    if (st == TS_OK) {
        needs(s);
        mem_needs(s);
        st = check_one_of(&p);
    }
    if (st == TS_OK && schema__shortest_lengths(s) != TS_OK) {
        st = TS_ERR_NOMEM;
        snprintf(msg, msg_size, "out of memory compiling a schema");
    }
    if (st == TS_OK && s->nodes[s->root].need == SCH_NEED_NEVER)
        st = fail_at(&p, "", TS_ERR_INVALID_ARG, "no JSON value satisfies the schema%s",
                     " as tessera writes values (docs/API.md, JSON Schema subset)");
    else if (st == TS_OK && s->nodes[s->root].need > SCH_MAX_DEPTH) {
        snprintf(msg, msg_size, "every value of the schema nests objects and arrays deeper "
                 "than %d", SCH_MAX_DEPTH);
        if (path)
            snprintf(path, path_size, "%s", "");
        st = TS_ERR_TOO_LONG;
    }
    free(p.union_of);
    free(p.mark);
    free(p.list);
    return st;
}
