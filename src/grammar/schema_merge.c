/* schema_merge.c: allOf of several schemas merged into one schema object, which then
 * compiles like any other. Bounds tighten (the larger minimum, the smaller maximum), types
 * and enums intersect, properties and required names unite (a property in several parts
 * gets the allOf of its schemas, and a part's additionalProperties applies to the names
 * it does not declare), items and additionalProperties schemas are merged as allOf of
 * them, `not` enums unite. A part with anyOf or oneOf is distributed over the others
 * (allOf [anyOf [A, B], C] is anyOf [allOf [A, C], allOf [B, C]]). What cannot be merged
 * exactly (two different patterns, formats or prefixItems) is refused naming allOf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_comp.h"

enum {
    MERGE_MAX_REFS = 32,      /* $ref hops followed to reach a part's own keywords */
    MERGE_BUDGET = 1 << 16,   /* JSON values all merges of one schema may read and make:
                               * distributing allOf over several anyOf multiplies them */
};

/* The JSON values in v, itself included. */
static long count_values(const cJSON *v)
{
    long n = 1;
    for (const cJSON *k = v ? v->child : NULL; k; k = k->next)
        n += count_values(k);
    return n;
}

/* Takes n values from the compilation's merge budget; false (failure set) past it. */
static bool spend(comp *c, long n)
{
    c->merge_spent += n;
    if (c->merge_spent <= MERGE_BUDGET)
        return true;
    return comp_fail(c, TS_ERR_TOO_LONG, "allOf", "'allOf' expands past %d schema values "
                     "(anyOf or oneOf inside allOf multiply)", MERGE_BUDGET), false;
}

static const char *const min_words[] = {"minimum", "exclusiveMinimum", "minLength",
                                        "minItems", "minProperties"};
static const char *const max_words[] = {"maximum", "exclusiveMaximum", "maxLength",
                                        "maxItems", "maxProperties"};
static const char *const skipped[] = {"title", "description", "examples", "default",
                                      "$schema", "$id", "$comment", "deprecated", "readOnly",
                                      "writeOnly", "$defs", "definitions"};

static bool in_list(const char *const *list, size_t n, const char *word)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], word))
            return true;
    return false;
}

#define IN(list, w) in_list(list, sizeof list / sizeof list[0], w)

/* The schema a part stands for once top-level $refs are followed (NULL: failure set). */
static const cJSON *deref(comp *c, const cJSON *part)
{
    for (int hops = 0; cJSON_IsObject(part); hops++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(part, "$ref");
        if (!ref)
            return part;
        if (!cJSON_IsString(ref) || ref->valuestring[0] != '#' || hops == MERGE_MAX_REFS)
            return comp_fail(c, TS_ERR_UNSUPPORTED, "allOf", "'allOf' of a '$ref' that is "
                             "not a reference inside the schema, or a chain of them"), NULL;
        const cJSON *at = c->doc;
        for (const char *p = ref->valuestring + 1; at && *p == '/';) {
            char seg[128];
            size_t n = 0;
            for (p++; *p && *p != '/' && n + 1 < sizeof seg; p++) {
                char ch = *p;
                if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                    ch = *++p == '0' ? '~' : '/';
                seg[n++] = ch;
            }
            seg[n] = '\0';
            at = cJSON_IsArray(at) ? cJSON_GetArrayItem(at, atoi(seg))
                                   : cJSON_GetObjectItemCaseSensitive(at, seg);
        }
        if (!at)
            return comp_fail(c, TS_ERR_INVALID_ARG, "allOf", "'$ref' '%.60s' points nowhere "
                             "in the schema", ref->valuestring), NULL;
        part = at;
    }
    return part;
}

/* {"allOf": [a, b]} (copies). */
static cJSON *both(const cJSON *a, const cJSON *b)
{
    cJSON *s = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(s, "allOf");
    cJSON_AddItemToArray(list, cJSON_Duplicate(a, true));
    cJSON_AddItemToArray(list, cJSON_Duplicate(b, true));
    return s;
}

/* The type names both t and u allow (each a name or an array of names). */
static cJSON *types_meet(const cJSON *t, const cJSON *u)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *x, *y;
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *a = pass ? u : t, *b = pass ? t : u;
        for (x = cJSON_IsArray(a) ? a->child : a; x; x = cJSON_IsArray(a) ? x->next : NULL)
            for (y = cJSON_IsArray(b) ? b->child : b; y; y = cJSON_IsArray(b) ? y->next : NULL) {
                if (!cJSON_IsString(x) || !cJSON_IsString(y))
                    continue;
                const char *name = NULL;
                if (!strcmp(x->valuestring, y->valuestring))
                    name = x->valuestring;
                else if (!strcmp(x->valuestring, "integer") && !strcmp(y->valuestring, "number"))
                    name = "integer";
                bool seen = false;
                const cJSON *o;
                cJSON_ArrayForEach(o, out)
                    seen |= name && !strcmp(o->valuestring, name);
                if (name && !seen)
                    cJSON_AddItemToArray(out, cJSON_CreateString(name));
            }
    }
    return out;
}

/* enum or const of a part as an enum array (borrowed values), NULL when it has neither. */
static cJSON *values_of(const cJSON *part)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(part, "enum");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(part, "const");
    if (!e && !k)
        return NULL;
    cJSON *out = cJSON_CreateArray();
    if (k)
        cJSON_AddItemToArray(out, cJSON_Duplicate(k, true));
    const cJSON *v;
    cJSON_ArrayForEach(v, e)
        if (!k || cJSON_Compare(v, k, true))
            cJSON_AddItemToArray(out, cJSON_Duplicate(v, true));
    return out;
}

static cJSON *values_meet(cJSON *a, const cJSON *b)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *v, *w;
    cJSON_ArrayForEach(v, a) {
        bool in = false;
        cJSON_ArrayForEach(w, b)
            in |= cJSON_Compare(v, w, true);
        if (in)
            cJSON_AddItemToArray(out, cJSON_Duplicate(v, true));
    }
    cJSON_Delete(a);
    return out;
}

/* Sets key of m to v (taking it), replacing what was there. */
static void put(cJSON *m, const char *key, cJSON *v)
{
    if (cJSON_GetObjectItemCaseSensitive(m, key))
        cJSON_ReplaceItemInObjectCaseSensitive(m, key, v);
    else
        cJSON_AddItemToObject(m, key, v);
}

/* The properties of the merged object: every name of either side, under the allOf of the
 * schemas the sides give it (a side that does not declare it gives its
 * additionalProperties, when that is not absent or true). */
static void merge_props(cJSON *m, const cJSON *p)
{
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "properties");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(p, "properties");
    const cJSON *ma = cJSON_GetObjectItemCaseSensitive(m, "additionalProperties");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(p, "additionalProperties");
    bool m_open = !ma || cJSON_IsTrue(ma), p_open = !pa || cJSON_IsTrue(pa);
    cJSON *out = cJSON_CreateObject();
    const cJSON *x;
    cJSON_ArrayForEach(x, mp) {
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(pp, x->string);
        cJSON *s = y ? both(x, y) : p_open ? cJSON_Duplicate(x, true) : both(x, pa);
        cJSON_AddItemToObject(out, x->string, s);
    }
    cJSON_ArrayForEach(x, pp)
        if (!cJSON_GetObjectItemCaseSensitive(mp, x->string))
            cJSON_AddItemToObject(out, x->string, m_open ? cJSON_Duplicate(x, true) : both(x, ma));
    if (out->child || mp || pp)
        put(m, "properties", out);
    else
        cJSON_Delete(out);
    if (!p_open)
        put(m, "additionalProperties", m_open ? cJSON_Duplicate(pa, true) : both(ma, pa));
}

/* Merges part p (its $refs followed; neither anyOf nor oneOf) into m. */
static bool merge_into(comp *c, cJSON *m, const cJSON *p)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(p, "properties");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(p, "additionalProperties");
    if ((props && !cJSON_IsObject(props)) || (add && !cJSON_IsObject(add) && !cJSON_IsBool(add)))
        return comp_fail(c, TS_ERR_INVALID_ARG, "allOf", "'properties' must be an object and "
                         "'additionalProperties' a schema"), false;
    if (!spend(c, 2 * count_values(p)))
        return false;
    if (cJSON_GetObjectItemCaseSensitive(p, "properties") ||
        cJSON_GetObjectItemCaseSensitive(p, "additionalProperties"))
        merge_props(m, p);
    const cJSON *k;
    cJSON_ArrayForEach(k, p) {
        const char *w = k->string;
        cJSON *have = cJSON_GetObjectItemCaseSensitive(m, w);
        if (IN(skipped, w) || !strcmp(w, "properties") || !strcmp(w, "additionalProperties") ||
            !strcmp(w, "enum") || !strcmp(w, "const") || !strcmp(w, "allOf"))
            continue;
        if (!have) {
            cJSON_AddItemToObject(m, w, cJSON_Duplicate(k, true));
        } else if (!strcmp(w, "type")) {
            put(m, w, types_meet(have, k));
        } else if ((IN(min_words, w) || IN(max_words, w)) && cJSON_IsNumber(have) &&
                   cJSON_IsNumber(k)) {
            bool lower = IN(min_words, w) ? k->valuedouble > have->valuedouble
                                          : k->valuedouble < have->valuedouble;
            if (lower)
                put(m, w, cJSON_Duplicate(k, true));
        } else if (!strcmp(w, "required")) {
            const cJSON *r, *q;
            cJSON_ArrayForEach(r, k) {
                bool seen = false;
                cJSON_ArrayForEach(q, have)
                    seen |= cJSON_IsString(q) && cJSON_IsString(r) && !strcmp(q->valuestring, r->valuestring);
                if (!seen)
                    cJSON_AddItemToArray(have, cJSON_Duplicate(r, true));
            }
        } else if (!strcmp(w, "items")) {
            put(m, w, both(have, k));
        } else if (!strcmp(w, "uniqueItems")) {
            if (cJSON_IsTrue(k))
                put(m, w, cJSON_CreateTrue());
        } else if (!strcmp(w, "not")) {
            cJSON *a = values_of(have), *b = values_of(k);
            if (!a || !b) {
                cJSON_Delete(a);
                cJSON_Delete(b);
                return comp_fail(c, TS_ERR_UNSUPPORTED, "allOf", "'allOf' of parts with 'not' "
                                 "of other than const or enum is not supported"), false;
            }
            cJSON *u = cJSON_CreateObject();
            cJSON_AddItemToObject(u, "enum", a);
            const cJSON *v;
            cJSON_ArrayForEach(v, b)
                cJSON_AddItemToArray(a, cJSON_Duplicate(v, true));
            cJSON_Delete(b);
            put(m, w, u);
        } else if (!cJSON_Compare(have, k, true)) {
            return comp_fail(c, TS_ERR_UNSUPPORTED, "allOf", "'allOf' of parts with different "
                             "'%.40s' is not supported", w), false;
        }
    }
    cJSON *pv = values_of(p);
    if (pv) {
        cJSON *mv = values_of(m);
        cJSON_DeleteItemFromObjectCaseSensitive(m, "const");
        put(m, "enum", mv ? values_meet(mv, pv) : cJSON_Duplicate(pv, true));
        cJSON_Delete(pv);
    }
    return true;
}

/* The schema allOf alts means, as a new object owned by c (NULL: failure set). */
const cJSON *comp_merge_all_of(comp *c, const cJSON *alts)
{
    int n = cJSON_GetArraySize(alts);
    for (int i = 0; i < n; i++) { /* a part with alternatives: distribute over it */
        const cJSON *p = deref(c, cJSON_GetArrayItem(alts, i));
        if (!p)
            return NULL;
        const char *kw = cJSON_GetObjectItemCaseSensitive(p, "anyOf") ? "anyOf"
                         : cJSON_GetObjectItemCaseSensitive(p, "oneOf") ? "oneOf" : NULL;
        if (!kw || !cJSON_IsObject(p))
            continue;
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(p, kw);
        if (!spend(c, (long)cJSON_GetArraySize(choices) * count_values(alts)))
            return NULL;
        cJSON *out = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(out, kw);
        const cJSON *alt;
        cJSON_ArrayForEach(alt, cJSON_GetObjectItemCaseSensitive(p, kw)) {
            cJSON *each = cJSON_CreateObject(), *parts = cJSON_AddArrayToObject(each, "allOf");
            for (int j = 0; j < n; j++)
                cJSON_AddItemToArray(parts, cJSON_Duplicate(j == i ? alt
                                                     : cJSON_GetArrayItem(alts, j), true));
            cJSON_AddItemToArray(list, each);
        }
        cJSON_AddItemToArray(c->owned, out);
        return out;
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(c->owned, m);
    for (int i = 0; i < n; i++) {
        const cJSON *p = deref(c, cJSON_GetArrayItem(alts, i));
        if (!p)
            return NULL;
        if (cJSON_IsFalse(p)) {
            cJSON *no = cJSON_CreateFalse();
            cJSON_AddItemToArray(c->owned, no);
            return no;
        }
        if (!cJSON_IsObject(p) && !cJSON_IsTrue(p))
            return comp_fail(c, TS_ERR_INVALID_ARG, "allOf", "a schema must be an object or "
                             "a boolean"), NULL;
        const cJSON *inner = cJSON_GetObjectItemCaseSensitive(p, "allOf");
        if (inner) { /* nested allOf: merge it first */
            p = cJSON_IsArray(inner) && cJSON_GetArraySize(inner) ? comp_merge_all_of(c, inner)
                                                                : NULL;
            if (!p)
                return c->st == TS_OK ? comp_fail(c, TS_ERR_INVALID_ARG, "allOf", "'allOf' "
                                                  "must be a non-empty array"), NULL : NULL;
            if (!cJSON_IsObject(p))
                return p; /* false */
            if (!merge_into(c, m, p))
                return NULL;
            p = cJSON_GetArrayItem(alts, i); /* then the part's own keywords */
            p = deref(c, p);
        }
        if (cJSON_IsObject(p) && !merge_into(c, m, p))
            return NULL;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type");
    if (cJSON_IsArray(t) && !t->child) { /* no type both allow */
        cJSON *no = cJSON_CreateFalse();
        cJSON_AddItemToArray(c->owned, no);
        return no;
    }
    return m;
}
