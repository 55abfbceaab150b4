/* jinja_ops.c: Jinja's binary operators with Python's meaning: + joins strings and lists,
 * / is true division, // and % floor, ~ joins the str() of both sides, in looks into
 * strings, lists and dict keys. Integer overflow is an error, not a wrap. */
#include <math.h>
#include <string.h>

#include "template/jinja_internal.h"

static bool is_int(const jv *v) { return v->t == JV_INT || v->t == JV_BOOL; }
static bool is_num(const jv *v) { return is_int(v) || v->t == JV_FLOAT; }
static int64_t ival(const jv *v) { return v->t == JV_INT ? v->u.i : v->u.b; }
static double fval(const jv *v) { return v->t == JV_FLOAT ? v->u.f : (double)ival(v); }

static bool contains(jctx *c, const jnode *at, const jv *x, const jv *y, bool *out)
{
    *out = false;
    switch (y->t) {
    case JV_UNDEF:
        return true;
    case JV_STR:
        if (x->t != JV_STR)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "'in <string>' needs a string, not %s",
                              jv_type_name(x));
        /* memmem is linear in both lengths (glibc's two-way search), so charged as such. */
        if (!jinja_work(c, at, y->u.s.n + x->u.s.n))
            return false;
        *out = x->u.s.n == 0 || memmem(y->u.s.s, y->u.s.n, x->u.s.s, x->u.s.n) != NULL;
        return true;
    case JV_LIST:
        for (size_t i = 0; i < y->u.l->n && !*out; i++)
            *out = jv_eq(&c->w, x, &y->u.l->items[i]);
        return true;
    case JV_DICT:
        *out = jv_dict_find(&c->w, y->u.d, x) != NULL;
        return true;
    default:
        return jinja_fail(c, at, TS_ERR_INVALID_ARG, "%s is not a container", jv_type_name(y));
    }
}

/* x repeated k times (a string or a list), for * with an integer. An empty x gives an
 * empty result at once: "" * 2**63 must not loop 2**63 times. */
static bool repeat(jctx *c, const jnode *at, const jv *x, int64_t k, jv *out)
{
    size_t unit = x->t == JV_STR ? x->u.s.n : x->u.l->n * sizeof(jv);
    if (k <= 0 || unit == 0)
        k = 0;
    if (unit && (uint64_t)k > c->lim->max_output / unit)
        return jinja_fail(c, at, TS_ERR_TOO_LONG, "repetition too large");
    if (x->t == JV_STR) {
        strbuf b = {0};
        for (int64_t i = 0; i < k; i++) {
            if (!jinja_work(c, at, x->u.s.n))
                return strbuf_free(&b), false;
            strbuf_add(&b, x->u.s.s, x->u.s.n);
        }
        return jinja_make_str(c, at, &b, out);
    }
    if (!jv_new_list(c->arena, out, 0))
        return jinja_oom(c, at);
    for (int64_t i = 0; i < k; i++) {
        if (!jinja_work(c, at, x->u.l->n))
            return false;
        for (size_t j = 0; j < x->u.l->n; j++)
            if (!jv_list_push(c->arena, out->u.l, x->u.l->items[j]))
                return jinja_oom(c, at);
    }
    return true;
}

static bool bad(jctx *c, const jnode *at, const char *op, const jv *x, const jv *y)
{
    return jinja_fail(c, at, TS_ERR_INVALID_ARG, "unsupported operand types for %s: %s and %s", op,
                      jv_type_name(x), jv_type_name(y));
}

static bool overflow(jctx *c, const jnode *at)
{
    return jinja_fail(c, at, TS_ERR_INVALID_ARG, "integer overflow");
}

static bool int_op(jctx *c, const jnode *at, int op, int64_t a, int64_t b, jv *out)
{
    int64_t r = 0;
    switch (op) {
    case JO_ADD:
        if (__builtin_add_overflow(a, b, &r))
            return overflow(c, at);
        break;
    case JO_SUB:
        if (__builtin_sub_overflow(a, b, &r))
            return overflow(c, at);
        break;
    case JO_MUL:
        if (__builtin_mul_overflow(a, b, &r))
            return overflow(c, at);
        break;
    case JO_FLOORDIV:
    case JO_MOD:
        if (b == 0)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "division by zero");
        if (a == INT64_MIN && b == -1)
            return overflow(c, at);
        r = op == JO_FLOORDIV ? a / b : a % b;
        if (op == JO_FLOORDIV && (a % b != 0) && ((a < 0) != (b < 0)))
            r--;
        if (op == JO_MOD && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        break;
    case JO_POW:
        if (b < 0) {
            *out = (jv){.t = JV_FLOAT, .u.f = pow((double)a, (double)b)};
            return true;
        }
        r = 1;
        for (int64_t i = 0; i < b; i++) { /* ends within 64 rounds unless r is 0, 1 or -1 */
            if (r == -1) {
                r = b % 2 ? -1 : 1;
                break;
            }
            if (__builtin_mul_overflow(r, a, &r))
                return overflow(c, at);
            if (r == 0 || r == 1)
                break;
        }
        break;
    default:
        return false;
    }
    *out = jv_int(r);
    return true;
}

bool jinja_arith(jctx *c, const jnode *at, int op, const jv *x, const jv *y, jv *out)
{
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    int cmp;
    bool r;
    switch (op) {
    case JO_EQ:
        *out = jv_bool(jv_eq(&c->w, x, y));
        return true;
    case JO_NE:
        *out = jv_bool(!jv_eq(&c->w, x, y));
        return true;
    case JO_LT:
    case JO_LE:
    case JO_GT:
    case JO_GE:
        if (!jv_cmp(&c->w, x, y, false, &cmp))
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "cannot compare %s with %s",
                              jv_type_name(x), jv_type_name(y));
        *out = jv_bool(op == JO_LT   ? cmp < 0
                       : op == JO_LE ? cmp <= 0
                       : op == JO_GT ? cmp > 0
                                     : cmp >= 0);
        return true;
    case JO_IN:
    case JO_NOT_IN:
        if (!contains(c, at, x, y, &r))
            return false;
        *out = jv_bool(r == (op == JO_IN));
        return true;
    case JO_CONCAT: {
        strbuf b = {0};
        if (!jv_to_str(&c->w, &b, x) || !jv_to_str(&c->w, &b, y)) {
            strbuf_free(&b);
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "cannot join these values with ~");
        }
        return jinja_make_str(c, at, &b, out);
    }
    default:
        break;
    }
    if (op == JO_ADD && x->t == JV_STR && y->t == JV_STR) {
        if (x->u.s.n + y->u.s.n > c->lim->max_output)
            return jinja_fail(c, at, TS_ERR_TOO_LONG, "string too long");
        strbuf b = {0};
        strbuf_add(&b, x->u.s.s, x->u.s.n);
        strbuf_add(&b, y->u.s.s, y->u.s.n);
        if (b.len > c->lim->max_output)
            return strbuf_free(&b), jinja_fail(c, at, TS_ERR_TOO_LONG, "string too long");
        return jinja_make_str(c, at, &b, out);
    }
    if (op == JO_ADD && x->t == JV_LIST && y->t == JV_LIST) {
        if (!jinja_work(c, at, x->u.l->n + y->u.l->n))
            return false;
        if (!jv_new_list(c->arena, out, x->u.l->n + y->u.l->n))
            return jinja_oom(c, at);
        for (size_t i = 0; i < x->u.l->n + y->u.l->n; i++)
            jv_list_push(c->arena, out->u.l,
                         i < x->u.l->n ? x->u.l->items[i] : y->u.l->items[i - x->u.l->n]);
        return true;
    }
    if (op == JO_MUL && (x->t == JV_STR || x->t == JV_LIST) && is_int(y))
        return repeat(c, at, x, ival(y), out);
    if (op == JO_MUL && (y->t == JV_STR || y->t == JV_LIST) && is_int(x))
        return repeat(c, at, y, ival(x), out);
    if (!is_num(x) || !is_num(y) || op > JO_POW)
        return bad(c, at, op <= JO_POW ? names[op] : "?", x, y);
    if (op != JO_DIV && is_int(x) && is_int(y))
        return int_op(c, at, op, ival(x), ival(y), out);
    double a = fval(x), b = fval(y), f;
    switch (op) {
    case JO_ADD:
        f = a + b;
        break;
    case JO_SUB:
        f = a - b;
        break;
    case JO_MUL:
        f = a * b;
        break;
    case JO_POW:
        f = pow(a, b);
        break;
    default:
        if (b == 0)
            return jinja_fail(c, at, TS_ERR_INVALID_ARG, "division by zero");
        f = op == JO_DIV ? a / b : op == JO_FLOORDIV ? floor(a / b) : a - b * floor(a / b);
    }
    *out = (jv){.t = JV_FLOAT, .u.f = f};
    return true;
}
