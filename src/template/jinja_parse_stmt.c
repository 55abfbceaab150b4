/* jinja_parse_stmt.c: the statement half of the parser ({% if %}, {% for %}, {% set %},
 * {% macro %}, {% call %}, {% filter %}, break, continue), and the entry point. */
#include <stdlib.h>
#include <string.h>

#include "template/jinja_parser.h"

static jnode *parse_body(jparser *p, const char *const *stops, const char **stopped);

static bool block_end(jparser *p)
{
    return jp_peek(p)->t == JT_BLOCK_END ||
           jp_fail(p, jp_peek(p), TS_ERR_FORMAT, "expected the end of the statement");
}

/* After a {% tag %}'s body: consumes the closing tag named end ("{% endif %}"). */
static bool close_tag(jparser *p, const char *stopped, const char *end, const jtok *open)
{
    if (!stopped || strcmp(stopped, end))
        return jp_fail(p, open, TS_ERR_FORMAT, "missing {%% %s %%}", end);
    return block_end(p) && jp_next(p);
}

static jnode *parse_if(jparser *p, const jtok *k)
{
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    jnode *e = jp_node(p, JN_IF, k);
    const char *stopped = NULL;
    if (!e || !(e->a = jp_expr(p)) || !block_end(p) || !jp_next(p) ||
        !(e->b = parse_body(p, stops, &stopped)))
        return NULL;
    if (stopped && !strcmp(stopped, "elif")) {
        jtok *at = jp_peek(p);
        e->c = jp_node(p, JN_BODY, at);
        jnode *inner = e->c ? parse_if(p, at) : NULL;
        size_t cap = 0;
        if (!inner || !jp_append(p, &e->c->kids, &e->c->n, &cap, inner))
            return NULL;
        return e; /* the inner if consumed the endif */
    }
    if (stopped && !strcmp(stopped, "else")) {
        static const char *const end[] = {"endif", NULL};
        if (!block_end(p) || !jp_next(p) || !(e->c = parse_body(p, end, &stopped)))
            return NULL;
    }
    return close_tag(p, stopped, "endif", k) ? e : NULL;
}

/* Appends the NAME token at the cursor to e's names. */
static bool add_name(jparser *p, jnode *e)
{
    jtok *nm = jp_next(p);
    if (nm->t != JT_NAME)
        return jp_fail(p, nm, TS_ERR_FORMAT, "expected a name");
    if ((e->n_names & (e->n_names - 1)) == 0) { /* 0, 1, 2, 4...: the array is full */
        const char **nn = jinja_alloc(p->a, (e->n_names ? e->n_names * 2 : 1) * sizeof *nn);
        if (!nn)
            return jp_fail(p, nm, TS_ERR_TOO_LONG, "out of template memory");
        if (e->n_names)
            memcpy(nn, e->names, e->n_names * sizeof *nn);
        e->names = nn;
    }
    if (!(e->names[e->n_names++] = jp_dupn(p, nm->s, nm->n)))
        return jp_fail(p, nm, TS_ERR_TOO_LONG, "out of template memory");
    return true;
}

static bool parse_names(jparser *p, jnode *e)
{
    do {
        if (!add_name(p, e))
            return false;
    } while (jp_accept_op(p, ","));
    return true;
}

static jnode *parse_for(jparser *p, const jtok *k)
{
    static const char *const stops[] = {"else", "endfor", NULL};
    jnode *e = jp_node(p, JN_FOR, k);
    const char *stopped = NULL;
    if (!e || !parse_names(p, e))
        return NULL;
    if (!jp_accept_name(p, "in"))
        return jp_fail(p, jp_peek(p), TS_ERR_FORMAT, "expected 'in'"), NULL;
    if (!(e->a = jp_or(p)))
        return NULL;
    if (jp_accept_name(p, "if") && !(e->d = jp_or(p)))
        return NULL;
    if (jp_is_name(p, "recursive"))
        return jp_fail(p, jp_peek(p), TS_ERR_UNSUPPORTED, "unsupported recursive loop"), NULL;
    if (!block_end(p) || !jp_next(p))
        return NULL;
    p->loops++;
    e->b = parse_body(p, stops, &stopped);
    p->loops--;
    if (!e->b)
        return NULL;
    if (stopped && !strcmp(stopped, "else")) {
        static const char *const end[] = {"endfor", NULL};
        if (!block_end(p) || !jp_next(p) || !(e->c = parse_body(p, end, &stopped)))
            return NULL;
    }
    return close_tag(p, stopped, "endfor", k) ? e : NULL;
}

static jnode *parse_set(jparser *p, const jtok *k)
{
    jnode *e = jp_node(p, JN_SET, k);
    if (!e || !parse_names(p, e))
        return NULL;
    if (e->n_names > 1)
        return jp_fail(p, k, TS_ERR_UNSUPPORTED, "unsupported tuple assignment"), NULL;
    if (jp_accept_op(p, ".")) { /* {% set ns.attr = value %} */
        jtok *nm = jp_next(p);
        if (nm->t != JT_NAME || !jp_set_name(p, e, nm))
            return jp_fail(p, nm, TS_ERR_FORMAT, "expected an attribute name"), NULL;
    }
    if (jp_accept_op(p, "="))
        return (e->b = jp_expr(p)) && block_end(p) && jp_next(p) ? e : NULL;
    if (e->name)
        return jp_fail(p, k, TS_ERR_UNSUPPORTED, "unsupported block set of an attribute"), NULL;
    static const char *const end[] = {"endset", NULL};
    const char *stopped = NULL;
    e->k = JN_SET_BLOCK;
    if (!block_end(p) || !jp_next(p) || !(e->b = parse_body(p, end, &stopped)))
        return NULL;
    return close_tag(p, stopped, "endset", k) ? e : NULL;
}

/* (a, b=default, ...) of a macro or a call block's caller into names and kids. */
static bool parse_params(jparser *p, jnode *e)
{
    size_t cap = 0;
    if (!jp_expect_op(p, "("))
        return false;
    if (jp_accept_op(p, ")"))
        return true;
    do {
        jnode *def = NULL;
        if (jp_is_op(p, ")"))
            break;
        if (!add_name(p, e) || (jp_accept_op(p, "=") && !(def = jp_expr(p))))
            return false;
        if (!jp_append(p, &e->kids, &e->n, &cap, def))
            return false;
    } while (jp_accept_op(p, ","));
    return jp_expect_op(p, ")");
}

static jnode *parse_macro(jparser *p, const jtok *k)
{
    static const char *const end[] = {"endmacro", NULL};
    jnode *e = jp_node(p, JN_MACRO, k);
    jtok *nm = jp_next(p);
    const char *stopped = NULL;
    if (!e)
        return NULL;
    if (nm->t != JT_NAME || !jp_set_name(p, e, nm))
        return jp_fail(p, nm, TS_ERR_FORMAT, "expected the macro's name"), NULL;
    if (!parse_params(p, e) || !block_end(p) || !jp_next(p))
        return NULL;
    int loops = p->loops;
    p->loops = 0;
    p->macro_depth++;
    e->b = parse_body(p, end, &stopped);
    p->macro_depth--;
    p->loops = loops;
    if (!e->b || !close_tag(p, stopped, "endmacro", k))
        return NULL;
    return jp_append(p, &p->macros, &p->n_macros, &p->cap_macros, e) ? e : NULL;
}

static jnode *parse_call_block(jparser *p, const jtok *k)
{
    static const char *const end[] = {"endcall", NULL};
    jnode *e = jp_node(p, JN_CALL_BLOCK, k);
    const char *stopped = NULL;
    if (!e || (jp_is_op(p, "(") && !parse_params(p, e)) || !(e->a = jp_expr(p)))
        return NULL;
    if (e->a->k != JN_CALL)
        return jp_fail(p, k, TS_ERR_FORMAT, "{%% call %%} needs a macro call"), NULL;
    if (!block_end(p) || !jp_next(p))
        return NULL;
    p->macro_depth++;
    e->b = parse_body(p, end, &stopped);
    p->macro_depth--;
    return e->b && close_tag(p, stopped, "endcall", k) ? e : NULL;
}

static jnode *parse_filter_block(jparser *p, const jtok *k)
{
    static const char *const end[] = {"endfilter", NULL};
    jnode *e = jp_node(p, JN_FILTER_BLOCK, k), *hole = jp_node(p, JN_LIT, k);
    const char *stopped = NULL;
    if (!e || !hole)
        return NULL;
    /* The filters apply to a placeholder that the evaluator fills with the body's text. */
    if (!(e->a = jp_filters(p, hole)) || e->a == hole)
        return e->a ? jp_fail(p, k, TS_ERR_FORMAT, "expected a filter"), NULL : NULL;
    e->c = hole;
    if (!block_end(p) || !jp_next(p) || !(e->b = parse_body(p, end, &stopped)))
        return NULL;
    return close_tag(p, stopped, "endfilter", k) ? e : NULL;
}

static jnode *parse_statement(jparser *p)
{
    jtok *k = jp_next(p);
    if (k->t != JT_NAME)
        return jp_fail(p, k, TS_ERR_FORMAT, "expected a statement"), NULL;
#define IS(s) jp_tok_is(k, JT_NAME, s)
    if (IS("if"))
        return parse_if(p, k);
    if (IS("for"))
        return parse_for(p, k);
    if (IS("set"))
        return parse_set(p, k);
    if (IS("macro"))
        return parse_macro(p, k);
    if (IS("call"))
        return parse_call_block(p, k);
    if (IS("filter"))
        return parse_filter_block(p, k);
    if (IS("break") || IS("continue")) {
        if (!p->loops)
            return jp_fail(p, k, TS_ERR_FORMAT, "'%.*s' outside a loop", (int)k->n, k->s), NULL;
        jnode *e = jp_node(p, IS("break") ? JN_BREAK : JN_CONTINUE, k);
        return e && block_end(p) && jp_next(p) ? e : NULL;
    }
    if (IS("elif") || IS("else") || (k->n > 3 && !memcmp(k->s, "end", 3)))
        return jp_fail(p, k, TS_ERR_FORMAT, "unexpected {%% %.*s %%}", (int)k->n, k->s), NULL;
#undef IS
    return jp_fail(p, k, TS_ERR_UNSUPPORTED, "unsupported statement '%.*s'", (int)k->n, k->s), NULL;
}

/* Statements up to a {% NAME %} whose name is in stops (NULL-terminated; *stopped gets it,
 * the tag's name consumed) or the end of the template (*stopped NULL). */
static jnode *parse_body(jparser *p, const char *const *stops, const char **stopped)
{
    jnode *body = jp_node(p, JN_BODY, jp_peek(p));
    size_t cap = 0;
    *stopped = NULL;
    if (!body || !jp_enter(p))
        return NULL;
    for (;;) {
        jtok *k = jp_peek(p);
        jnode *e = NULL;
        if (k->t == JT_EOF)
            break;
        if (k->t == JT_TEXT) {
            if ((e = jp_node(p, JN_TEXT, jp_next(p))))
                e->lit = jv_str(k->s, k->n);
        } else if (k->t == JT_VAR_BEGIN) {
            jp_next(p);
            if ((e = jp_node(p, JN_OUTPUT, k)) &&
                (!(e->a = jp_expr(p)) || (jp_peek(p)->t != JT_VAR_END &&
                                          !jp_fail(p, jp_peek(p), TS_ERR_FORMAT, "expected }}"))))
                return NULL;
            jp_next(p);
        } else if (k->t == JT_BLOCK_BEGIN) {
            jtok *nm = &p->t[p->pos + 1];
            for (size_t i = 0; stops && stops[i]; i++) {
                if (jp_tok_is(nm, JT_NAME, stops[i])) {
                    p->pos += 2;
                    *stopped = stops[i];
                    p->depth--;
                    return body;
                }
            }
            jp_next(p);
            e = parse_statement(p);
        } else {
            jp_fail(p, k, TS_ERR_FORMAT, "unexpected token");
        }
        if (!e || !jp_append(p, &body->kids, &body->n, &cap, e))
            return NULL;
    }
    p->depth--;
    return body;
}

static bool is_global(const char *s)
{
    static const char *const globals[] = {
        "range", "namespace", "raise_exception", "strftime_now", "dict", "caller", NULL};
    for (size_t i = 0; globals[i]; i++)
        if (!strcmp(s, globals[i]))
            return true;
    return false;
}

/* Refuses a tree taller than max_tree_depth, naming the first node past it. The parser
 * builds operator chains in loops, so their height is unbounded until here; this walk
 * keeps its own stack on the heap, so a tall tree cannot overflow the C stack either. */
static bool check_height(jparser *p, const jnode *root)
{
    typedef struct {
        const jnode *e;
        int depth;
    } frame;
    size_t n = 0, cap = 256;
    frame *st = malloc(cap * sizeof *st);
    bool ok = st != NULL;
    if (ok)
        st[n++] = (frame){root, 1};
    while (ok && n) {
        frame f = st[--n];
        if (f.depth > p->lim->max_tree_depth) {
            ok = jp_fail(p, &(jtok){.line = f.e->line, .col = f.e->col}, TS_ERR_TOO_LONG,
                         "nested more than %d deep (each operator of a chain counts)",
                         p->lim->max_tree_depth);
            break;
        }
        const jnode *kids[4] = {f.e->a, f.e->b, f.e->c, f.e->d};
        size_t more = 4 + f.e->n;
        if (n + more > cap) {
            size_t nc = (n + more) * 2;
            frame *ns = realloc(st, nc * sizeof *ns);
            if (!(ok = ns != NULL))
                break;
            st = ns;
            cap = nc;
        }
        for (size_t i = 0; i < 4; i++)
            if (kids[i])
                st[n++] = (frame){kids[i], f.depth + 1};
        for (size_t i = 0; i < f.e->n; i++)
            if (f.e->kids[i])
                st[n++] = (frame){f.e->kids[i], f.depth + 1};
    }
    free(st);
    if (!ok && p->st == TS_OK)
        jp_fail(p, &(jtok){.line = root->line, .col = root->col}, TS_ERR_NOMEM, "out of memory");
    return ok;
}

ts_status jinja_parse(jinja_template **out, const char *src, size_t len, const jinja_limits *limits,
                      ts_error *err)
{
    jinja_template *t = calloc(1, sizeof *t);
    ts_status st;
    *out = NULL;
    if (!t)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    jinja_limits_default(&t->limits);
#define TAKE(f)                                                                                    \
    if (limits && limits->f)                                                                       \
    t->limits.f = limits->f
    TAKE(max_source);
    TAKE(max_nodes);
    TAKE(max_depth);
    TAKE(max_steps);
    TAKE(max_output);
    TAKE(max_memory);
    TAKE(max_tree_depth);
    TAKE(max_eval_depth);
    TAKE(max_work);
#undef TAKE
    if (len > t->limits.max_source) {
        st = ts_error_set(err, TS_ERR_TOO_LONG, "template of %zu bytes is over the limit of %zu",
                          len, t->limits.max_source);
        goto fail;
    }
    /* A NUL would cut the rendered text (a C string) short where the template put it. */
    const char *nul = memchr(src, 0, len);
    if (nul) {
        int line = 1, col = 1;
        for (const char *q = src; q < nul; q++)
            line += *q == '\n', col = *q == '\n' ? 1 : col + 1;
        st = ts_error_set(err, TS_ERR_FORMAT, "template line %d col %d: a NUL byte", line, col);
        goto fail;
    }
    t->arena.limit = 256 * len + (4 << 20); /* tokens and nodes; max_nodes bounds the latter */
    jparser p = {.a = &t->arena, .lim = &t->limits, .err = err};
    if ((st = jinja_lex(&t->arena, src, len, &p.t, &p.n, err)) != TS_OK)
        goto fail;
    const char *stopped = NULL;
    t->root = parse_body(&p, NULL, &stopped);
    if (!t->root || !check_height(&p, t->root)) {
        st = p.st != TS_OK ? p.st : ts_error_set(err, TS_ERR_INTERNAL, "template parse failed");
        goto fail;
    }
    for (size_t i = 0; i < p.n_calls; i++) {
        const jnode *c = p.calls[i]->a;
        bool ok = is_global(c->name);
        for (size_t m = 0; m < p.n_macros && !ok; m++)
            ok = !strcmp(p.macros[m]->name, c->name);
        if (!ok) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "template line %d col %d: unsupported function '%s'", c->line, c->col,
                              c->name);
            goto fail;
        }
    }
    *out = t;
    return TS_OK;
fail:
    jinja_free(t);
    return st;
}

void jinja_free(jinja_template *t)
{
    if (!t)
        return;
    jinja_arena_free(&t->arena);
    free(t);
}
