/* jinja_exec.c: runs statements (output, if, for with its loop variable, set, macro, call
 * and filter blocks, break and continue) and renders a template. A for body and a macro get
 * their own scope, as in Jinja, so a {% set %} inside a loop does not leak out of it
 * (which is why templates use namespace()).
 * Mutual recursion with jinja_eval.c, the language's own: statements hold expressions
 * (jinja_eval, jinja_eval_call), and a macro's body is statements (jinja_call_macro ->
 * jinja_capture). Both count every frame in jctx.nest. */
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

/* Runs a statement. */
static bool jinja_exec(jctx *c, jinja_scope *s, const jnode *e);

bool jinja_capture(jctx *c, jinja_scope *s, const jnode *body, jv *out)
{
    strbuf buf = {0}, *saved = c->out;
    c->out = &buf;
    bool ok = jinja_exec(c, s, body);
    c->out = saved;
    if (!ok) {
        strbuf_free(&buf);
        return false;
    }
    return jinja_make_str(c, body, &buf, out);
}

/* The items a for loop walks: a list's items, a dict's keys, a string's characters. */
static bool iterable(jctx *c, const jnode *at, const jv *v, jv *out)
{
    if (v->t == JV_LIST) {
        *out = *v;
        return true;
    }
    if (!jv_new_list(c->arena, out, 0))
        return jinja_oom(c, at);
    if (v->t == JV_UNDEF)
        return true;
    if (!jinja_work(c, at, v->t == JV_DICT ? v->u.d->n : v->t == JV_STR ? v->u.s.n : 0))
        return false;
    if (v->t == JV_DICT) {
        for (size_t i = 0; i < v->u.d->n; i++)
            if (!jv_list_push(c->arena, out->u.l, v->u.d->keys[i]))
                return jinja_oom(c, at);
        return true;
    }
    if (v->t == JV_STR) {
        for (size_t o = 0; o < v->u.s.n;) {
            size_t k = jinja_cp_offset(v->u.s.s + o, v->u.s.n - o, 1);
            if (!jv_list_push(c->arena, out->u.l, jv_str(v->u.s.s + o, k)))
                return jinja_oom(c, at);
            o += k;
        }
        return true;
    }
    return jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s is not iterable", jv_type_name(v));
}

static bool bind_targets(jctx *c, const jnode *e, jinja_scope *s, const jv *item)
{
    if (e->n_names == 1)
        return jinja_set_var(c, e, s, e->names[0], *item);
    if (item->t != JV_LIST || item->u.l->n != e->n_names)
        return jinja_fail(c, e, TS_ERR_INVALID_ARG, "cannot unpack %s into %zu names",
                          jv_type_name(item), e->n_names);
    for (size_t i = 0; i < e->n_names; i++)
        if (!jinja_set_var(c, e, s, e->names[i], item->u.l->items[i]))
            return false;
    return true;
}

static bool loop_var(jctx *c, const jnode *e, jinja_scope *s, const jv_list *items, size_t i)
{
    jv loop;
    int64_t n = (int64_t)items->n, k = (int64_t)i;
    if (!jv_new_dict(c->arena, &loop, 10))
        return jinja_oom(c, e);
    struct {
        const char *name;
        jv v;
    } f[] = {
        {"index", jv_int(k + 1)},
        {"index0", jv_int(k)},
        {"revindex", jv_int(n - k)},
        {"revindex0", jv_int(n - k - 1)},
        {"first", jv_bool(k == 0)},
        {"last", jv_bool(k == n - 1)},
        {"length", jv_int(n)},
        {"previtem", k > 0 ? items->items[k - 1] : (jv){.t = JV_UNDEF}},
        {"nextitem", k < n - 1 ? items->items[k + 1] : (jv){.t = JV_UNDEF}},
    };
    for (size_t j = 0; j < sizeof f / sizeof *f; j++)
        if (f[j].v.t != JV_UNDEF &&
            !jv_dict_set(c->arena, &c->w, loop.u.d, jv_str(f[j].name, strlen(f[j].name)), f[j].v))
            return jinja_oom(c, e);
    return jinja_set_var(c, e, s, "loop", loop);
}

static bool exec_for(jctx *c, jinja_scope *s, const jnode *e)
{
    jv v, all;
    if (!jinja_eval(c, s, e->a, &v) || !iterable(c, e, &v, &all))
        return false;
    jv_list *items = all.u.l;
    if (e->d) { /* {% for x in xs if cond %}: loop.length counts the kept items */
        jv kept;
        if (!jv_new_list(c->arena, &kept, 0))
            return jinja_oom(c, e);
        for (size_t i = 0; i < items->n; i++) {
            jinja_scope *t = jinja_new_scope(c, e, s);
            jv ok;
            if (!t || !bind_targets(c, e, t, &items->items[i]) || !jinja_eval(c, t, e->d, &ok))
                return false;
            if (jv_truthy(&ok) && !jv_list_push(c->arena, kept.u.l, items->items[i]))
                return jinja_oom(c, e);
        }
        items = kept.u.l;
    }
    for (size_t i = 0; i < items->n; i++) {
        jinja_scope *t = jinja_new_scope(c, e, s);
        if (!t || !bind_targets(c, e, t, &items->items[i]) || !loop_var(c, e, t, items, i) ||
            !jinja_exec(c, t, e->b))
            return false;
        int jump = c->jump;
        c->jump = JUMP_NONE;
        if (jump == JUMP_BREAK)
            break;
    }
    if (items->n == 0 && e->c)
        return jinja_exec(c, s, e->c);
    return true;
}

static bool exec_set(jctx *c, jinja_scope *s, const jnode *e)
{
    jv v;
    if (!(e->k == JN_SET ? jinja_eval(c, s, e->b, &v) : jinja_capture(c, s, e->b, &v)))
        return false;
    if (!e->name)
        return jinja_set_var(c, e, s, e->names[0], v);
    jv *ns = jinja_lookup(c, s, e->names[0], strlen(e->names[0]));
    if (!ns || ns->t != JV_DICT || !ns->u.d->ns)
        return jinja_fail(c, e, TS_ERR_INVALID_ARG, "cannot set '%s.%s': not a namespace",
                          e->names[0], e->name);
    return jv_dict_set(c->arena, &c->w, ns->u.d, jv_str(e->name, e->name_n), v) ||
           jinja_oom(c, e);
}

static bool exec_node(jctx *c, jinja_scope *s, const jnode *e)
{
    jv v;
    strbuf b = {0};
    switch (e->k) {
    case JN_BODY:
        for (size_t i = 0; i < e->n && c->jump == JUMP_NONE; i++)
            if (!jinja_exec(c, s, e->kids[i]))
                return false;
        return true;
    case JN_TEXT:
        return jinja_emit(c, e, e->lit.u.s.s, e->lit.u.s.n);
    case JN_OUTPUT:
        if (!jinja_eval(c, s, e->a, &v))
            return false;
        if (v.t == JV_STR)
            return jinja_emit(c, e, v.u.s.s, v.u.s.n);
        if (!jv_to_str(&c->w, &b, &v)) {
            strbuf_free(&b);
            return jinja_fail(c, e, TS_ERR_INVALID_ARG, "cannot print this value");
        }
        bool ok = jinja_emit(c, e, b.s ? b.s : "", b.len);
        strbuf_free(&b);
        return ok;
    case JN_IF:
        if (!jinja_eval(c, s, e->a, &v))
            return false;
        if (jv_truthy(&v))
            return jinja_exec(c, s, e->b);
        return e->c ? jinja_exec(c, s, e->c) : true;
    case JN_FOR:
        return exec_for(c, s, e);
    case JN_SET:
    case JN_SET_BLOCK:
        return exec_set(c, s, e);
    case JN_MACRO:
        return jinja_set_var(c, e, s, e->name, (jv){.t = JV_MACRO, .u.m = {e, s}});
    case JN_CALL_BLOCK: {
        jv caller = {.t = JV_MACRO, .u.m = {e, s}};
        return jinja_eval_call(c, s, e->a, &caller, &v) && jinja_emit(c, e, v.u.s.s, v.u.s.n);
    }
    case JN_FILTER_BLOCK: {
        const jnode *hole = c->hole;
        jv hole_val = c->hole_val;
        if (!jinja_capture(c, s, e->b, &c->hole_val))
            return false;
        c->hole = e->c;
        bool done = jinja_eval(c, s, e->a, &v);
        c->hole = hole;
        c->hole_val = hole_val;
        if (!done)
            return false;
        if (v.t == JV_STR)
            return jinja_emit(c, e, v.u.s.s, v.u.s.n);
        if (!jv_to_str(&c->w, &b, &v))
            return strbuf_free(&b), jinja_fail(c, e, TS_ERR_INVALID_ARG, "cannot print this value");
        done = jinja_emit(c, e, b.s ? b.s : "", b.len);
        strbuf_free(&b);
        return done;
    }
    case JN_BREAK:
        c->jump = JUMP_BREAK;
        return true;
    case JN_CONTINUE:
        c->jump = JUMP_CONTINUE;
        return true;
    default:
        return jinja_fail(c, e, TS_ERR_INTERNAL, "not a statement");
    }
}

static bool jinja_exec(jctx *c, jinja_scope *s, const jnode *e)
{
    if (!jinja_step(c, e) || !jinja_nest(c, e))
        return false;
    bool ok = exec_node(c, s, e);
    c->nest--;
    if (ok && c->w.why != JB_OK)
        ok = jinja_fail(c, e, TS_ERR_TOO_LONG, "out of work");
    return ok;
}

ts_status jinja_render(const jinja_template *t, const cJSON *vars, time_t now,
                       const atomic_bool *cancel, char **out, ts_error *err)
{
    jinja_arena arena = {.limit = t->limits.max_memory};
    strbuf buf = {0};
    jctx c = {.arena = &arena,
              .lim = &t->limits,
              .out = &buf,
              .now = now,
              .err = err,
              .w = {.max_work = t->limits.max_work,
                    .max_bytes = t->limits.max_output,
                    .cancel = cancel}};
    jinja_scope *root = jinja_new_scope(&c, t->root, NULL);
    *out = NULL;
    if (root && vars) {
        for (const cJSON *j = vars->child; j && c.st == TS_OK; j = j->next) {
            jv v;
            if (!j->string || !jv_from_json(&arena, &c.w, j, &v, 0))
                jinja_fail(&c, NULL, TS_ERR_INVALID_ARG,
                           "variable '%s' cannot be passed to a template",
                           j->string ? j->string : "");
            else
                jinja_set_var(&c, t->root, root, j->string, v);
        }
    }
    if (c.st == TS_OK && jinja_exec(&c, root, t->root)) {
        if (!buf.s && !strbuf_add(&buf, "", 0))
            jinja_oom(&c, t->root);
        else if (buf.failed)
            jinja_oom(&c, t->root);
        else
            *out = buf.s, buf.s = NULL;
    }
    strbuf_free(&buf);
    jinja_arena_free(&arena);
    if (c.st == TS_OK && !*out)
        return ts_error_set(err, TS_ERR_INTERNAL, "template render failed");
    return c.st;
}
