/* schema_comp.c: the state of one schema's compilation (schema_comp.h): the first failure
 * and where it happened, the path being walked, the memo of schema objects compiled, and
 * new nodes. Below schema_compile.c and schema_types.c, which both make nodes through it;
 * it calls neither. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_comp.h"

int comp_fail(comp *c, ts_status st, const char *keyword, const char *fmt, ...)
{
    if (c->st != TS_OK)
        return -1;
    c->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    sb_path_join(c->where, sizeof c->where, c->path, keyword ? keyword : "");
    return -1;
}

int comp_nomem(comp *c)
{
    return comp_fail(c, TS_ERR_NOMEM, NULL, "out of memory compiling a schema");
}

size_t comp_push(comp *c, const char *fmt, ...)
{
    size_t at = strlen(c->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->path + at, sizeof c->path - at, fmt, ap);
    va_end(ap);
    if (at == 0 && c->path[0] == '.') /* no dot before the first segment */
        memmove(c->path, c->path + 1, strlen(c->path));
    return at;
}

void comp_pop(comp *c, size_t at)
{
    c->path[at] = '\0';
}

int comp_memo_add(comp *c, const cJSON *sch, int node)
{
    if (node < 0 || !sch)
        return node;
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? 2 * c->cap_memo : 64;
        const cJSON **k = realloc(c->memo_key, (size_t)cap * sizeof *k);
        if (k)
            c->memo_key = k;
        int *n = k ? realloc(c->memo_node, (size_t)cap * sizeof *n) : NULL;
        if (!n)
            return comp_nomem(c);
        c->memo_node = n;
        c->cap_memo = cap;
    }
    c->memo_key[c->n_memo] = sch;
    c->memo_node[c->n_memo++] = node;
    return node;
}

static int node_failed(comp *c)
{
    return c->b.s->n_nodes >= SCH_MAX_NODES
               ? comp_fail(c, TS_ERR_TOO_LONG, NULL, "over %d schema nodes", SCH_MAX_NODES)
               : comp_nomem(c);
}

int comp_node(comp *c, sch_kind kind, uint16_t need)
{
    int n = sb_node(&c->b, kind);
    if (n < 0)
        return node_failed(c);
    c->b.s->nodes[n].need = need;
    return n;
}

int comp_literal(comp *c, const cJSON *const *values, int n)
{
    int node = sb_literal(&c->b, values, n);
    if (node < 0)
        return node_failed(c);
    c->b.s->nodes[node].need = n > 0 ? 0 : SCH_NEED_NEVER;
    return node;
}

int comp_any(comp *c)
{
    if (c->any < 0)
        c->any = comp_node(c, SCH_ANY, 0);
    return c->any;
}
