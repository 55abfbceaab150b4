/* jinja_parse.c: a recursive-descent parser from tokens to the syntax tree, with Jinja's
 * precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < filters,
 * tests, calls and subscripts). Anything outside the supported subset fails here, at
 * load, with its line and column, never halfway through a render. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_parser.h"

bool jp_fail(jparser *p, const jtok *at, ts_status st, const char *fmt, ...)
{
    if (p->st != TS_OK)
        return false;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = ts_error_set(p->err, st, "template line %d col %d: %s", at->line, at->col, msg);
    return false;
}

jtok *jp_peek(jparser *p) { return &p->t[p->pos]; }
jtok *jp_next(jparser *p) { return p->pos + 1 < p->n ? &p->t[p->pos++] : &p->t[p->pos]; }

bool jp_tok_is(const jtok *k, jtok_type t, const char *s)
{
    return k->t == t && (!s || (k->n == strlen(s) && !memcmp(k->s, s, k->n)));
}
bool jp_is_op(jparser *p, const char *s) { return jp_tok_is(jp_peek(p), JT_OP, s); }
bool jp_is_name(jparser *p, const char *s) { return jp_tok_is(jp_peek(p), JT_NAME, s); }

bool jp_accept_op(jparser *p, const char *s)
{
    if (!jp_is_op(p, s))
        return false;
    jp_next(p);
    return true;
}

bool jp_accept_name(jparser *p, const char *s)
{
    if (!jp_is_name(p, s))
        return false;
    jp_next(p);
    return true;
}

bool jp_expect_op(jparser *p, const char *s)
{
    return jp_accept_op(p, s) || jp_fail(p, jp_peek(p), TS_ERR_FORMAT, "expected '%s'", s);
}

const char *jp_dupn(jparser *p, const char *s, size_t n)
{
    char *d = jinja_alloc(p->a, n + 1);
    if (d)
        memcpy(d, s, n);
    return d;
}

jnode *jp_node(jparser *p, jnode_kind k, const jtok *at)
{
    if (++p->nodes > p->lim->max_nodes) {
        jp_fail(p, at, TS_ERR_TOO_LONG, "template has more than %zu nodes", p->lim->max_nodes);
        return NULL;
    }
    jnode *e = jinja_alloc(p->a, sizeof *e);
    if (!e) {
        jp_fail(p, at, TS_ERR_TOO_LONG, "out of template memory");
        return NULL;
    }
    e->k = k;
    e->line = at->line;
    e->col = at->col;
    return e;
}

bool jp_set_name(jparser *p, jnode *e, const jtok *k)
{
    e->name_n = k->n;
    return (e->name = jp_dupn(p, k->s, k->n)) != NULL;
}

/* Appends e to the array *arr of *n (capacity *cap). */
bool jp_append(jparser *p, jnode ***arr, size_t *n, size_t *cap, jnode *e)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        jnode **na = jinja_alloc(p->a, nc * sizeof *na);
        if (!na)
            return jp_fail(p, jp_peek(p), TS_ERR_TOO_LONG, "out of template memory");
        if (*n)
            memcpy(na, *arr, *n * sizeof *na);
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = e;
    return true;
}

bool jp_enter(jparser *p)
{
    if (++p->depth > p->lim->max_depth)
        return jp_fail(p, jp_peek(p), TS_ERR_TOO_LONG, "nested more than %d deep",
                       p->lim->max_depth);
    return true;
}

static jnode *parse_unary(jparser *p, bool with_filter);

/* ( args ) into e->kids: expressions and name=value pairs (JN_KWARG). */
static bool parse_args(jparser *p, jnode *e)
{
    size_t cap = 0;
    if (!jp_expect_op(p, "("))
        return false;
    while (!jp_is_op(p, ")")) {
        jnode *arg;
        if (jp_is_op(p, "*") || jp_is_op(p, "**"))
            return jp_fail(p, jp_peek(p), TS_ERR_UNSUPPORTED, "unsupported *args or **kwargs");
        if (jp_peek(p)->t == JT_NAME && jp_tok_is(&p->t[p->pos + 1], JT_OP, "=")) {
            if (!(arg = jp_node(p, JN_KWARG, jp_peek(p))) || !jp_set_name(p, arg, jp_next(p)))
                return false;
            jp_next(p);
            if (!(arg->a = jp_expr(p)))
                return false;
        } else if (!(arg = jp_expr(p))) {
            return false;
        }
        if (!jp_append(p, &e->kids, &e->n, &cap, arg))
            return false;
        if (!jp_accept_op(p, ","))
            break;
    }
    return jp_expect_op(p, ")");
}

static jnode *parse_primary(jparser *p)
{
    jtok *k = jp_peek(p);
    jnode *e = NULL;
    if (k->t == JT_NAME) {
        jp_next(p);
        if (jp_tok_is(k, JT_NAME, "true") || jp_tok_is(k, JT_NAME, "True") ||
            jp_tok_is(k, JT_NAME, "false") || jp_tok_is(k, JT_NAME, "False")) {
            if ((e = jp_node(p, JN_LIT, k)))
                e->lit = jv_bool(k->s[0] == 't' || k->s[0] == 'T');
        } else if (jp_tok_is(k, JT_NAME, "none") || jp_tok_is(k, JT_NAME, "None")) {
            if ((e = jp_node(p, JN_LIT, k)))
                e->lit = (jv){.t = JV_NONE};
        } else if ((e = jp_node(p, JN_NAME, k)) && !jp_set_name(p, e, k)) {
            return NULL;
        }
    } else if (k->t == JT_STRING) {
        /* Adjacent literals join, as in Python. */
        size_t total = 0, i = p->pos;
        for (; i < p->n && p->t[i].t == JT_STRING; i++)
            total += p->t[i].n;
        char *s = jinja_alloc(p->a, total + 1);
        if (!s || !(e = jp_node(p, JN_LIT, k)))
            return s ? NULL : (jp_fail(p, k, TS_ERR_TOO_LONG, "out of template memory"), NULL);
        total = 0;
        while (jp_peek(p)->t == JT_STRING) {
            memcpy(s + total, jp_peek(p)->s, jp_peek(p)->n);
            total += jp_next(p)->n;
        }
        e->lit = jv_str(s, total);
    } else if (k->t == JT_INT || k->t == JT_FLOAT) {
        jp_next(p);
        if ((e = jp_node(p, JN_LIT, k)))
            e->lit = k->t == JT_INT ? jv_int(k->i) : (jv){.t = JV_FLOAT, .u.f = k->f};
    } else if (jp_tok_is(k, JT_OP, "(")) {
        jp_next(p);
        if (!(e = jp_expr(p)))
            return NULL;
        if (jp_is_op(p, ",")) { /* a tuple: a list here */
            jnode *t = jp_node(p, JN_LIST, k);
            size_t cap = 0;
            if (!t || !jp_append(p, &t->kids, &t->n, &cap, e))
                return NULL;
            t->op = 1; /* a tuple */
            while (jp_accept_op(p, ",") && !jp_is_op(p, ")"))
                if (!(e = jp_expr(p)) || !jp_append(p, &t->kids, &t->n, &cap, e))
                    return NULL;
            e = t;
        }
        if (!jp_expect_op(p, ")"))
            return NULL;
    } else if (jp_tok_is(k, JT_OP, "[") || jp_tok_is(k, JT_OP, "{")) {
        bool dict = k->s[0] == '{';
        const char *close = dict ? "}" : "]";
        size_t cap = 0;
        jp_next(p);
        if (!(e = jp_node(p, dict ? JN_DICT : JN_LIST, k)))
            return NULL;
        while (!jp_is_op(p, close)) {
            jnode *item = jp_expr(p);
            if (!item || !jp_append(p, &e->kids, &e->n, &cap, item))
                return NULL;
            if (dict && (!jp_expect_op(p, ":") || !(item = jp_expr(p)) ||
                         !jp_append(p, &e->kids, &e->n, &cap, item)))
                return NULL;
            if (!jp_accept_op(p, ","))
                break;
        }
        if (!jp_expect_op(p, close))
            return NULL;
    } else {
        jp_fail(p, k, TS_ERR_FORMAT, "unexpected '%.*s'", (int)(k->n ? k->n : 3),
                k->n ? k->s : "end");
    }
    return e;
}

/* [index] or [start:stop:step] after e. */
static jnode *parse_subscript(jparser *p, jnode *obj)
{
    jtok *k = jp_next(p); /* [ */
    jnode *e = jp_node(p, JN_ITEM, k), *parts[3] = {NULL, NULL, NULL};
    if (!e)
        return NULL;
    e->a = obj;
    int part = 0;
    for (;;) {
        if (!jp_is_op(p, ":") && !jp_is_op(p, "]") && !(parts[part] = jp_expr(p)))
            return NULL;
        if (part < 2 && jp_accept_op(p, ":")) {
            part++;
            e->k = JN_SLICE;
            continue;
        }
        break;
    }
    if (!jp_expect_op(p, "]"))
        return NULL;
    if (e->k == JN_ITEM && !parts[0])
        return jp_fail(p, k, TS_ERR_FORMAT, "empty subscript"), NULL;
    e->b = parts[0];
    e->c = parts[1];
    e->d = parts[2];
    return e;
}

static bool note_call(jparser *p, jnode *call)
{
    if (call->a->k == JN_NAME)
        return jp_append(p, &p->calls, &p->n_calls, &p->cap_calls, call);
    if (call->a->k == JN_ATTR && !jinja_method_known(call->a->name, call->a->name_n))
        return jp_fail(p, &(jtok){.line = call->a->line, .col = call->a->col}, TS_ERR_UNSUPPORTED,
                       "unsupported method '%s'", call->a->name);
    return true;
}

/* NAME[(args)] applied to e. */
static jnode *parse_filter(jparser *p, jnode *e)
{
    jtok *nm = jp_next(p);
    if (nm->t != JT_NAME)
        return jp_fail(p, nm, TS_ERR_FORMAT, "expected a filter name"), NULL;
    if (!jinja_filter_known(nm->s, nm->n))
        return jp_fail(p, nm, TS_ERR_UNSUPPORTED, "unsupported filter '%.*s'", (int)nm->n, nm->s),
               NULL;
    jnode *f = jp_node(p, JN_FILTER, nm);
    if (!f || !jp_set_name(p, f, nm) || (jp_is_op(p, "(") && !parse_args(p, f)))
        return NULL;
    f->a = e;
    return f;
}

jnode *jp_filters(jparser *p, jnode *e)
{
    e = parse_filter(p, e);
    while (e && jp_accept_op(p, "|"))
        e = parse_filter(p, e);
    return e;
}

static jnode *parse_postfix(jparser *p, jnode *e, bool with_filter)
{
    while (e) {
        jtok *k = jp_peek(p);
        if (jp_tok_is(k, JT_OP, ".")) {
            jp_next(p);
            jtok *nm = jp_next(p);
            if (nm->t == JT_INT) { /* x.0 is x[0] */
                jnode *idx = jp_node(p, JN_LIT, nm), *it = jp_node(p, JN_ITEM, k);
                if (!idx || !it)
                    return NULL;
                idx->lit = jv_int(nm->i);
                it->a = e;
                it->b = idx;
                e = it;
                continue;
            }
            if (nm->t != JT_NAME)
                return jp_fail(p, nm, TS_ERR_FORMAT, "expected an attribute name"), NULL;
            jnode *at = jp_node(p, JN_ATTR, nm);
            if (!at || !jp_set_name(p, at, nm))
                return NULL;
            at->a = e;
            e = at;
        } else if (jp_tok_is(k, JT_OP, "[")) {
            e = parse_subscript(p, e);
        } else if (jp_tok_is(k, JT_OP, "(")) {
            jnode *call = jp_node(p, JN_CALL, k);
            if (!call)
                return NULL;
            call->a = e;
            if (!parse_args(p, call) || !note_call(p, call))
                return NULL;
            e = call;
        } else if (with_filter && jp_tok_is(k, JT_OP, "|")) {
            jp_next(p);
            e = parse_filter(p, e);
        } else if (with_filter && jp_tok_is(k, JT_NAME, "is")) {
            jp_next(p);
            bool neg = jp_accept_name(p, "not");
            jtok *nm = jp_next(p);
            if (nm->t != JT_NAME && !jp_tok_is(nm, JT_OP, "==") && !jp_tok_is(nm, JT_OP, "!="))
                return jp_fail(p, nm, TS_ERR_FORMAT, "expected a test name"), NULL;
            if (!jinja_test_known(nm->s, nm->n))
                return jp_fail(p, nm, TS_ERR_UNSUPPORTED, "unsupported test '%.*s'", (int)nm->n,
                               nm->s),
                       NULL;
            jnode *t = jp_node(p, JN_TEST, nm);
            if (!t || !jp_set_name(p, t, nm))
                return NULL;
            t->op = neg;
            t->a = e;
            jtok *q = jp_peek(p);
            if (jp_tok_is(q, JT_OP, "(")) {
                if (!parse_args(p, t))
                    return NULL;
            } else if ((q->t == JT_NAME && !jp_tok_is(q, JT_NAME, "else") &&
                        !jp_tok_is(q, JT_NAME, "or") && !jp_tok_is(q, JT_NAME, "and") &&
                        !jp_tok_is(q, JT_NAME, "if") && !jp_tok_is(q, JT_NAME, "is") &&
                        !jp_tok_is(q, JT_NAME, "in") && !jp_tok_is(q, JT_NAME, "not")) ||
                       q->t == JT_STRING || q->t == JT_INT || q->t == JT_FLOAT ||
                       jp_tok_is(q, JT_OP, "[") || jp_tok_is(q, JT_OP, "{")) {
                jnode *arg = parse_postfix(p, parse_primary(p), false);
                size_t cap = 0;
                if (!arg || !jp_append(p, &t->kids, &t->n, &cap, arg))
                    return NULL;
            }
            e = t;
        } else {
            break;
        }
    }
    return e;
}

static jnode *parse_unary(jparser *p, bool with_filter)
{
    jtok *k = jp_peek(p);
    jnode *e;
    if (!jp_enter(p))
        return NULL;
    if (jp_tok_is(k, JT_OP, "-") || jp_tok_is(k, JT_OP, "+")) {
        jp_next(p);
        if ((e = jp_node(p, k->s[0] == '-' ? JN_NEG : JN_POS, k)) &&
            !(e->a = parse_unary(p, false)))
            e = NULL;
    } else {
        e = parse_postfix(p, parse_primary(p), false);
    }
    if (e && with_filter)
        e = parse_postfix(p, e, true);
    p->depth--;
    return e;
}

/* One level of left-associative binary operators; ops[i] maps to codes[i]. */
static jnode *parse_binary(jparser *p, int level);

static jnode *operand(jparser *p, int level)
{
    return level == 4 ? parse_unary(p, true) : parse_binary(p, level + 1);
}

static jnode *parse_binary(jparser *p, int level)
{
    static const char *const ops[5][5] = {{"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}, {NULL}};
    static const jop codes[5][5] = {
        {JO_ADD, JO_SUB}, {JO_CONCAT}, {JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD}, {JO_POW}, {0}};
    jnode *e = operand(p, level);
    while (e && level < 4) {
        int i = 0;
        while (i < 4 && ops[level][i] && !jp_is_op(p, ops[level][i]))
            i++;
        if (i == 4 || !ops[level][i])
            break;
        jtok *k = jp_next(p);
        jnode *b = jp_node(p, JN_BIN, k);
        if (!b || !(b->b = operand(p, level)))
            return NULL;
        b->op = (int)codes[level][i];
        b->a = e;
        e = b;
    }
    return e;
}

static jnode *parse_compare(jparser *p)
{
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    static const jop codes[] = {JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE};
    jnode *e = parse_binary(p, 0);
    while (e) {
        jtok *k = jp_peek(p);
        int op = -1;
        for (int i = 0; i < 6 && op < 0; i++)
            if (jp_tok_is(k, JT_OP, ops[i]))
                op = (int)codes[i];
        if (op < 0 && jp_tok_is(k, JT_NAME, "in"))
            op = JO_IN;
        if (op < 0 && jp_tok_is(k, JT_NAME, "not") && jp_tok_is(&p->t[p->pos + 1], JT_NAME, "in")) {
            jp_next(p);
            op = JO_NOT_IN;
        }
        if (op < 0)
            break;
        jp_next(p);
        jnode *b = jp_node(p, JN_BIN, k);
        if (!b || !(b->b = parse_binary(p, 0)))
            return NULL;
        b->op = op;
        b->a = e;
        e = b;
    }
    return e;
}

static jnode *parse_not(jparser *p)
{
    jtok *k = jp_peek(p);
    if (!jp_tok_is(k, JT_NAME, "not"))
        return parse_compare(p);
    jp_next(p);
    jnode *e = jp_node(p, JN_NOT, k);
    if (!e || !jp_enter(p) || !(e->a = parse_not(p)))
        return NULL;
    p->depth--;
    return e;
}

static jnode *parse_logic(jparser *p, bool is_or)
{
    jnode *e = is_or ? parse_logic(p, false) : parse_not(p);
    while (e && jp_is_name(p, is_or ? "or" : "and")) {
        jnode *b = jp_node(p, is_or ? JN_OR : JN_AND, jp_next(p));
        if (!b || !(b->b = is_or ? parse_logic(p, false) : parse_not(p)))
            return NULL;
        b->a = e;
        e = b;
    }
    return e;
}

jnode *jp_or(jparser *p) { return parse_logic(p, true); }

jnode *jp_expr(jparser *p)
{
    if (!jp_enter(p))
        return NULL;
    jnode *e = jp_or(p);
    if (e && jp_is_name(p, "if")) {
        jnode *c = jp_node(p, JN_COND, jp_next(p));
        if (!c || !(c->a = jp_or(p)))
            return NULL;
        c->b = e;
        if (jp_accept_name(p, "else") && !(c->c = jp_expr(p)))
            return NULL;
        e = c;
    }
    p->depth--;
    return e;
}
