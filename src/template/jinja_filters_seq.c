/* jinja_filters_seq.c: the filters over sequences: map, select, reject, selectattr,
 * rejectattr, unique, sort, dictsort, batch, sum, min, max, and indent.
 * Mutual recursion with jinja_filters.c, the language's own: map applies a filter named in
 * the template through jinja_filter, whose table lists this file's filters. */
#include <string.h>

#include "template/jinja_internal.h"

/* map, select, reject, selectattr, rejectattr: what (0 map, 1 select, 2 reject), by
 * attribute (the first argument names an attribute). */
static bool walk(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, int what,
                 bool by_attr, jv *out)
{
    jv l, item;
    const jv *attr = NULL;
    size_t first = 0;
    if (!jinja_as_list(c, at, v, &l) || !jv_new_list(c->arena, out, 0))
        return c->st != TS_OK ? false : jinja_oom(c, at);
    if (what == 0 && (attr = jargs_get(a, 99, "attribute")) == NULL && !jargs_get(a, 0, NULL))
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "map needs a filter or attribute=");
    if (by_attr && !(attr = jargs_get(a, first++, NULL)))
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "missing the attribute name");
    const jv *name = attr && what == 0 ? NULL : jargs_get(a, first, NULL);
    /* The arguments after the filter or test name go to it. */
    size_t rest = 0;
    for (size_t i = 0; i < a->n; i++)
        rest += !a->names[i];
    rest = rest > first + 1 ? rest - first - 1 : 0;
    jargs sub = {0};
    if (rest) /* positional arguments come first in a->v */
        sub = (jargs){.v = a->v + first + 1,
                      .names = a->names + first + 1,
                      .name_n = a->name_n + first + 1,
                      .n = rest};
    if (name && name->t != JV_STR)
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "expected a filter or test name");
    if (name && (what == 0 ? !jinja_filter_known(name->u.s.s, name->u.s.n)
                           : !jinja_test_known(name->u.s.s, name->u.s.n)))
        return jinja_fail(c, at, TS_ERR_UNSUPPORTED, "unsupported %s '%.*s'",
                          what ? "test" : "filter", (int)name->u.s.n, name->u.s.s);
    char nm[32] = "";
    if (name && name->u.s.n < sizeof nm)
        memcpy(nm, name->u.s.s, name->u.s.n);
    for (size_t i = 0; i < l.u.l->n; i++) {
        if (!jinja_step(c, at) || !jinja_attr_of(c, at, &l.u.l->items[i], attr, &item))
            return false;
        if (what == 0) {
            jv r = item;
            if (name && !jinja_filter(c, s, at, nm, strlen(nm), &item, &sub, &r))
                return false;
            if (!name && item.t == JV_UNDEF && jargs_get(a, 99, "default"))
                r = *jargs_get(a, 99, "default");
            if (!jv_list_push(c->arena, out->u.l, r))
                return jinja_oom(c, at);
            continue;
        }
        bool keep = jv_truthy(&item);
        if (name && !jinja_test(c, at, nm, strlen(nm), &item, &sub, &keep))
            return false;
        if (keep == (what == 1) && !jv_list_push(c->arena, out->u.l, l.u.l->items[i]))
            return jinja_oom(c, at);
    }
    return true;
}

bool jinja_f_map(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    return walk(c, s, at, v, a, 0, false, out);
}
bool jinja_f_select(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    return walk(c, s, at, v, a, 1, false, out);
}
bool jinja_f_reject(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    return walk(c, s, at, v, a, 2, false, out);
}
bool jinja_f_selectattr(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                        jv *out)
{
    return walk(c, s, at, v, a, 1, true, out);
}
bool jinja_f_rejectattr(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                        jv *out)
{
    return walk(c, s, at, v, a, 2, true, out);
}

/* Python's ordering of a and b for sort: case folded unless case_sensitive. */
static bool order(jctx *c, const jnode *at, const jv *a, const jv *b, bool fold, int *out)
{
    return jv_cmp(&c->w, a, b, fold, out) ||
           jinja_fail(c, at, TS_ERR_INVALID_ARG, "cannot order %s and %s", jv_type_name(a),
                      jv_type_name(b));
}

/* Sorts items (n) stably by keys, descending when rev; tmp holds n of each. */
static bool merge_sort(jctx *c, const jnode *at, jv *items, jv *keys, jv *tmp_i, jv *tmp_k,
                       size_t n, bool fold, bool rev)
{
    if (n < 2)
        return true;
    size_t h = n / 2;
    if (!merge_sort(c, at, items, keys, tmp_i, tmp_k, h, fold, rev) ||
        !merge_sort(c, at, items + h, keys + h, tmp_i, tmp_k, n - h, fold, rev))
        return false;
    size_t i = 0, j = h, k = 0;
    while (i < h || j < n) {
        int cmp = 0;
        if (i < h && j < n && (!jinja_step(c, at) || !order(c, at, &keys[j], &keys[i], fold, &cmp)))
            return false;
        /* Take from the right only when it must go strictly first: that keeps it stable. */
        bool right = i >= h || (j < n && (rev ? cmp > 0 : cmp < 0));
        size_t from = right ? j++ : i++;
        tmp_i[k] = items[from];
        tmp_k[k++] = keys[from];
    }
    memcpy(items, tmp_i, n * sizeof *items);
    memcpy(keys, tmp_k, n * sizeof *keys);
    return true;
}

static bool sort_list(jctx *c, const jnode *at, const jv *l, const jv *attr, int pair, bool fold,
                      bool rev, jv *out)
{
    size_t n = l->u.l->n;
    if (!jv_new_list(c->arena, out, n))
        return jinja_oom(c, at);
    if (n == 0)
        return true; /* nothing to sort, and no key array to split into scratch */
    jv *keys = jinja_alloc(c->arena, 3 * n * sizeof *keys);
    if (!keys)
        return jinja_oom(c, at);
    if (!jinja_work(c, at, n))
        return false;
    for (size_t i = 0; i < n; i++) {
        const jv *it = &l->u.l->items[i];
        if (attr && !jinja_attr_of(c, at, it, attr, &keys[i]))
            return false;
        if (!attr)
            keys[i] = pair >= 0 && it->t == JV_LIST && it->u.l->n == 2 ? it->u.l->items[pair] : *it;
        out->u.l->items[i] = *it;
    }
    out->u.l->n = n;
    return merge_sort(c, at, out->u.l->items, keys, keys + n, keys + 2 * n, n, fold, rev);
}

static bool flag(const jargs *a, size_t pos, const char *name)
{
    const jv *v = jargs_get(a, pos, name);
    return v && jv_truthy(v);
}

bool jinja_f_sort(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    jv l;
    if (!jinja_as_list(c, at, v, &l))
        return false;
    return sort_list(c, at, &l, jargs_get(a, 2, "attribute"), -1, !flag(a, 1, "case_sensitive"),
                     flag(a, 0, "reverse"), out);
}

bool jinja_f_dictsort(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                      jv *out)
{
    (void)s;
    jv pairs;
    const jv *by = jargs_get(a, 1, "by");
    if (v->t != JV_DICT)
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "dictsort of %s, not a mapping",
                          jv_type_name(v));
    if (!jinja_method(c, at, (jv *)v, "items", 5, &(jargs){0}, &pairs))
        return false;
    bool by_value = by && by->t == JV_STR && by->u.s.n == 5 && !memcmp(by->u.s.s, "value", 5);
    return sort_list(c, at, &pairs, NULL, by_value ? 1 : 0, !flag(a, 0, "case_sensitive"),
                     flag(a, 2, "reverse"), out);
}

bool jinja_f_unique(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    jv l, key, seen;
    bool fold = !flag(a, 0, "case_sensitive");
    const jv *attr = jargs_get(a, 1, "attribute");
    if (!jinja_as_list(c, at, v, &l) || !jv_new_list(c->arena, out, 0) ||
        !jv_new_list(c->arena, &seen, 0))
        return c->st != TS_OK ? false : jinja_oom(c, at);
    for (size_t i = 0; i < l.u.l->n; i++) {
        if (!jinja_attr_of(c, at, &l.u.l->items[i], attr, &key))
            return false;
        bool dup = false;
        for (size_t j = 0; j < seen.u.l->n && !dup; j++) {
            int cmp = 1;
            if (!jinja_step(c, at))
                return false;
            dup = key.t == JV_STR && seen.u.l->items[j].t == JV_STR
                      ? jv_cmp(&c->w, &key, &seen.u.l->items[j], fold, &cmp) && cmp == 0
                      : jv_eq(&c->w, &key, &seen.u.l->items[j]);
        }
        if (!dup && (!jv_list_push(c->arena, seen.u.l, key) ||
                     !jv_list_push(c->arena, out->u.l, l.u.l->items[i])))
            return jinja_oom(c, at);
    }
    return true;
}

bool jinja_f_batch(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    jv l, row = {.t = JV_UNDEF};
    int64_t k;
    const jv *count = jargs_get(a, 0, "linecount"), *fill = jargs_get(a, 1, "fill_with");
    if (!count || !jinja_get_int(c, at, count, &k) || !jinja_as_list(c, at, v, &l))
        return c->st != TS_OK ? false : jinja_fail(c, at, TS_ERR_INVALID_ARG, "batch needs a size");
    if (k <= 0)
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "batch size must be positive");
    if (!jv_new_list(c->arena, out, 0))
        return jinja_oom(c, at);
    if (!jinja_work(c, at, l.u.l->n))
        return false;
    for (size_t i = 0; i < l.u.l->n; i++) {
        if (row.t == JV_UNDEF &&
            (!jv_new_list(c->arena, &row, 0) || !jv_list_push(c->arena, out->u.l, row)))
            return jinja_oom(c, at);
        if (!jv_list_push(c->arena, row.u.l, l.u.l->items[i]))
            return jinja_oom(c, at);
        if ((int64_t)row.u.l->n == k)
            row.t = JV_UNDEF;
    }
    while (fill && fill->t != JV_NONE && row.t == JV_LIST && (int64_t)row.u.l->n < k)
        if (!jinja_work(c, at, 1) || !jv_list_push(c->arena, row.u.l, *fill))
            return jinja_oom(c, at);
    /* the row held in `out` is the same list object, so the fill shows there too */
    return true;
}

bool jinja_f_indent(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    const jv *w = jargs_get(a, 0, "width");
    bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
    strbuf pad = {0}, b = {0};
    int64_t width = 4;
    if (w && w->t == JV_STR)
        strbuf_add(&pad, w->u.s.s, w->u.s.n);
    else if (w && !jinja_get_int(c, at, w, &width))
        return false;
    else
        for (int64_t i = 0; i < width && i < 256; i++)
            strbuf_add(&pad, " ", 1);
    if (v->t != JV_STR)
        return strbuf_free(&pad), jinja_fail(c, at, TS_ERR_INVALID_ARG, "indent needs a string");
    if (!jinja_work(c, at, v->u.s.n))
        return strbuf_free(&pad), false;
    const char *p = v->u.s.s, *end = p + v->u.s.n;
    bool line_start = true, first_line = true;
    /* Python's splitlines drops a final newline, so "a\n" indents as "a". */
    if (end > p && end[-1] == '\n')
        end--;
    for (; p <= end; p++) {
        if (line_start) {
            bool empty = p == end || *p == '\n';
            if (!jinja_work(c, at, pad.len))
                return strbuf_free(&pad), strbuf_free(&b), false;
            if ((first_line ? first : true) && (blank || !empty || first_line) && pad.len)
                strbuf_add(&b, pad.s, pad.len);
            line_start = false;
        }
        if (p == end)
            break;
        strbuf_add(&b, p, 1);
        if (*p == '\n')
            line_start = true, first_line = false;
        if (b.len > c->lim->max_output)
            return strbuf_free(&pad), strbuf_free(&b),
                   jinja_fail(c, at, TS_ERR_TOO_LONG, "string too long");
    }
    strbuf_free(&pad);
    return jinja_make_str(c, at, &b, out);
}

bool jinja_f_sum(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    jv l, item;
    const jv *attr = jargs_get(a, 99, "attribute"), *start = jargs_get(a, 1, "start");
    *out = start ? *start : jv_int(0);
    if (!jinja_as_list(c, at, v, &l))
        return false;
    for (size_t i = 0; i < l.u.l->n; i++)
        if (!jinja_step(c, at) || !jinja_attr_of(c, at, &l.u.l->items[i], attr, &item) ||
            !jinja_arith(c, at, JO_ADD, out, &item, out))
            return false;
    return true;
}

/* min and max: the first smallest or largest item, by attribute, case folded unless
 * case_sensitive; undefined for nothing. */
static bool extreme(jctx *c, const jnode *at, const jv *v, const jargs *a, bool max, jv *out)
{
    jv l, key, best_key;
    bool fold = !flag(a, 0, "case_sensitive");
    const jv *attr = jargs_get(a, 1, "attribute");
    *out = (jv){.t = JV_UNDEF};
    if (!jinja_as_list(c, at, v, &l))
        return false;
    for (size_t i = 0; i < l.u.l->n; i++) {
        int cmp = 0;
        if (!jinja_attr_of(c, at, &l.u.l->items[i], attr, &key) ||
            (i && !order(c, at, &key, &best_key, fold, &cmp)))
            return false;
        if (i == 0 || (max ? cmp > 0 : cmp < 0)) {
            *out = l.u.l->items[i];
            best_key = key;
        }
    }
    return true;
}

bool jinja_f_min(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    return extreme(c, at, v, a, false, out);
}

bool jinja_f_max(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    return extreme(c, at, v, a, true, out);
}
