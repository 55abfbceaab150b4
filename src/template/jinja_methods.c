/* jinja_methods.c: the Python methods templates call on strings, dicts and lists, the
 * tests (`is defined`...), and the globals (range, namespace, dict, raise_exception,
 * strftime_now). Nothing here reaches outside the values it is given. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template/jinja_internal.h"

static const char *const methods[] = {
    "strip", "lstrip", "rstrip",     "split",   "startswith", "endswith", "upper",
    "lower", "title",  "capitalize", "replace", "join",       "find",     "count",
    "items", "keys",   "values",     "get",     "append",     "pop",      NULL};

bool jinja_method_known(const char *name, size_t n)
{
    for (size_t i = 0; methods[i]; i++)
        if (strlen(methods[i]) == n && !memcmp(methods[i], name, n))
            return true;
    return false;
}

static bool is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Whether byte ch is in the strip set: chars (a string) or ASCII whitespace. */
static bool in_set(char ch, const jv *chars)
{
    if (chars && chars->t == JV_STR)
        return memchr(chars->u.s.s, ch, chars->u.s.n) != NULL;
    return is_ws(ch);
}

static bool want_str(jctx *c, const jnode *at, const jv *v, const char *what)
{
    return (v && v->t == JV_STR) ||
           jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s needs a string argument", what);
}

static void case_map(char *s, size_t n, int how) /* 0 lower, 1 upper, 2 capitalize, 3 title */
{
    bool start = true;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        bool up = how == 1 || (how == 2 && i == 0) || (how == 3 && start && letter);
        if (up && ch >= 'a' && ch <= 'z')
            s[i] = (char)(ch - 32);
        else if (!up && how != 1 && ch >= 'A' && ch <= 'Z')
            s[i] = (char)(ch + 32);
        start =
            how == 3 ? !letter && !(ch >= '0' && ch <= '9') && !((unsigned char)ch & 0x80) : start;
    }
}

static bool str_method(jctx *c, const jnode *at, const jv *self, const char *m, const jargs *a,
                       jv *out)
{
    const char *s = self->u.s.s;
    size_t n = self->u.s.n;
    const jv *a0 = jargs_get(a, 0, NULL), *a1 = jargs_get(a, 1, NULL);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        const jv *chars = a0 && a0->t != JV_NONE ? a0 : NULL;
        size_t lo = 0, hi = n, per = 1 + (chars ? chars->u.s.n : 0);
        if (m[0] != 'r')
            while (lo < hi && jinja_work(c, at, per) && in_set(s[lo], chars))
                lo++;
        if (m[0] != 'l')
            while (hi > lo && jinja_work(c, at, per) && in_set(s[hi - 1], chars))
                hi--;
        if (c->st != TS_OK)
            return false;
        *out = jv_str(s + lo, hi - lo);
        return true;
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
        !strcmp(m, "capitalize")) {
        if (!jinja_work(c, at, n))
            return false;
        char *t = n ? jinja_alloc(c->arena, n) : NULL;
        if (n && !t)
            return jinja_oom(c, at);
        if (n)
            memcpy(t, s, n);
        case_map(t, n, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 'c' ? 2 : 3);
        *out = jv_str(t ? t : "", n);
        return true;
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        bool start = m[0] == 's', hit = false;
        const jv *list = a0 && a0->t == JV_LIST ? a0 : NULL;
        size_t k = list ? list->u.l->n : 1;
        for (size_t i = 0; i < k && !hit; i++) {
            const jv *p = list ? &list->u.l->items[i] : a0;
            if (!want_str(c, at, p, m) || !jinja_work(c, at, 1 + p->u.s.n))
                return false;
            hit = p->u.s.n <= n && !memcmp(start ? s : s + n - p->u.s.n, p->u.s.s, p->u.s.n);
        }
        *out = jv_bool(hit);
        return true;
    }
    if (!strcmp(m, "find") || !strcmp(m, "count")) {
        if (!want_str(c, at, a0, m))
            return false;
        /* Python's semantics: count does not overlap and counts "" at every code point
         * boundary; each search is memmem (linear), charged what it may scan. */
        const char *p = a0->u.s.s;
        size_t k = a0->u.s.n;
        int64_t count = 0, found = -1;
        if (!k) {
            found = 0;
            count = jinja_cp_count(s, n) + 1;
        }
        for (size_t i = 0; k && i + k <= n;) {
            if (!jinja_work(c, at, n - i + k))
                return false;
            const char *hit = memmem(s + i, n - i, p, k);
            if (!hit)
                break;
            if (found < 0)
                found = jinja_cp_count(s, (size_t)(hit - s));
            count++;
            if (m[0] == 'f')
                break;
            i = (size_t)(hit - s) + k;
        }
        *out = jv_int(m[0] == 'f' ? found : count);
        return true;
    }
    if (!strcmp(m, "replace")) {
        if (!want_str(c, at, a0, m) || !want_str(c, at, a1, m))
            return false;
        const jv *cnt = jargs_get(a, 2, "count");
        int64_t left = cnt && cnt->t == JV_INT ? cnt->u.i : -1;
        strbuf b = {0};
        /* One memmem per replacement: linear in the string, charged for what it scans
         * and writes. An empty pattern replaces nothing. */
        for (size_t i = 0; i < n;) {
            const char *hit = left != 0 && a0->u.s.n ? memmem(s + i, n - i, a0->u.s.s, a0->u.s.n)
                                                      : NULL;
            size_t e = hit ? (size_t)(hit - s) : n;
            if (!jinja_work(c, at, e - i + a0->u.s.n + (hit ? a1->u.s.n : 0)))
                return strbuf_free(&b), false;
            strbuf_add(&b, s + i, e - i);
            if (hit)
                strbuf_add(&b, a1->u.s.s, a1->u.s.n);
            i = hit ? e + a0->u.s.n : n;
            left -= hit != NULL;
            if (b.len > c->lim->max_output)
                return strbuf_free(&b), jinja_fail(c, at, TS_ERR_TOO_LONG, "string too long");
        }
        return jinja_make_str(c, at, &b, out);
    }
    if (!strcmp(m, "split")) {
        const jv *sep = a0 && a0->t != JV_NONE ? a0 : NULL;
        const jv *maxv = jargs_get(a, 1, "maxsplit");
        int64_t left = maxv && maxv->t == JV_INT ? maxv->u.i : -1;
        if (sep && (!want_str(c, at, sep, m) || !sep->u.s.n))
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "empty separator");
        if (!jv_new_list(c->arena, out, 0))
            return jinja_oom(c, at);
        size_t i = 0, from = 0;
        if (!jinja_work(c, at, n))
            return false;
        while (i <= n) {
            if (!jinja_work(c, at, 1 + (sep ? sep->u.s.n : 0)))
                return false;
            if (!sep) {
                while (i < n && is_ws(s[i]))
                    i++;
                if (i == n)
                    break;
                from = i;
                if (left == 0) {
                    size_t e = n;
                    while (e > i && is_ws(s[e - 1]))
                        e--;
                    i = e;
                } else {
                    while (i < n && !is_ws(s[i]))
                        i++;
                }
                left--;
                if (!jv_list_push(c->arena, out->u.l, jv_str(s + from, i - from)))
                    return jinja_oom(c, at);
                continue;
            }
            const char *hit = left != 0 ? memmem(s + from, n - from, sep->u.s.s, sep->u.s.n) : NULL;
            size_t e = hit ? (size_t)(hit - s) : n;
            if (!jv_list_push(c->arena, out->u.l, jv_str(s + from, e - from)))
                return jinja_oom(c, at);
            if (!hit)
                break;
            from = e + sep->u.s.n;
            left--;
            i = from;
        }
        return true;
    }
    if (!strcmp(m, "join")) {
        if (!a0 || a0->t != JV_LIST)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "join needs a list");
        strbuf b = {0};
        for (size_t i = 0; i < a0->u.l->n; i++) {
            if (i)
                strbuf_add(&b, s, n);
            if (a0->u.l->items[i].t != JV_STR)
                return strbuf_free(&b), jinja_fail(c, at, TS_ERR_INVALID_ARG, "join needs strings");
            if (!jinja_work(c, at, n + a0->u.l->items[i].u.s.n))
                return strbuf_free(&b), false;
            strbuf_add(&b, a0->u.l->items[i].u.s.s, a0->u.l->items[i].u.s.n);
            if (b.len > c->lim->max_output)
                return strbuf_free(&b), jinja_fail(c, at, TS_ERR_TOO_LONG, "string too long");
        }
        return jinja_make_str(c, at, &b, out);
    }
    return jinja_fail(c, at, TS_ERR_INVALID_ARG, "string has no method '%s'", m);
}

bool jinja_method(jctx *c, const jnode *at, jv *self, const char *name, size_t n, const jargs *a,
                  jv *out)
{
    (void)n;
    const jv *a0 = jargs_get(a, 0, NULL);
    *out = (jv){.t = JV_NONE};
    if (self->t == JV_STR)
        return str_method(c, at, self, name, a, out);
    if (self->t == JV_DICT) {
        jv_dict *d = self->u.d;
        if (!strcmp(name, "get")) {
            jv *v = a0 ? jv_dict_find(&c->w, d, a0) : NULL;
            const jv *def = jargs_get(a, 1, "default");
            *out = v ? *v : def ? *def : (jv){.t = JV_NONE};
            return true;
        }
        bool items = !strcmp(name, "items"), keys = !strcmp(name, "keys");
        if (items || keys || !strcmp(name, "values")) {
            if (!jinja_work(c, at, d->n))
                return false;
            if (!jv_new_list(c->arena, out, d->n))
                return jinja_oom(c, at);
            for (size_t i = 0; i < d->n; i++) {
                jv e = keys ? d->keys[i] : d->vals[i];
                if (items &&
                    (!jv_new_list(c->arena, &e, 2) || !jv_list_push(c->arena, e.u.l, d->keys[i]) ||
                     !jv_list_push(c->arena, e.u.l, d->vals[i])))
                    return jinja_oom(c, at);
                if (items)
                    e.u.l->tuple = true;
                jv_list_push(c->arena, out->u.l, e);
            }
            return true;
        }
    }
    if (self->t == JV_LIST && !strcmp(name, "append")) {
        if (!a0)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "append needs an argument");
        return jv_list_push(c->arena, self->u.l, *a0) || jinja_oom(c, at);
    }
    if (self->t == JV_LIST && !strcmp(name, "pop")) {
        jv_list *l = self->u.l;
        int64_t i = (int64_t)l->n - 1;
        if (a0 && !jinja_get_int(c, at, a0, &i))
            return false;
        if (i < 0)
            i += (int64_t)l->n;
        if (i < 0 || i >= (int64_t)l->n)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "pop index out of range");
        if (!jinja_work(c, at, l->n - (size_t)i))
            return false;
        *out = l->items[i];
        memmove(&l->items[i], &l->items[i + 1], (l->n - (size_t)i - 1) * sizeof(jv));
        l->n--;
        return true;
    }
    return jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s has no method '%s'", jv_type_name(self), name);
}

/* ---- tests ---- */

static const char *const tests[] = {
    "defined", "undefined", "none",        "string",      "mapping",  "iterable", "sequence",
    "number",  "integer",   "float",       "boolean",     "true",     "false",    "equalto",
    "eq",      "==",        "ne",          "!=",          "in",       "sameas",   "lower",
    "upper",   "odd",       "even",        "divisibleby", "callable", "gt",       "lt",
    "ge",      "le",        "greaterthan", "lessthan",    NULL};

bool jinja_test_known(const char *name, size_t n)
{
    for (size_t i = 0; tests[i]; i++)
        if (strlen(tests[i]) == n && !memcmp(tests[i], name, n))
            return true;
    return false;
}

bool jinja_test(jctx *c, const jnode *at, const char *t, size_t n, const jv *v, const jargs *a,
                bool *out)
{
    (void)n;
    const jv *x = jargs_get(a, 0, NULL);
    jv none = {.t = JV_NONE};
    if (!x)
        x = &none;
#define IS(s) !strcmp(t, s)
    if (IS("defined") || IS("undefined"))
        *out = (v->t != JV_UNDEF) == IS("defined");
    else if (IS("none"))
        *out = v->t == JV_NONE;
    else if (IS("string"))
        *out = v->t == JV_STR;
    else if (IS("mapping"))
        *out = v->t == JV_DICT;
    else if (IS("iterable"))
        *out = v->t == JV_STR || v->t == JV_LIST || v->t == JV_DICT || v->t == JV_UNDEF;
    else if (IS("sequence"))
        *out = v->t == JV_STR || v->t == JV_LIST || v->t == JV_DICT;
    else if (IS("number"))
        *out = v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL;
    else if (IS("integer"))
        *out = v->t == JV_INT;
    else if (IS("float"))
        *out = v->t == JV_FLOAT;
    else if (IS("boolean"))
        *out = v->t == JV_BOOL;
    else if (IS("true") || IS("false"))
        *out = v->t == JV_BOOL && v->u.b == IS("true");
    else if (IS("equalto") || IS("eq") || IS("==") || IS("sameas"))
        *out = jv_eq(&c->w, v, x);
    else if (IS("ne") || IS("!="))
        *out = !jv_eq(&c->w, v, x);
    else if (IS("callable"))
        *out = v->t == JV_MACRO || v->t == JV_FUNC;
    else if (IS("in")) {
        jv r;
        if (!jinja_arith(c, at, JO_IN, v, x, &r))
            return false;
        *out = r.u.b;
    } else if (IS("lower") || IS("upper")) {
        bool up = IS("upper");
        *out = v->t == JV_STR;
        if (*out && !jinja_work(c, at, v->u.s.n))
            return false;
        for (size_t i = 0; *out && i < v->u.s.n; i++)
            *out = !(up ? (v->u.s.s[i] >= 'a' && v->u.s.s[i] <= 'z')
                        : (v->u.s.s[i] >= 'A' && v->u.s.s[i] <= 'Z'));
    } else if (IS("odd") || IS("even") || IS("divisibleby")) {
        int64_t i, d = IS("divisibleby") ? 0 : 2;
        if (!jinja_get_int(c, at, v, &i) || (!d && !jinja_get_int(c, at, x, &d)))
            return false;
        if (d == 0)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "division by zero");
        *out = IS("odd") ? i % 2 != 0 : i % d == 0;
    } else {
        static const char *const ops[] = {"lt", "lessthan", "le", "gt", "greaterthan", "ge"};
        static const int codes[] = {JO_LT, JO_LT, JO_LE, JO_GT, JO_GT, JO_GE};
        for (int i = 0; i < 6; i++) {
            if (IS(ops[i])) {
                jv r;
                if (!jinja_arith(c, at, codes[i], v, x, &r))
                    return false;
                *out = r.u.b;
                return true;
            }
        }
        return jinja_fail(c, at, TS_ERR_UNSUPPORTED, "unsupported test '%s'", t);
    }
#undef IS
    return true;
}

/* ---- globals ---- */

static bool kwargs_dict(jctx *c, const jnode *at, const jargs *a, bool ns, jv *out)
{
    if (!jv_new_dict(c->arena, out, a->n))
        return jinja_oom(c, at);
    out->u.d->ns = ns;
    for (size_t i = 0; i < a->n; i++) {
        if (!a->names[i]) { /* namespace({...}) / dict({...}): start from a mapping */
            if (a->v[i].t != JV_DICT)
                return jinja_fail(c, at, TS_ERR_INVALID_ARG, "expected keyword arguments");
            for (size_t k = 0; k < a->v[i].u.d->n; k++)
                if (!jv_dict_set(c->arena, &c->w, out->u.d, a->v[i].u.d->keys[k],
                                 a->v[i].u.d->vals[k]))
                    return jinja_oom(c, at);
        } else if (!jv_dict_set(c->arena, &c->w, out->u.d, jv_str(a->names[i], a->name_n[i]),
                                a->v[i])) {
            return jinja_oom(c, at);
        }
    }
    return true;
}

bool jinja_global(jctx *c, const jnode *at, int fn, const jargs *a, jv *out)
{
    const jv *a0 = jargs_get(a, 0, NULL);
    switch (fn) {
    case JF_RANGE: {
        int64_t r[3] = {0, 0, 1};
        size_t k = 0;
        for (; k < 3 && jargs_get(a, k, NULL); k++)
            if (!jinja_get_int(c, at, jargs_get(a, k, NULL), &r[k]))
                return false;
        if (k == 0)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "range needs an argument");
        if (k == 1)
            r[1] = r[0], r[0] = 0;
        if (r[2] == 0)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "range step cannot be zero");
        if (!jv_new_list(c->arena, out, 0))
            return jinja_oom(c, at);
        for (int64_t i = r[0]; r[2] > 0 ? i < r[1] : i > r[1]; i += r[2])
            if (!jinja_step(c, at) || !jv_list_push(c->arena, out->u.l, jv_int(i)))
                return c->st != TS_OK ? false : jinja_oom(c, at);
        return true;
    }
    case JF_NAMESPACE:
    case JF_DICT:
        return kwargs_dict(c, at, a, fn == JF_NAMESPACE, out);
    case JF_RAISE: {
        strbuf b = {0};
        if (a0)
            jv_to_str(&c->w, &b, a0);
        bool r =
            jinja_fail(c, NULL, TS_ERR_INVALID_ARG, "%s", b.s ? b.s : "template raised an error");
        strbuf_free(&b);
        return r;
    }
    case JF_STRFTIME: {
        if (!want_str(c, at, a0, "strftime_now"))
            return false;
        char fmt[128], buf[256];
        struct tm tm;
        time_t now = c->now;
        if (a0->u.s.n >= sizeof fmt)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "strftime_now format too long");
        memcpy(fmt, a0->u.s.s, a0->u.s.n);
        fmt[a0->u.s.n] = '\0';
        if (!gmtime_r(&now, &tm))
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "bad time");
        size_t len = strftime(buf, sizeof buf, fmt, &tm);
        strbuf b = {0};
        strbuf_add(&b, buf, len);
        return jinja_make_str(c, at, &b, out);
    }
    default:
        return jinja_fail(c, at, TS_ERR_INTERNAL, "unknown function");
    }
}
