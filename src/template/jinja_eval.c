/* jinja_eval.c: runs the syntax tree: statements write to the current output, expressions
 * give values. Every node counts a step, values come from a bounded arena, output is
 * bounded, and macro calls count towards the nesting depth. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

/* The budget's own message: whatever error a function reports after the budget ran out
 * (a comparison "not equal", a value "cannot print") is that, not a fault of the template. */
static void budget_msg(const jctx *c, ts_status *st, char *msg, size_t n)
{
    if (c->w.why == JB_CANCELLED) {
        *st = TS_ERR_CANCELLED;
        snprintf(msg, n, "template rendering cancelled");
    } else if (c->w.why == JB_BYTES) {
        *st = TS_ERR_TOO_LONG;
        snprintf(msg, n, "template built a string over %zu bytes", c->w.max_bytes);
    } else {
        *st = TS_ERR_TOO_LONG;
        snprintf(msg, n, "template ran over %zu units of work", c->w.max_work);
    }
}

bool jinja_fail(jctx *c, const jnode *at, ts_status st, const char *fmt, ...)
{
    if (c->st != TS_OK)
        return false;
    char msg[220];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->w.why != JB_OK)
        budget_msg(c, &st, msg, sizeof msg);
    if (at)
        c->st = ts_error_set(c->err, st, "template line %d col %d: %s", at->line, at->col, msg);
    else
        c->st = ts_error_set(c->err, st, "%s", msg);
    return false;
}

bool jinja_step(jctx *c, const jnode *at)
{
    if (++c->steps > c->lim->max_steps)
        return jinja_fail(c, at, TS_ERR_TOO_LONG, "template ran over %zu steps", c->lim->max_steps);
    return jinja_work(c, at, 1);
}

bool jinja_work(jctx *c, const jnode *at, size_t units)
{
    return jv_charge(&c->w, units) || jinja_fail(c, at, TS_ERR_TOO_LONG, "out of work");
}

bool jinja_nest(jctx *c, const jnode *at)
{
    if (++c->nest > c->lim->max_eval_depth) {
        c->nest--;
        return jinja_fail(c, at, TS_ERR_TOO_LONG, "template nested over %d evaluations deep",
                          c->lim->max_eval_depth);
    }
    return true;
}

bool jinja_oom(jctx *c, const jnode *at)
{
    return jinja_fail(c, at, TS_ERR_TOO_LONG, "template used over %zu bytes of memory",
                      c->lim->max_memory);
}

bool jinja_emit(jctx *c, const jnode *at, const char *s, size_t n)
{
    if (c->out->len + n > c->lim->max_output)
        return jinja_fail(c, at, TS_ERR_TOO_LONG, "template output over %zu bytes",
                          c->lim->max_output);
    return jinja_work(c, at, n) && (strbuf_add(c->out, s, n) || jinja_oom(c, at));
}

jv *jinja_lookup(jctx *c, jinja_scope *s, const char *name, size_t n)
{
    for (; s; s = s->parent) {
        jv *v = jv_dict_get(&c->w, &s->vars, name, n);
        if (v)
            return v;
    }
    return NULL;
}

bool jinja_set_var(jctx *c, const jnode *at, jinja_scope *s, const char *name, jv v)
{
    return jv_dict_set(c->arena, &c->w, &s->vars, jv_str(name, strlen(name)), v) ||
           jinja_oom(c, at);
}

jinja_scope *jinja_new_scope(jctx *c, const jnode *at, jinja_scope *parent)
{
    jinja_scope *s = jinja_alloc(c->arena, sizeof *s);
    if (!s)
        return jinja_oom(c, at), NULL;
    s->parent = parent;
    return s;
}

/* ---- calls ---- */

typedef struct call_args {
    jv *pos;
    size_t n_pos;
    const jnode **kw; /* the JN_KWARG nodes, for their names */
    jv *kw_vals;
    const char **names; /* for jargs: NULL for positional, then the keyword names */
    size_t *name_n;
    jv *all;
    size_t n_kw;
} call_args;

static bool eval_args(jctx *c, jinja_scope *s, const jnode *e, call_args *a)
{
    size_t n = e->n;
    memset(a, 0, sizeof *a);
    if (!n)
        return true;
    a->all = jinja_alloc(c->arena, n * sizeof *a->all);
    a->kw = jinja_alloc(c->arena, n * sizeof *a->kw);
    a->names = jinja_alloc(c->arena, n * sizeof *a->names);
    a->name_n = jinja_alloc(c->arena, n * sizeof *a->name_n);
    if (!a->all || !a->kw || !a->names || !a->name_n)
        return jinja_oom(c, e);
    /* Positional arguments first, then keywords, so both index from .all. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const jnode *k = e->kids[i];
            if ((k->k == JN_KWARG) != pass)
                continue;
            size_t at = pass ? a->n_pos + a->n_kw : a->n_pos;
            if (!jinja_eval(c, s, pass ? k->a : k, &a->all[at]))
                return false;
            if (pass) {
                a->kw[a->n_kw++] = k;
                a->names[at] = k->name;
                a->name_n[at] = k->name_n;
            } else {
                a->n_pos++;
            }
        }
    }
    a->pos = a->all;
    a->kw_vals = a->all + a->n_pos;
    return true;
}

static jargs as_jargs(const call_args *a)
{
    return (jargs){.v = a->all, .names = a->names, .name_n = a->name_n, .n = a->n_pos + a->n_kw};
}

const jv *jargs_get(const jargs *a, size_t pos, const char *name)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->names[i] && name && !strcmp(a->names[i], name))
            return &a->v[i];
    size_t seen = 0;
    for (size_t i = 0; i < a->n; i++)
        if (!a->names[i] && seen++ == pos)
            return &a->v[i];
    return NULL;
}

bool jinja_call_macro(jctx *c, const jnode *at, const jv *m, const jv *args, size_t n_args,
                      const jnode *const *kw, const jv *kw_vals, size_t n_kw, const jv *caller,
                      jv *out)
{
    const jnode *def = m->u.m.node;
    if (++c->depth > c->lim->max_depth)
        return jinja_fail(c, at, TS_ERR_TOO_LONG, "macro calls nested over %d deep",
                          c->lim->max_depth);
    jinja_scope *s = jinja_new_scope(c, at, m->u.m.scope);
    if (!s)
        return false;
    for (size_t i = 0; i < def->n_names; i++) {
        jv v = {.t = JV_UNDEF};
        bool have = false;
        if (i < n_args) {
            v = args[i];
            have = true;
        }
        for (size_t k = 0; k < n_kw && !have; k++)
            if (!strcmp(kw[k]->name, def->names[i]))
                v = kw_vals[k], have = true;
        if (!have && def->kids[i] && !jinja_eval(c, s, def->kids[i], &v))
            return false;
        if (!jinja_set_var(c, at, s, def->names[i], v))
            return false;
    }
    if (caller && !jinja_set_var(c, at, s, "caller", *caller))
        return false;
    int jump = c->jump;
    bool ok = jinja_capture(c, s, def->b, out);
    c->jump = jump;
    c->depth--;
    return ok;
}

bool jinja_eval_call(jctx *c, jinja_scope *s, const jnode *e, const jv *caller, jv *out)
{
    call_args a;
    const jnode *f = e->a;
    if (f->k == JN_ATTR) {
        jv self;
        if (!jinja_eval(c, s, f->a, &self) || !eval_args(c, s, e, &a))
            return false;
        jargs ja = as_jargs(&a);
        return jinja_method(c, e, &self, f->name, f->name_n, &ja, out);
    }
    jv fn;
    if (!jinja_eval(c, s, f, &fn) || !eval_args(c, s, e, &a))
        return false;
    if (fn.t == JV_MACRO)
        return jinja_call_macro(c, e, &fn, a.pos, a.n_pos, a.kw, a.kw_vals, a.n_kw, caller, out);
    if (fn.t == JV_FUNC) {
        jargs ja = as_jargs(&a);
        return jinja_global(c, e, fn.u.fn, &ja, out);
    }
    return jinja_fail(c, e, TS_ERR_INVALID_ARG, "%s is not callable", jv_type_name(&fn));
}

/* ---- expressions ---- */

bool jinja_make_str(jctx *c, const jnode *at, strbuf *b, jv *out)
{
    if (!jv_fits(&c->w, b->len) || !jv_charge(&c->w, b->len)) {
        strbuf_free(b);
        return jinja_fail(c, at, TS_ERR_TOO_LONG, "string too long");
    }
    char *t = b->len ? jinja_alloc(c->arena, b->len) : NULL;
    bool ok = !b->failed && (!b->len || t);
    if (ok) {
        if (b->len)
            memcpy(t, b->s, b->len);
        *out = jv_str(t ? t : "", b->len);
    }
    strbuf_free(b);
    return ok || jinja_oom(c, at);
}

/* The byte offset of code point i of s (n bytes), or n when past the end. */
size_t jinja_cp_offset(const char *s, size_t n, int64_t i)
{
    size_t o = 0;
    while (o < n && i > 0) {
        o++;
        while (o < n && ((unsigned char)s[o] & 0xC0) == 0x80)
            o++;
        i--;
    }
    return o;
}

int64_t jinja_cp_count(const char *s, size_t n)
{
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

bool jinja_get_int(jctx *c, const jnode *at, const jv *v, int64_t *out)
{
    if (v->t == JV_INT || v->t == JV_BOOL) {
        *out = v->t == JV_INT ? v->u.i : v->u.b;
        return true;
    }
    return jinja_fail(c, at, TS_ERR_INVALID_ARG, "expected an integer, got %s", jv_type_name(v));
}

static bool eval_slice(jctx *c, const jnode *e, const jv *obj, const jv *b, const jv *d,
                       const jv *st, jv *out)
{
    int64_t len, lo, hi, stp = 1;
    if (obj->t == JV_LIST)
        len = (int64_t)obj->u.l->n;
    else if (obj->t == JV_STR)
        len = jinja_cp_count(obj->u.s.s, obj->u.s.n);
    else
        return jinja_fail(c, e, TS_ERR_INVALID_ARG, "cannot slice %s", jv_type_name(obj));
    if (obj->t == JV_STR && !jinja_work(c, e, obj->u.s.n))
        return false;
    if (st->t != JV_UNDEF && st->t != JV_NONE && !jinja_get_int(c, e, st, &stp))
        return false;
    if (stp == 0)
        return jinja_fail(c, e, TS_ERR_INVALID_ARG, "slice step cannot be zero");
    lo = stp > 0 ? 0 : len - 1;
    hi = stp > 0 ? len : -1;
    const jv *ends[2] = {b, d};
    int64_t *vals[2] = {&lo, &hi};
    for (int i = 0; i < 2; i++) {
        if (ends[i]->t == JV_UNDEF || ends[i]->t == JV_NONE)
            continue;
        int64_t x = 0;
        if (!jinja_get_int(c, e, ends[i], &x))
            return false;
        if (x < 0)
            x += len;
        if (stp > 0)
            x = x < 0 ? 0 : x > len ? len : x;
        else
            x = x < -1 ? -1 : x > len - 1 ? len - 1 : x;
        *vals[i] = x;
    }
    strbuf sb = {0};
    jv list;
    if (obj->t == JV_LIST && !jv_new_list(c->arena, &list, 0))
        return jinja_oom(c, e);
    /* A string is walked once with a cursor (o, the byte offset of code point at), so a
     * slice costs the string's length, not the length times the items taken. */
    const char *str = obj->t == JV_STR ? obj->u.s.s : NULL;
    size_t n = obj->t == JV_STR ? obj->u.s.n : 0, o = 0;
    int64_t at = 0;
    for (int64_t i = lo; stp > 0 ? i < hi : i > hi; i += stp) {
        if (!jinja_step(c, e))
            return strbuf_free(&sb), false;
        if (obj->t == JV_LIST) {
            if (!jv_list_push(c->arena, list.u.l, obj->u.l->items[i]))
                return jinja_oom(c, e);
            continue;
        }
        for (; at < i; at++) /* forward to code point i */
            o += jinja_cp_offset(str + o, n - o, 1);
        for (; at > i; at--) /* back to code point i */
            while (o > 0 && ((unsigned char)str[--o] & 0xC0) == 0x80)
                ;
        if (!jinja_work(c, e, (size_t)(stp < 0 ? -stp : stp)))
            return strbuf_free(&sb), false;
        strbuf_add(&sb, str + o, jinja_cp_offset(str + o, n - o, 1));
    }
    if (obj->t == JV_LIST) {
        *out = list;
        return true;
    }
    return jinja_make_str(c, e, &sb, out);
}

/* obj[key], or obj.key for attributes (attr): Jinja tries both, missing gives undefined. */
static bool get_item(jctx *c, const jnode *e, const jv *obj, const jv *key, jv *out)
{
    *out = (jv){.t = JV_UNDEF};
    if (obj->t == JV_UNDEF)
        return jinja_fail(c, e, TS_ERR_INVALID_ARG, "'%s' of an undefined value",
                          e->name ? e->name : "item");
    if (obj->t == JV_DICT) {
        jv *v = jv_dict_find(&c->w, obj->u.d, key);
        if (v)
            *out = *v;
    } else if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT)) {
        if (obj->t == JV_STR && !jinja_work(c, e, obj->u.s.n))
            return false;
        int64_t len =
            obj->t == JV_LIST ? (int64_t)obj->u.l->n : jinja_cp_count(obj->u.s.s, obj->u.s.n);
        int64_t i = key->u.i < 0 ? key->u.i + len : key->u.i;
        if (i >= 0 && i < len) {
            if (obj->t == JV_LIST) {
                *out = obj->u.l->items[i];
            } else {
                size_t o = jinja_cp_offset(obj->u.s.s, obj->u.s.n, i);
                *out = jv_str(obj->u.s.s + o, jinja_cp_offset(obj->u.s.s + o, obj->u.s.n - o, 1));
            }
        }
    }
    return true;
}

static bool eval_node(jctx *c, jinja_scope *s, const jnode *e, jv *out)
{
    *out = (jv){.t = JV_UNDEF};
    jv x, y, z;
    switch (e->k) {
    case JN_LIT:
        *out = e == c->hole ? c->hole_val : e->lit;
        return true;
    case JN_NAME: {
        static const char *const fns[] = {"range", "namespace", "raise_exception", "strftime_now",
                                          "dict"};
        jv *v = jinja_lookup(c, s, e->name, e->name_n);
        if (v) {
            *out = *v;
            return true;
        }
        for (int i = 0; i < 5; i++)
            if (!strcmp(e->name, fns[i]))
                *out = (jv){.t = JV_FUNC, .u.fn = i};
        return true;
    }
    case JN_LIST:
    case JN_DICT:
        if (!(e->k == JN_LIST ? jv_new_list(c->arena, out, e->n)
                              : jv_new_dict(c->arena, out, e->n / 2)))
            return jinja_oom(c, e);
        if (e->k == JN_LIST)
            out->u.l->tuple = e->op != 0;
        for (size_t i = 0; i < e->n; i += e->k == JN_LIST ? 1 : 2) {
            if (!jinja_eval(c, s, e->kids[i], &x))
                return false;
            if (e->k == JN_LIST) {
                if (!jv_list_push(c->arena, out->u.l, x))
                    return jinja_oom(c, e);
            } else if (!jinja_eval(c, s, e->kids[i + 1], &y) ||
                       !jv_dict_set(c->arena, &c->w, out->u.d, x, y)) {
                return c->st != TS_OK ? false : jinja_oom(c, e);
            }
        }
        return true;
    case JN_ATTR:
        return jinja_eval(c, s, e->a, &x) &&
               get_item(c, e, &x, &(jv){.t = JV_STR, .u.s = {e->name, e->name_n}}, out);
    case JN_ITEM:
        return jinja_eval(c, s, e->a, &x) && jinja_eval(c, s, e->b, &y) &&
               get_item(c, e, &x, &y, out);
    case JN_SLICE: {
        jv ends[3] = {{.t = JV_UNDEF}, {.t = JV_UNDEF}, {.t = JV_UNDEF}};
        const jnode *parts[3] = {e->b, e->c, e->d};
        if (!jinja_eval(c, s, e->a, &x))
            return false;
        for (int i = 0; i < 3; i++)
            if (parts[i] && !jinja_eval(c, s, parts[i], &ends[i]))
                return false;
        return eval_slice(c, e, &x, &ends[0], &ends[1], &ends[2], out);
    }
    case JN_NEG:
    case JN_POS:
        if (!jinja_eval(c, s, e->a, &x))
            return false;
        if (x.t == JV_INT)
            *out = jv_int(e->k == JN_NEG ? -x.u.i : x.u.i);
        else if (x.t == JV_FLOAT)
            *out = (jv){.t = JV_FLOAT, .u.f = e->k == JN_NEG ? -x.u.f : x.u.f};
        else
            return jinja_fail(c, e, TS_ERR_INVALID_ARG, "bad operand %s for unary sign",
                              jv_type_name(&x));
        return true;
    case JN_NOT:
        if (!jinja_eval(c, s, e->a, &x))
            return false;
        *out = jv_bool(!jv_truthy(&x));
        return true;
    case JN_AND:
    case JN_OR:
        if (!jinja_eval(c, s, e->a, out))
            return false;
        if (jv_truthy(out) == (e->k == JN_OR))
            return true;
        return jinja_eval(c, s, e->b, out);
    case JN_BIN:
        return jinja_eval(c, s, e->a, &x) && jinja_eval(c, s, e->b, &y) &&
               jinja_arith(c, e, e->op, &x, &y, out);
    case JN_COND:
        if (!jinja_eval(c, s, e->a, &x))
            return false;
        if (jv_truthy(&x))
            return jinja_eval(c, s, e->b, out);
        return e->c ? jinja_eval(c, s, e->c, out) : true;
    case JN_FILTER:
    case JN_TEST: {
        call_args a;
        if (!jinja_eval(c, s, e->a, &x) || !eval_args(c, s, e, &a))
            return false;
        jargs ja = as_jargs(&a);
        if (e->k == JN_FILTER)
            return jinja_filter(c, s, e, e->name, e->name_n, &x, &ja, out);
        bool r;
        if (!jinja_test(c, e, e->name, e->name_n, &x, &ja, &r))
            return false;
        *out = jv_bool(r != (e->op != 0));
        return true;
    }
    case JN_CALL:
        return jinja_eval_call(c, s, e, NULL, out);
    default:
        (void)z;
        return jinja_fail(c, e, TS_ERR_INTERNAL, "not an expression");
    }
}

bool jinja_eval(jctx *c, jinja_scope *s, const jnode *e, jv *out)
{
    if (!jinja_step(c, e) || !jinja_nest(c, e))
        return false;
    bool ok = eval_node(c, s, e, out);
    c->nest--;
    /* A value computed after the budget ran out may be wrong (a comparison cut short):
     * it never escapes. */
    if (ok && c->w.why != JB_OK)
        ok = jinja_fail(c, e, TS_ERR_TOO_LONG, "out of work");
    return ok;
}
