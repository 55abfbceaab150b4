/* jinja_eval.c: evaluates expressions to values, and calls (macros, methods, globals).
 * Every node counts a step, values come from a bounded arena, and macro calls count
 * towards the nesting depth.
 * Mutual recursion with jinja_exec.c, the language's own: a macro's body is statements
 * (jinja_call_macro -> jinja_capture), and statements hold expressions (jinja_exec ->
 * jinja_eval, jinja_eval_call). Both count every frame in jctx.nest. */
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

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

/* Calls a macro with evaluated arguments; the result is its output as a string. */
static bool jinja_call_macro(jctx *c, const jnode *at, const jv *m, const jv *args,
                             size_t n_args, const jnode *const *kw, const jv *kw_vals,
                             size_t n_kw, const jv *caller, jv *out)
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
