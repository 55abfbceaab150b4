/* schema_build.c: the node graph of a schema being compiled (sb_: schema builder): its
 * pools and the literal trie. The passes after the walk are in schema_pass.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_exact.h"
#include "grammar/schema_build.h"

static bool grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, (size_t)c * size);
    if (!g)
        return false;
    *p = g;
    *cap = c;
    return true;
}

int sb_node(schema_builder *b, sch_kind kind)
{
    ts_schema *s = b->s;
    if (s->n_nodes == SCH_MAX_NODES || !grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1,
                                             sizeof *s->nodes))
        return -1;
    if (s->cap_nodes > b->cap_values) {
        size_t cap = (size_t)s->cap_nodes;
        const cJSON ***v = realloc(b->values, cap * sizeof *v);
        if (v)
            b->values = v;
        int *n = v ? realloc(b->n_values, cap * sizeof *n) : NULL;
        if (n)
            b->n_values = n;
        double *lo = n ? realloc(b->num_lo, cap * sizeof *lo) : NULL;
        if (lo)
            b->num_lo = lo;
        double *hi = lo ? realloc(b->num_hi, cap * sizeof *hi) : NULL;
        if (!hi)
            return -1;
        b->num_hi = hi;
        for (int i = b->cap_values; i < s->cap_nodes; i++)
            b->values[i] = NULL, b->n_values[i] = 0;
        b->cap_values = s->cap_nodes;
    }
    memset(&s->nodes[s->n_nodes], 0, sizeof s->nodes[0]);
    s->nodes[s->n_nodes].kind = (uint8_t)kind;
    return s->n_nodes++;
}

/* A new trie node under parent (or a root when parent < 0). */
static int32_t lit_new(ts_schema *s, int32_t parent, uint8_t byte)
{
    if (!grow((void **)&s->lits, &s->cap_lits, s->n_lits + 1, sizeof *s->lits))
        return -1;
    int32_t k = s->n_lits++;
    s->lits[k] = (sch_lit){-1, -1, byte, false, 0};
    if (parent >= 0) {
        s->lits[k].sibling = s->lits[parent].child;
        s->lits[parent].child = k;
    }
    return k;
}

int sb_literal(schema_builder *b, const cJSON *const *values, int n)
{
    ts_schema *s = b->s;
    int node = sb_node(b, SCH_LITERAL);
    int32_t root = node < 0 ? -1 : lit_new(s, -1, 0);
    if (root < 0)
        return -1;
    s->nodes[node].u.lit.root = (uint32_t)root;
    b->values[node] = malloc((size_t)(n ? n : 1) * sizeof(cJSON *));
    if (!b->values[node])
        return -1;
    for (int i = 0; i < n; i++) {
        char *text = json_print_exact(values[i]); /* what a validator reads back equal */
        if (!text)
            return -1;
        int32_t at = root;
        for (const char *c = text; *c && at >= 0; c++) {
            int32_t k = s->lits[at].child;
            while (k >= 0 && s->lits[k].byte != (uint8_t)*c)
                k = s->lits[k].sibling;
            at = k >= 0 ? k : lit_new(s, at, (uint8_t)*c);
        }
        free(text);
        if (at < 0)
            return -1;
        s->lits[at].terminal = true;
        s->lits[at].hash = schema__value_hash(values[i]);
        b->values[node][b->n_values[node]++] = values[i];
    }
    return node;
}

bool sb_prop(schema_builder *b, const char *name, size_t len, bool required, int node,
             uint32_t hash)
{
    ts_schema *s = b->s;
    if (!grow((void **)&s->props, &s->cap_props, s->n_props + 1, sizeof *s->props))
        return false;
    if (s->n_text + len > s->cap_text) {
        size_t cap = s->cap_text ? s->cap_text : 256;
        while (cap < s->n_text + len)
            cap *= 2;
        char *g = realloc(s->text, cap);
        if (!g)
            return false;
        s->text = g;
        s->cap_text = cap;
    }
    memcpy(s->text + s->n_text, name, len);
    s->props[s->n_props++] = (sch_prop){(uint32_t)s->n_text, (uint8_t)len, required,
                                        (uint16_t)node, hash};
    s->n_text += len;
    return true;
}

bool sb_union_add(schema_builder *b, int node, const int *alts, int n, bool one_of,
                  const char *path)
{
    if (!grow((void **)&b->unions, &b->cap_unions, b->n_unions + 1, sizeof *b->unions))
        return false;
    sb_union *u = &b->unions[b->n_unions];
    u->alts = malloc((size_t)(n ? n : 1) * sizeof *u->alts);
    if (!u->alts)
        return false;
    memcpy(u->alts, alts, (size_t)n * sizeof *alts);
    u->node = node;
    u->n = n;
    u->one_of = one_of;
    snprintf(u->path, sizeof u->path, "%s", path);
    b->n_unions++;
    return true;
}

void sb_free(schema_builder *b)
{
    for (int i = 0; i < b->n_unions; i++)
        free(b->unions[i].alts);
    free(b->unions);
    for (int i = 0; i < b->cap_values; i++)
        free(b->values[i]);
    free(b->values);
    free(b->n_values);
    free(b->num_lo);
    free(b->num_hi);
    memset(b, 0, sizeof *b);
}

void sb_path_join(char *dst, size_t size, const char *a, const char *b)
{
    size_t o = 0;
    for (const char *parts[3] = {a, *a && *b ? "." : "", b}, **p = parts; p < parts + 3; p++)
        for (const char *c = *p; *c && o + 1 < size; c++)
            dst[o++] = *c;
    if (size)
        dst[o] = '\0';
}
