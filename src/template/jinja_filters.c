/* jinja_filters.c: the filters chat templates use, with Jinja's defaults (sort, dictsort
 * and unique ignore case unless told otherwise; tojson is json.dumps without ASCII
 * escaping, as Hugging Face renders).
 * Mutual recursion with jinja_filters_seq.c, the language's own: this file's table lists
 * the sequence filters, and map, select and reject apply a filter named in the template
 * through jinja_filter (`map('map', ...)` comes back here). */
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

static bool str_of(jctx *c, const jnode *at, const jv *v, jv *out)
{
    if (v->t == JV_STR) {
        *out = *v;
        return true;
    }
    strbuf b = {0};
    if (!jv_to_str(&c->w, &b, v))
        return strbuf_free(&b),
               jinja_fail(c, at, TS_ERR_INVALID_ARG, "cannot make a string of this");
    return jinja_make_str(c, at, &b, out);
}

/* A string method on str(v), for trim, upper, lower, capitalize, replace. */
static bool via_method(jctx *c, const jnode *at, const jv *v, const char *m, const jargs *a,
                       jv *out)
{
    jv s;
    return str_of(c, at, v, &s) && jinja_method(c, at, &s, m, strlen(m), a, out);
}

static bool f_trim(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    return via_method(c, at, v, "strip", a, out);
}
static bool f_upper(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    return via_method(c, at, v, "upper", a, out);
}
static bool f_lower(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    return via_method(c, at, v, "lower", a, out);
}
static bool f_capitalize(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                         jv *out)
{
    (void)s;
    return via_method(c, at, v, "capitalize", a, out);
}
static bool f_replace(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                      jv *out)
{
    (void)s;
    return via_method(c, at, v, "replace", a, out);
}

static bool f_title(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    jv t;
    if (!str_of(c, at, v, &t) || !jinja_work(c, at, t.u.s.n))
        return false;
    char *o = t.u.s.n ? jinja_alloc(c->arena, t.u.s.n) : NULL;
    if (t.u.s.n && !o)
        return jinja_oom(c, at);
    bool start = true; /* Jinja starts a word after whitespace, -, (, {, [ or < */
    for (size_t i = 0; i < t.u.s.n; i++) {
        char ch = t.u.s.s[i];
        if (start && ch >= 'a' && ch <= 'z')
            ch = (char)(ch - 32);
        else if (!start && ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        o[i] = ch;
        start = strchr(" \t\n\r\v\f-({[<", ch) != NULL && ch;
    }
    *out = jv_str(o ? o : "", t.u.s.n);
    return true;
}

static bool f_length(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    if (v->t == JV_STR && !jinja_work(c, at, v->u.s.n))
        return false;
    if (v->t == JV_STR)
        *out = jv_int(jinja_cp_count(v->u.s.s, v->u.s.n));
    else if (v->t == JV_LIST)
        *out = jv_int((int64_t)v->u.l->n);
    else if (v->t == JV_DICT)
        *out = jv_int((int64_t)v->u.d->n);
    else if (v->t == JV_UNDEF)
        *out = jv_int(0);
    else
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s has no length", jv_type_name(v));
    return true;
}

static bool f_list(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    jv l;
    if (!jinja_as_list(c, at, v, &l) || !jinja_work(c, at, l.u.l->n) ||
        !jv_new_list(c->arena, out, l.u.l->n))
        return c->st != TS_OK ? false : jinja_oom(c, at);
    for (size_t i = 0; i < l.u.l->n; i++)
        jv_list_push(c->arena, out->u.l, l.u.l->items[i]);
    return true;
}

static bool f_first_last(jctx *c, const jnode *at, const jv *v, bool last, jv *out)
{
    jv l;
    if (!jinja_as_list(c, at, v, &l))
        return false;
    *out = l.u.l->n ? l.u.l->items[last ? l.u.l->n - 1 : 0] : (jv){.t = JV_UNDEF};
    return true;
}
static bool f_first(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    return f_first_last(c, at, v, false, out);
}
static bool f_last(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    return f_first_last(c, at, v, true, out);
}

static bool f_join(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    const jv *sep = jargs_get(a, 0, "d"), *attr = jargs_get(a, 1, "attribute");
    jv l, item;
    strbuf b = {0};
    if (!jinja_as_list(c, at, v, &l))
        return false;
    for (size_t i = 0; i < l.u.l->n; i++) {
        if (i && sep && !jv_to_str(&c->w, &b, sep))
            break;
        if (!jinja_attr_of(c, at, &l.u.l->items[i], attr, &item) ||
            !jv_to_str(&c->w, &b, &item))
            return strbuf_free(&b),
                   c->st != TS_OK ? false : jinja_fail(c, at, TS_ERR_INVALID_ARG, "cannot join");
    }
    return jinja_make_str(c, at, &b, out);
}

static bool f_default(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                      jv *out)
{
    (void)c, (void)s, (void)at;
    const jv *d = jargs_get(a, 0, "default_value"), *boolean = jargs_get(a, 1, "boolean");
    bool use = v->t == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(v));
    *out = !use ? *v : d ? *d : jv_str("", 0);
    return true;
}

static bool f_tojson(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    const jv *ind = jargs_get(a, 0, "indent"), *seps = jargs_get(a, 1, "separators");
    const jv *sort = jargs_get(a, 2, "sort_keys");
    int64_t indent = -1;
    char sep[2][32] = {"", ""};
    bool have_seps = false;
    if (ind && ind->t != JV_NONE && !jinja_get_int(c, at, ind, &indent))
        return false;
    if (indent > 32)
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "tojson indent too large");
    if (seps && seps->t != JV_NONE) {
        if (seps->t != JV_LIST || seps->u.l->n != 2)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "separators must be a pair of strings");
        for (int i = 0; i < 2; i++) {
            const jv *x = &seps->u.l->items[i];
            if (x->t != JV_STR || x->u.s.n >= sizeof sep[i])
                return jinja_fail(c, at, TS_ERR_INVALID_ARG, "separators must be short strings");
            memcpy(sep[i], x->u.s.s, x->u.s.n);
        }
        have_seps = true;
    }
    strbuf b = {0};
    if (!jv_to_json(&c->w, &b, v, (int)indent, have_seps ? sep[0] : NULL,
                    have_seps ? sep[1] : NULL, sort && jv_truthy(sort), 0)) {
        strbuf_free(&b);
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s is not JSON serializable",
                          jv_type_name(v));
    }
    if (b.len > c->lim->max_output)
        return strbuf_free(&b), jinja_fail(c, at, TS_ERR_TOO_LONG, "tojson output too long");
    return jinja_make_str(c, at, &b, out);
}

char *jinja_tojson(const cJSON *v, int indent)
{
    /* The default render bounds, but the larger memory one for the text: v is the caller's
     * JSON (tools of a request), bounded by the request's size, not the template's output. */
    jinja_limits lim;
    jinja_limits_default(&lim);
    jinja_arena a = {.limit = (size_t)1 << 30};
    jv_budget w = {.max_work = lim.max_work, .max_bytes = lim.max_memory};
    strbuf b = {0};
    jv x;
    bool ok = jv_from_json(&a, &w, v, &x, 0) &&
              jv_to_json(&w, &b, &x, indent, NULL, NULL, false, 0) && strbuf_add(&b, "", 0);
    jinja_arena_free(&a);
    if (!ok) {
        strbuf_free(&b);
        return NULL;
    }
    return b.s;
}

static bool f_string(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    return str_of(c, at, v, out);
}

static bool f_safe(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)c, (void)s, (void)at, (void)a;
    *out = *v;
    return true;
}

static bool f_int(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)at;
    const jv *d = jargs_get(a, 0, "default");
    *out = d ? *d : jv_int(0);
    if (v->t == JV_INT || v->t == JV_BOOL)
        *out = jv_int(v->t == JV_INT ? v->u.i : v->u.b);
    else if (v->t == JV_FLOAT && v->u.f > -9.2e18 && v->u.f < 9.2e18)
        *out = jv_int((int64_t)v->u.f);
    else if (v->t == JV_STR && v->u.s.n && v->u.s.n < 64) {
        char buf[64], *end;
        memcpy(buf, v->u.s.s, v->u.s.n);
        buf[v->u.s.n] = '\0';
        double f = strtod(buf, &end);
        while (*end == ' ' || *end == '\n' || *end == '\t')
            end++;
        if (!*end && f > -9.2e18 && f < 9.2e18)
            *out = jv_int((int64_t)f);
    }
    (void)c;
    return true;
}

static bool f_abs(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s, (void)a;
    if (v->t == JV_INT && v->u.i != INT64_MIN)
        *out = jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
    else if (v->t == JV_FLOAT)
        *out = (jv){.t = JV_FLOAT, .u.f = v->u.f < 0 ? -v->u.f : v->u.f};
    else
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "abs of %s", jv_type_name(v));
    return true;
}

static bool f_items(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a, jv *out)
{
    (void)s;
    if (v->t == JV_UNDEF)
        return jv_new_list(c->arena, out, 0) || jinja_oom(c, at);
    if (v->t != JV_DICT)
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "items of %s, not a mapping", jv_type_name(v));
    return jinja_method(c, at, (jv *)v, "items", 5, a, out);
}

static bool f_reverse(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                      jv *out)
{
    (void)s, (void)a;
    jv l;
    if (!jinja_as_list(c, at, v, &l) || !jinja_work(c, at, l.u.l->n) ||
        !jv_new_list(c->arena, out, l.u.l->n))
        return c->st != TS_OK ? false : jinja_oom(c, at);
    for (size_t i = l.u.l->n; i-- > 0;)
        jv_list_push(c->arena, out->u.l, l.u.l->items[i]);
    if (v->t != JV_STR)
        return true;
    strbuf b = {0};
    for (size_t i = 0; i < out->u.l->n; i++)
        strbuf_add(&b, out->u.l->items[i].u.s.s, out->u.l->items[i].u.s.n);
    return jinja_make_str(c, at, &b, out);
}

static const struct filter {
    const char *name;
    filter_fn fn;
} filters[] = {{"trim", f_trim},
               {"upper", f_upper},
               {"lower", f_lower},
               {"title", f_title},
               {"capitalize", f_capitalize},
               {"length", f_length},
               {"count", f_length},
               {"first", f_first},
               {"last", f_last},
               {"join", f_join},
               {"replace", f_replace},
               {"default", f_default},
               {"d", f_default},
               {"tojson", f_tojson},
               {"string", f_string},
               {"int", f_int},
               {"list", f_list},
               {"items", f_items},
               {"safe", f_safe},
               {"abs", f_abs},
               {"reverse", f_reverse},
#define JINJA_FILTER_ROW(name) {#name, jinja_f_##name},
               JINJA_SEQ_FILTERS(JINJA_FILTER_ROW)
#undef JINJA_FILTER_ROW
};

static filter_fn find_filter(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof filters / sizeof *filters; i++)
        if (strlen(filters[i].name) == n && !memcmp(filters[i].name, name, n))
            return filters[i].fn;
    return NULL;
}

bool jinja_filter_known(const char *name, size_t n) { return find_filter(name, n) != NULL; }

bool jinja_filter(jctx *c, jinja_scope *s, const jnode *at, const char *name, size_t n, const jv *v,
                  const jargs *args, jv *out)
{
    filter_fn fn = find_filter(name, n);
    if (!fn)
        return jinja_fail(c, at, TS_ERR_UNSUPPORTED, "unsupported filter '%.*s'", (int)n, name);
    return jinja_step(c, at) && fn(c, s, at, v, args, out);
}
