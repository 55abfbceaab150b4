/* jinja_ctx.c: the render state's helpers that every part of the interpreter uses:
 * errors, the step, work and nesting budget, output, scopes and variables, arguments,
 * strings built into the arena, and code points. Calls nothing above jinja_value.c. */
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

/* v as a list: a list itself, a dict's keys, a string's characters, nothing for undefined. */
bool jinja_as_list(jctx *c, const jnode *at, const jv *v, jv *out)
{
    if (v->t == JV_LIST) {
        *out = *v;
        return true;
    }
    if (!jv_new_list(c->arena, out, 0))
        return jinja_oom(c, at);
    if (!jinja_work(c, at, v->t == JV_DICT ? v->u.d->n : v->t == JV_STR ? v->u.s.n : 0))
        return false;
    if (v->t == JV_DICT) {
        for (size_t i = 0; i < v->u.d->n; i++)
            if (!jv_list_push(c->arena, out->u.l, v->u.d->keys[i]))
                return jinja_oom(c, at);
    } else if (v->t == JV_STR) {
        for (size_t o = 0; o < v->u.s.n;) {
            size_t k = jinja_cp_offset(v->u.s.s + o, v->u.s.n - o, 1);
            if (!jv_list_push(c->arena, out->u.l, jv_str(v->u.s.s + o, k)))
                return jinja_oom(c, at);
            o += k;
        }
    } else if (v->t != JV_UNDEF) {
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s is not iterable", jv_type_name(v));
    }
    return true;
}

/* item.attr (dotted: "a.b") or the item itself when attr is NULL. */
bool jinja_attr_of(jctx *c, const jnode *at, const jv *item, const jv *attr, jv *out)
{
    *out = *item;
    if (!attr || attr->t == JV_NONE)
        return true;
    if (attr->t == JV_INT) {
        *out = item->t == JV_LIST && attr->u.i >= 0 && (size_t)attr->u.i < item->u.l->n
                   ? item->u.l->items[attr->u.i]
                   : (jv){.t = JV_UNDEF};
        return true;
    }
    if (attr->t != JV_STR)
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "attribute must be a string");
    const char *p = attr->u.s.s, *end = p + attr->u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        jv *v = out->t == JV_DICT ? jv_dict_get(&c->w, out->u.d, p, n) : NULL;
        *out = v ? *v : (jv){.t = JV_UNDEF};
        if (!dot)
            break;
        p = dot + 1;
    }
    return true;
}
