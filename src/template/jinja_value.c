/* jinja_value.c: the interpreter's arena, its bounds (jinja_limits_default) and budget, and
 * values: Python's truth, equality, ordering, str() and json.dumps() for them, and their
 * conversion from JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

struct jinja_chunk {
    jinja_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *jinja_alloc(jinja_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0 || n > a->limit || a->used > a->limit - n)
        return NULL;
    jinja_chunk *h = a->head;
    if (!h || h->size - h->used < n) {
        size_t size = n > 65536 ? n : 65536;
        if (!(h = malloc(sizeof *h + size)))
            return NULL;
        h->size = size;
        h->used = 0;
        h->next = a->head;
        a->head = h;
    }
    void *p = h->data + h->used;
    h->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void jinja_arena_free(jinja_arena *a)
{
    while (a->head) {
        jinja_chunk *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = 0;
}

void jinja_limits_default(jinja_limits *l)
{
    *l = (jinja_limits){.max_source = 1 << 20,
                        .max_nodes = 100000,
                        .max_depth = 64,
                        .max_steps = 2000000,
                        .max_output = 4 << 20,
                        .max_memory = 64 << 20,
                        .max_tree_depth = 256,
                        .max_eval_depth = 2048,
                        .max_work = (size_t)256 << 20};
}

bool jv_charge(jv_budget *w, size_t units)
{
    if (w->why != JB_OK)
        return false;
    if (w->cancel && atomic_load_explicit(w->cancel, memory_order_relaxed))
        w->why = JB_CANCELLED;
    else if (units > w->max_work - w->work)
        w->why = JB_WORK;
    else
        w->work += units;
    return w->why == JB_OK;
}

bool jv_fits(jv_budget *w, size_t n)
{
    if (w->why == JB_OK && n > w->max_bytes)
        w->why = JB_BYTES;
    return w->why == JB_OK;
}

jv jv_str(const char *s, size_t n) { return (jv){.t = JV_STR, .u.s = {s, n}}; }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
jv jv_bool(bool b) { return (jv){.t = JV_BOOL, .u.b = b}; }

bool jv_truthy(const jv *v)
{
    switch (v->t) {
    case JV_BOOL:
        return v->u.b;
    case JV_INT:
        return v->u.i != 0;
    case JV_FLOAT:
        return v->u.f != 0;
    case JV_STR:
        return v->u.s.n > 0;
    case JV_LIST:
        return v->u.l->n > 0;
    case JV_DICT:
        return v->u.d->n > 0 || v->u.d->ns;
    case JV_MACRO:
    case JV_FUNC:
        return true;
    default:
        return false;
    }
}

bool jv_new_list(jinja_arena *a, jv *out, size_t cap)
{
    jv_list *l = jinja_alloc(a, sizeof *l);
    if (!l || (cap && !(l->items = jinja_alloc(a, cap * sizeof(jv)))))
        return false;
    l->cap = cap;
    *out = (jv){.t = JV_LIST, .u.l = l};
    return true;
}

bool jv_new_dict(jinja_arena *a, jv *out, size_t cap)
{
    jv_dict *d = jinja_alloc(a, sizeof *d);
    if (!d || (cap && (!(d->keys = jinja_alloc(a, cap * sizeof(jv))) ||
                       !(d->vals = jinja_alloc(a, cap * sizeof(jv))))))
        return false;
    d->cap = cap;
    *out = (jv){.t = JV_DICT, .u.d = d};
    return true;
}

/* Makes room for one more element in the array *arr of n (capacity *cap). */
static bool grow(jinja_arena *a, jv **arr, size_t n, size_t *cap)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 4;
    jv *na = jinja_alloc(a, nc * sizeof *na);
    if (!na)
        return false;
    if (n)
        memcpy(na, *arr, n * sizeof *na);
    *arr = na;
    *cap = nc;
    return true;
}

bool jv_list_push(jinja_arena *a, jv_list *l, jv v)
{
    if (!grow(a, &l->items, l->n, &l->cap))
        return false;
    l->items[l->n++] = v;
    return true;
}

jv *jv_dict_find(jv_budget *w, const jv_dict *d, const jv *key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(w, &d->keys[i], key))
            return &d->vals[i];
    return NULL;
}

jv *jv_dict_get(jv_budget *w, const jv_dict *d, const char *key, size_t n)
{
    jv k = jv_str(key, n);
    return jv_dict_find(w, d, &k);
}

bool jv_dict_set(jinja_arena *a, jv_budget *w, jv_dict *d, jv key, jv val)
{
    jv *have = jv_dict_find(w, d, &key);
    if (w->why != JB_OK)
        return false;
    if (have) {
        *have = val;
        return true;
    }
    size_t kc = d->cap;
    if (!grow(a, &d->keys, d->n, &kc) || !grow(a, &d->vals, d->n, &d->cap))
        return false;
    d->keys[d->n] = key;
    d->vals[d->n++] = val;
    return true;
}

static bool is_num(const jv *v) { return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL; }

static double num(const jv *v)
{
    return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : (double)v->u.b;
}

/* Values can hold themselves (a list appended to itself), so comparisons stop at a
 * depth: equal is then false, ordering fails. Lists sharing items make a small value
 * stand for an exponentially large one, so every value visited is charged. */
enum { MAX_DEPTH = 64 };

static bool eq(jv_budget *w, const jv *a, const jv *b, int depth);

bool jv_eq(jv_budget *w, const jv *a, const jv *b) { return eq(w, a, b, 0); }

static bool eq(jv_budget *w, const jv *a, const jv *b, int depth)
{
    if (depth > MAX_DEPTH || !jv_charge(w, JV_VISIT_UNITS))
        return false;
    if (is_num(a) && is_num(b)) {
        if (a->t != JV_FLOAT && b->t != JV_FLOAT)
            return (a->t == JV_INT ? a->u.i : a->u.b) == (b->t == JV_INT ? b->u.i : b->u.b);
        return num(a) == num(b);
    }
    if (a->t != b->t)
        return false;
    switch (a->t) {
    case JV_STR:
        return a->u.s.n == b->u.s.n && jv_charge(w, a->u.s.n) &&
               !memcmp(a->u.s.s, b->u.s.s, a->u.s.n);
    case JV_LIST:
        if (a->u.l->n != b->u.l->n)
            return false;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!eq(w, &a->u.l->items[i], &b->u.l->items[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a->u.d->n != b->u.d->n)
            return false;
        for (size_t i = 0; i < a->u.d->n; i++) {
            jv *o = jv_dict_find(w, b->u.d, &a->u.d->keys[i]);
            if (!o || !eq(w, &a->u.d->vals[i], o, depth + 1))
                return false;
        }
        return true;
    case JV_MACRO:
        return a->u.m.node == b->u.m.node;
    case JV_FUNC:
        return a->u.fn == b->u.fn;
    default:
        return true; /* none == none, undefined == undefined */
    }
}

static unsigned char fold_byte(unsigned char c, bool fold)
{
    return fold && c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static bool cmp(jv_budget *w, const jv *a, const jv *b, bool fold, int *out, int depth);

bool jv_cmp(jv_budget *w, const jv *a, const jv *b, bool fold, int *out)
{
    return cmp(w, a, b, fold, out, 0);
}

static bool cmp(jv_budget *w, const jv *a, const jv *b, bool fold, int *out, int depth)
{
    if (depth > MAX_DEPTH || !jv_charge(w, JV_VISIT_UNITS))
        return false;
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        if (a->t == JV_INT && b->t == JV_INT)
            *out = (a->u.i > b->u.i) - (a->u.i < b->u.i);
        else
            *out = (x > y) - (x < y);
        return true;
    }
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        if (!jv_charge(w, n))
            return false;
        for (size_t i = 0; i < n; i++) {
            unsigned char x = fold_byte((unsigned char)a->u.s.s[i], fold);
            unsigned char y = fold_byte((unsigned char)b->u.s.s[i], fold);
            if (x != y) {
                *out = x < y ? -1 : 1;
                return true;
            }
        }
        *out = (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
        return true;
    }
    if (a->t == JV_LIST && b->t == JV_LIST) {
        size_t n = a->u.l->n < b->u.l->n ? a->u.l->n : b->u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (!cmp(w, &a->u.l->items[i], &b->u.l->items[i], fold, out, depth + 1))
                return false;
            if (*out)
                return true;
        }
        *out = (a->u.l->n > b->u.l->n) - (a->u.l->n < b->u.l->n);
        return true;
    }
    return false;
}

const char *jv_type_name(const jv *v)
{
    static const char *const names[] = {"undefined", "none", "bool", "int",   "float",
                                        "string",    "list", "dict", "macro", "function"};
    return names[v->t];
}

/* Python's repr of a float: the shortest digits that read back the same, with ".0" on
 * whole numbers and exponents past 1e16. */
static void add_float(strbuf *b, double f)
{
    if (isnan(f) || isinf(f)) {
        strbuf_addf(b, "%s", isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
        return;
    }
    /* The shortest digits that read back as f, as d.ddde+X, then laid out as Python's
     * repr does: positional from 1e-4 up to 1e16, else with an exponent. */
    char buf[48], digits[24];
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    const char *p = buf;
    if (*p == '-') {
        strbuf_add(b, "-", 1);
        p++;
    }
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int x = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (x < -4 || x >= 16) {
        strbuf_add(b, digits, 1);
        if (nd > 1) {
            strbuf_add(b, ".", 1);
            strbuf_add(b, digits + 1, nd - 1);
        }
        strbuf_addf(b, "e%c%02d", x < 0 ? '-' : '+', abs(x));
    } else if (x < 0) {
        strbuf_add(b, "0.", 2);
        for (int i = -1; i > x; i--)
            strbuf_add(b, "0", 1);
        strbuf_add(b, digits, nd);
    } else {
        for (int i = 0; i <= x; i++)
            strbuf_add(b, i < (int)nd ? &digits[i] : "0", 1);
        strbuf_add(b, ".", 1);
        if ((int)nd > x + 1)
            strbuf_add(b, digits + x + 1, nd - (size_t)x - 1);
        else
            strbuf_add(b, "0", 1);
    }
}

/* Python's repr of a string: single quotes unless it holds ' and no ". */
static void add_repr_str(strbuf *b, const char *s, size_t n)
{
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    strbuf_add(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == (unsigned char)q)
            strbuf_addf(b, "\\%c", c);
        else if (c == '\n')
            strbuf_add(b, "\\n", 2);
        else if (c == '\r')
            strbuf_add(b, "\\r", 2);
        else if (c == '\t')
            strbuf_add(b, "\\t", 2);
        else if (c < 0x20 || c == 0x7F)
            strbuf_addf(b, "\\x%02x", c);
        else
            strbuf_add(b, &s[i], 1);
    }
    strbuf_add(b, &q, 1);
}

static bool add_repr(jv_budget *w, strbuf *b, const jv *v, int depth);

/* Charges a value about to be written to b, and stops once b is past the byte bound:
 * shared items make a small value print as a huge one, so the check is per item. */
static bool may_add(jv_budget *w, strbuf *b, const jv *v)
{
    return jv_charge(w, JV_VISIT_UNITS + (v->t == JV_STR ? v->u.s.n : 0)) && jv_fits(w, b->len);
}

static bool add_str(jv_budget *w, strbuf *b, const jv *v, int depth)
{
    if (depth > 64 || !may_add(w, b, v))
        return false;
    switch (v->t) {
    case JV_UNDEF:
        return true;
    case JV_NONE:
        strbuf_add(b, "None", 4);
        return true;
    case JV_BOOL:
        strbuf_addf(b, "%s", v->u.b ? "True" : "False");
        return true;
    case JV_INT:
        strbuf_addf(b, "%lld", (long long)v->u.i);
        return true;
    case JV_FLOAT:
        add_float(b, v->u.f);
        return true;
    case JV_STR:
        strbuf_add(b, v->u.s.s, v->u.s.n);
        return true;
    case JV_LIST:
        strbuf_add(b, v->u.l->tuple ? "(" : "[", 1);
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i)
                strbuf_add(b, ", ", 2);
            if (!add_repr(w, b, &v->u.l->items[i], depth + 1))
                return false;
        }
        if (v->u.l->tuple && v->u.l->n == 1)
            strbuf_add(b, ",", 1);
        strbuf_add(b, v->u.l->tuple ? ")" : "]", 1);
        return true;
    case JV_DICT:
        strbuf_add(b, "{", 1);
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i)
                strbuf_add(b, ", ", 2);
            if (!add_repr(w, b, &v->u.d->keys[i], depth + 1))
                return false;
            strbuf_add(b, ": ", 2);
            if (!add_repr(w, b, &v->u.d->vals[i], depth + 1))
                return false;
        }
        strbuf_add(b, "}", 1);
        return true;
    default:
        strbuf_addf(b, "<%s>", jv_type_name(v));
        return true;
    }
}

static bool add_repr(jv_budget *w, strbuf *b, const jv *v, int depth)
{
    if (v->t == JV_STR) {
        if (!may_add(w, b, v))
            return false;
        add_repr_str(b, v->u.s.s, v->u.s.n);
        return true;
    }
    return add_str(w, b, v, depth);
}

bool jv_to_str(jv_budget *w, strbuf *b, const jv *v)
{
    return add_str(w, b, v, 0) && jv_fits(w, b->len) && !b->failed;
}

static void add_json_str(strbuf *b, const char *s, size_t n)
{
    strbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : NULL;
        if (esc)
            strbuf_add(b, esc, 2);
        else if (c < 0x20 || c == 0x7F)
            strbuf_addf(b, "\\u%04x", c);
        else
            strbuf_add(b, &s[i], 1);
    }
    strbuf_add(b, "\"", 1);
}

static void newline_indent(strbuf *b, int indent, int level)
{
    strbuf_add(b, "\n", 1);
    for (int i = 0; i < indent * level; i++)
        strbuf_add(b, " ", 1);
}

static bool to_json(jv_budget *w, strbuf *b, const jv *v, int indent, const char *item_sep,
                    const char *key_sep, bool sort_keys, int depth)
{
    if (depth > 64 || !may_add(w, b, v))
        return false;
    const char *is = item_sep ? item_sep : indent >= 0 ? "," : ", ";
    const char *ks = key_sep ? key_sep : ": ";
    switch (v->t) {
    case JV_NONE:
        strbuf_add(b, "null", 4);
        return true;
    case JV_BOOL:
        strbuf_addf(b, "%s", v->u.b ? "true" : "false");
        return true;
    case JV_INT:
    case JV_FLOAT:
        return add_str(w, b, v, depth);
    case JV_STR:
        add_json_str(b, v->u.s.s, v->u.s.n);
        return true;
    case JV_LIST:
        if (!v->u.l->n) {
            strbuf_add(b, "[]", 2);
            return true;
        }
        strbuf_add(b, "[", 1);
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i)
                strbuf_add(b, is, strlen(is));
            if (indent >= 0)
                newline_indent(b, indent, depth + 1);
            if (!to_json(w, b, &v->u.l->items[i], indent, item_sep, key_sep, sort_keys, depth + 1))
                return false;
        }
        if (indent >= 0)
            newline_indent(b, indent, depth);
        strbuf_add(b, "]", 1);
        return true;
    case JV_DICT: {
        jv_dict *d = v->u.d;
        if (!d->n) {
            strbuf_add(b, "{}", 2);
            return true;
        }
        strbuf_add(b, "{", 1);
        const jv *prev = NULL;
        for (size_t i = 0; i < d->n; i++) {
            size_t k = i;
            if (sort_keys) { /* the next key after prev in sorted order (keys are distinct) */
                const jv *best = NULL;
                for (size_t j = 0; j < d->n; j++) {
                    int c1 = 1, c2 = -1;
                    if (prev && (!jv_cmp(w, &d->keys[j], prev, false, &c1) || c1 <= 0))
                        continue;
                    if (best && (!jv_cmp(w, &d->keys[j], best, false, &c2) || c2 >= 0))
                        continue;
                    best = &d->keys[j];
                    k = j;
                }
                prev = best;
            }
            if (d->keys[k].t != JV_STR)
                return false;
            if (i)
                strbuf_add(b, is, strlen(is));
            if (indent >= 0)
                newline_indent(b, indent, depth + 1);
            add_json_str(b, d->keys[k].u.s.s, d->keys[k].u.s.n);
            strbuf_add(b, ks, strlen(ks));
            if (!to_json(w, b, &d->vals[k], indent, item_sep, key_sep, sort_keys, depth + 1))
                return false;
        }
        if (indent >= 0)
            newline_indent(b, indent, depth);
        strbuf_add(b, "}", 1);
        return true;
    }
    default:
        return false;
    }
}

bool jv_to_json(jv_budget *w, strbuf *b, const jv *v, int indent, const char *item_sep,
                const char *key_sep, bool sort_keys, int depth)
{
    return to_json(w, b, v, indent, item_sep, key_sep, sort_keys, depth) && jv_fits(w, b->len);
}

bool jv_from_json(jinja_arena *a, jv_budget *w, const cJSON *j, jv *out, int depth)
{
    if (depth > 64 || !jv_charge(w, JV_VISIT_UNITS))
        return false;
    if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        char *s = jinja_alloc(a, n + 1);
        if (!s)
            return false;
        memcpy(s, j->valuestring, n);
        *out = jv_str(s, n);
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            *out = jv_int((int64_t)d);
        else
            *out = (jv){.t = JV_FLOAT, .u.f = d};
    } else if (cJSON_IsBool(j)) {
        *out = jv_bool(cJSON_IsTrue(j));
    } else if (cJSON_IsNull(j)) {
        *out = (jv){.t = JV_NONE};
    } else if (cJSON_IsArray(j)) {
        if (!jv_new_list(a, out, (size_t)cJSON_GetArraySize(j)))
            return false;
        for (const cJSON *e = j->child; e; e = e->next) {
            jv v;
            if (!jv_from_json(a, w, e, &v, depth + 1) || !jv_list_push(a, out->u.l, v))
                return false;
        }
    } else if (cJSON_IsObject(j)) {
        if (!jv_new_dict(a, out, (size_t)cJSON_GetArraySize(j)))
            return false;
        for (const cJSON *e = j->child; e; e = e->next) {
            jv k, v;
            size_t n = strlen(e->string);
            char *s = jinja_alloc(a, n + 1);
            if (!s || !jv_from_json(a, w, e, &v, depth + 1))
                return false;
            memcpy(s, e->string, n);
            k = jv_str(s, n);
            if (!jv_dict_set(a, w, out->u.d, k, v))
                return false;
        }
    } else {
        return false;
    }
    return true;
}
