/* schema_compile.c: a JSON Schema's text into the node graph of schema.h (ts_schema): the
 * table of keywords tessera knows and the walk over them. Each schema object becomes one
 * node (shared by every $ref to it, so recursion is a cycle in the graph); schema_types.c
 * makes the node of each JSON type and schema_pass.c checks and completes the graph.
 * Mutual recursion with schema_types.c, the schemas' own: a schema object's type has
 * schemas inside it (walk -> comp_typed), and those are schema objects (items,
 * properties: comp_typed -> comp_schema); comp_schema bounds it with comp.depth. The
 * compilation's state (failures, path, memo, new nodes) is schema_comp.c's, below both. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_comp.h"

enum { WALK_MAX_DEPTH = 64 }; /* schema objects nested in the text */

typedef enum kw_family {
    KW_ANNOT, /* accepted and ignored */
    KW_DEFS,  /* $defs, definitions: read only through $ref */
    KW_TYPE, KW_ENUM, KW_CONST, KW_ANY_OF, KW_ONE_OF, KW_ALL_OF, KW_REF,
    KW_OBJECT, KW_ARRAY, KW_STRING, KW_NUMBER, /* the keywords of one type */
    KW_NOT,   /* of const or enum: those values left out */
    KW_COUNT
} kw_family;

static const struct keyword {
    const char *name;
    kw_family family;
} keywords[] = {
    {"title", KW_ANNOT}, {"description", KW_ANNOT}, {"examples", KW_ANNOT},
    {"default", KW_ANNOT}, {"$schema", KW_ANNOT}, {"$id", KW_ANNOT}, {"$comment", KW_ANNOT},
    {"deprecated", KW_ANNOT}, {"readOnly", KW_ANNOT}, {"writeOnly", KW_ANNOT},
    {"$defs", KW_DEFS}, {"definitions", KW_DEFS},
    {"type", KW_TYPE}, {"enum", KW_ENUM}, {"const", KW_CONST}, {"anyOf", KW_ANY_OF},
    {"oneOf", KW_ONE_OF}, {"allOf", KW_ALL_OF}, {"$ref", KW_REF}, {"not", KW_NOT},
    {"properties", KW_OBJECT}, {"required", KW_OBJECT}, {"additionalProperties", KW_OBJECT},
    {"minProperties", KW_OBJECT}, {"maxProperties", KW_OBJECT}, {"uniqueItems", KW_ARRAY},
    {"items", KW_ARRAY}, {"minItems", KW_ARRAY}, {"maxItems", KW_ARRAY},
    {"prefixItems", KW_ARRAY},
    {"minLength", KW_STRING}, {"maxLength", KW_STRING}, {"pattern", KW_STRING},
    {"format", KW_STRING},
    {"minimum", KW_NUMBER}, {"maximum", KW_NUMBER}, {"exclusiveMinimum", KW_NUMBER},
    {"exclusiveMaximum", KW_NUMBER},
};

static const char *const type_names[TY_COUNT] = {"null", "boolean", "object", "array",
                                                 "number", "integer", "string"};

/* ---- the memo (schema_comp.c fills it) */

static int memo_find(const comp *c, const cJSON *sch)
{
    for (int i = 0; i < c->n_memo; i++)
        if (c->memo_key[i] == sch)
            return c->memo_node[i];
    return -1;
}

/* ---- the walk */

/* The schema a "#..." reference points at in the document, or NULL. */
static const cJSON *resolve(const comp *c, const char *ref, char *path, size_t path_size)
{
    const cJSON *at = c->doc;
    size_t o = 0;
    path[0] = '\0';
    const char *p = ref + 1;
    while (at && *p == '/') {
        char seg[128];
        size_t n = 0;
        for (p++; *p && *p != '/' && n + 1 < sizeof seg; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = *++p == '0' ? '~' : '/';
            seg[n++] = ch;
        }
        seg[n] = '\0';
        if (cJSON_IsArray(at)) {
            char *end;
            long i = strtol(seg, &end, 10);
            at = *seg && !*end ? cJSON_GetArrayItem(at, (int)i) : NULL;
            o += (size_t)snprintf(path + o, o < path_size ? path_size - o : 0, "[%s]", seg);
        } else {
            at = cJSON_GetObjectItemCaseSensitive(at, seg);
            o += (size_t)snprintf(path + o, o < path_size ? path_size - o : 0, "%s%s",
                                  o ? "." : "", seg);
        }
        if (o >= path_size)
            o = path_size - 1;
    }
    return *p ? NULL : at;
}

static int ref_node(comp *c, const cJSON *sch, const cJSON *ref)
{
    if (!cJSON_IsString(ref))
        return comp_fail(c, TS_ERR_INVALID_ARG, "$ref", "'$ref' must be a string");
    if (ref->valuestring[0] != '#')
        return comp_fail(c, TS_ERR_UNSUPPORTED, "$ref", "only references inside the schema "
                         "('#', '#/$defs/...') are supported, not '%.60s'", ref->valuestring);
    char where[TS_SCHEMA_PATH_LEN], saved[TS_SCHEMA_PATH_LEN];
    const cJSON *target = resolve(c, ref->valuestring, where, sizeof where);
    if (!target)
        return comp_fail(c, TS_ERR_INVALID_ARG, "$ref", "'$ref' '%.60s' points nowhere in the "
                         "schema", ref->valuestring);
    int n = comp_memo_add(c, sch, comp_node(c, SCH_UNION, 0));
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", where);
    int t = n < 0 ? -1 : comp_schema(c, target);
    memcpy(c->path, saved, sizeof saved);
    if (t >= 0 && !sb_union_add(&c->b, n, &t, 1, false, c->path))
        return comp_nomem(c);
    return t < 0 ? -1 : n;
}

/* anyOf, oneOf, or allOf of one schema: a union of its alternatives; allOf of several:
 * the schema they merge into (schema_merge.c). */
static int union_node(comp *c, const cJSON *sch, const char *keyword, const cJSON *alts)
{
    int n_alts = cJSON_IsArray(alts) ? cJSON_GetArraySize(alts) : 0;
    if (n_alts == 0)
        return comp_fail(c, TS_ERR_INVALID_ARG, keyword, "'%s' must be a non-empty array",
                         keyword);
    int n = comp_memo_add(c, sch, comp_node(c, SCH_UNION, 0));
    if (n >= 0 && !strcmp(keyword, "allOf") && n_alts > 1) { /* one schema of them all */
        const cJSON *merged = comp_merge_all_of(c, alts);
        int t = merged ? comp_schema(c, merged) : -1;
        if (t < 0 && c->st != TS_OK) /* the merged schema's paths are not the request's */
            sb_path_join(c->where, sizeof c->where, c->path, "allOf");
        if (t >= 0 && !sb_union_add(&c->b, n, &t, 1, false, c->path))
            return comp_nomem(c);
        return t < 0 ? -1 : n;
    }
    int *ids = n < 0 ? NULL : malloc((size_t)n_alts * sizeof *ids);
    if (n >= 0 && !ids)
        n = comp_nomem(c);
    for (int i = 0; i < n_alts && n >= 0; i++) {
        size_t at = comp_push(c, ".%s[%d]", keyword, i);
        ids[i] = comp_schema(c, cJSON_GetArrayItem(alts, i));
        comp_pop(c, at);
        if (ids[i] < 0)
            n = -1;
    }
    if (n >= 0 && !sb_union_add(&c->b, n, ids, n_alts, !strcmp(keyword, "oneOf"), c->path))
        n = comp_nomem(c);
    free(ids);
    return n;
}

/* The bit set of types "type" names (0 with the failure recorded). */
static unsigned read_types(comp *c, const cJSON *type)
{
    unsigned set = 0;
    int n = cJSON_IsArray(type) ? cJSON_GetArraySize(type) : 1;
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_IsArray(type) ? cJSON_GetArrayItem(type, i) : type;
        int k = TY_COUNT;
        for (int j = 0; cJSON_IsString(t) && j < TY_COUNT; j++)
            if (!strcmp(t->valuestring, type_names[j]))
                k = j;
        if (k == TY_COUNT)
            return comp_fail(c, TS_ERR_INVALID_ARG, "type", "'type' must name JSON types "
                             "(null, boolean, object, array, number, integer, string)"), 0;
        set |= 1u << k;
    }
    if (!set)
        comp_fail(c, TS_ERR_INVALID_ARG, "type", "'type' names no type");
    return set;
}

/* Whether value v is of one of the types in set. */
static bool value_typed(const cJSON *v, unsigned set)
{
    double d = cJSON_IsNumber(v) ? v->valuedouble : 0;
    return (cJSON_IsNull(v) && (set & 1u << TY_NULL)) || (cJSON_IsBool(v) && (set & 1u << TY_BOOL)) ||
           (cJSON_IsObject(v) && (set & 1u << TY_OBJECT)) || (cJSON_IsArray(v) && (set & 1u << TY_ARRAY)) ||
           (cJSON_IsString(v) && (set & 1u << TY_STRING)) ||
           (cJSON_IsNumber(v) && ((set & 1u << TY_NUMBER) ||
                                  ((set & 1u << TY_INTEGER) && d == floor(d))));
}

static bool is_excluded(const cJSON *excl, const cJSON *v)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, excl)
        if (cJSON_Compare(e, v, true))
            return true;
    return false;
}

/* The values `not` leaves out (an array owned by c), from its const or enum; NULL with
 * the failure recorded when it is any other schema. */
static const cJSON *not_values(comp *c, const cJSON *sch)
{
    const cJSON *no = cJSON_GetObjectItemCaseSensitive(sch, "not"), *m;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(no, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(no, "const");
    bool plain = cJSON_IsObject(no) && (en || cn) && (!en || cJSON_IsArray(en));
    const cJSON *kws = plain ? no : NULL;
    cJSON_ArrayForEach(m, kws)
        plain &= !strcmp(m->string, "enum") || !strcmp(m->string, "const") ||
                 !strcmp(m->string, "title") || !strcmp(m->string, "description");
    if (!plain)
        return comp_fail(c, TS_ERR_UNSUPPORTED, "not", "'not' is supported only of a "
                         "'const' or an 'enum'"), NULL;
    cJSON *out = cJSON_CreateArray();
    if (!out || !cJSON_AddItemToArray(c->owned, out))
        return cJSON_Delete(out), comp_nomem(c), NULL;
    if (cn)
        cJSON_AddItemToArray(out, cJSON_Duplicate(cn, true));
    cJSON_ArrayForEach(m, en)
        cJSON_AddItemToArray(out, cJSON_Duplicate(m, true));
    return out;
}

/* enum or const: a literal node of the values of the allowed types. The values are read
 * in list order (cJSON_GetArrayItem per index would make a large enum quadratic); their
 * texts share one trie (sb_literal), so compiling is near-linear in the enum's bytes. */
static int enum_node(comp *c, const cJSON *sch, const cJSON *en, const cJSON *cn,
                     unsigned types, const cJSON *excl)
{
    if (en && !cJSON_IsArray(en))
        return comp_fail(c, TS_ERR_INVALID_ARG, "enum", "'enum' must be an array");
    int n = en ? cJSON_GetArraySize(en) : 1, k = 0;
    const cJSON **vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
    if (!vals)
        return comp_nomem(c);
    for (const cJSON *v = en ? en->child : cn; v && k < n; v = en ? v->next : NULL)
        if ((!types || value_typed(v, types)) && !is_excluded(excl, v))
            vals[k++] = v;
    int node = comp_memo_add(c, sch, comp_literal(c, vals, k));
    free(vals);
    return node;
}

/* The families of keywords in sch (a bit per kw_family); an unknown keyword fails. */
static unsigned families(comp *c, const cJSON *sch)
{
    unsigned set = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, sch) {
        size_t k = 0;
        while (k < sizeof keywords / sizeof keywords[0] && strcmp(keywords[k].name, m->string))
            k++;
        if (k == sizeof keywords / sizeof keywords[0])
            return comp_fail(c, TS_ERR_UNSUPPORTED, m->string, "unsupported keyword '%.60s'%s%s",
                             m->string, c->path[0] ? " at " : "", c->path), ~0u;
        set |= 1u << keywords[k].family;
    }
    return set;
}

/* The first keyword of sch in one of the families of mask, for messages. */
static const char *first_of(const cJSON *sch, unsigned mask)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, sch)
        for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
            if (!strcmp(keywords[k].name, m->string) && (mask >> keywords[k].family & 1))
                return m->string;
    return "?";
}

/* The keyword of a family of one keyword. */
static const char *family_name(kw_family f)
{
    for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
        if (keywords[k].family == f)
            return keywords[k].name;
    return "?";
}

#define FAM(f) (1u << (f))
#define TYPED_FAMS (FAM(KW_OBJECT) | FAM(KW_ARRAY) | FAM(KW_STRING) | FAM(KW_NUMBER))

static int walk(comp *c, const cJSON *sch)
{
    unsigned fam = families(c, sch);
    if (c->st != TS_OK)
        return -1;
    const cJSON *get;
    static const kw_family alone[] = {KW_REF, KW_ANY_OF, KW_ONE_OF, KW_ALL_OF};
    for (size_t i = 0; i < sizeof alone / sizeof alone[0]; i++) {
        if (!(fam & FAM(alone[i])))
            continue;
        unsigned others = fam & ~(FAM(KW_ANNOT) | FAM(KW_DEFS) | FAM(alone[i]));
        const char *kw = family_name(alone[i]);
        if (others)
            return comp_fail(c, TS_ERR_UNSUPPORTED, first_of(sch, others), "'%s' beside '%s' "
                             "is not supported", first_of(sch, others), kw);
        get = cJSON_GetObjectItemCaseSensitive(sch, kw);
        return alone[i] == KW_REF ? ref_node(c, sch, get) : union_node(c, sch, kw, get);
    }
    unsigned types = fam & FAM(KW_TYPE)
                         ? read_types(c, cJSON_GetObjectItemCaseSensitive(sch, "type")) : 0;
    if (c->st != TS_OK)
        return -1;
    const cJSON *excl = fam & FAM(KW_NOT) ? not_values(c, sch) : NULL;
    if (c->st != TS_OK)
        return -1;
    if (fam & (FAM(KW_ENUM) | FAM(KW_CONST))) {
        if ((fam & FAM(KW_ENUM)) && (fam & FAM(KW_CONST)))
            return comp_fail(c, TS_ERR_UNSUPPORTED, "const", "'const' beside 'enum' is not "
                             "supported");
        if (fam & TYPED_FAMS)
            return comp_fail(c, TS_ERR_UNSUPPORTED, first_of(sch, TYPED_FAMS), "'%s' beside "
                             "enum or const is not supported", first_of(sch, TYPED_FAMS));
        return enum_node(c, sch, cJSON_GetObjectItemCaseSensitive(sch, "enum"),
                         cJSON_GetObjectItemCaseSensitive(sch, "const"), types, excl);
    }
    if (!types) { /* no "type": the types whose keywords appear, or any value */
        types |= fam & FAM(KW_OBJECT) ? 1u << TY_OBJECT : 0;
        types |= fam & FAM(KW_ARRAY) ? 1u << TY_ARRAY : 0;
        types |= fam & FAM(KW_STRING) ? 1u << TY_STRING : 0;
        types |= fam & FAM(KW_NUMBER) ? 1u << TY_NUMBER : 0;
        if (!types && excl)
            return comp_fail(c, TS_ERR_UNSUPPORTED, "not", "'not' needs a 'type' or an "
                             "'enum' beside it");
        if (!types)
            return comp_memo_add(c, sch, comp_any(c));
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, excl)
        if ((cJSON_IsObject(e) || cJSON_IsArray(e)) &&
            (types & (1u << TY_OBJECT | 1u << TY_ARRAY)))
            return comp_fail(c, TS_ERR_UNSUPPORTED, "not", "'not' of an object or array "
                             "value is not supported");
    if ((types & (1u << TY_NUMBER)) && (types & (1u << TY_INTEGER)))
        types &= ~(1u << TY_INTEGER); /* integers are numbers */
    if (!(types & (types - 1))) { /* one type */
        c->excl = excl;
        return comp_typed(c, sch, __builtin_ctz(types), sch);
    }
    int ids[TY_COUNT], n_ids = 0;
    int n = comp_memo_add(c, sch, comp_node(c, SCH_UNION, 0));
    for (int t = 0; t < TY_COUNT && n >= 0; t++) {
        c->excl = excl; /* set again: the types before may have walked other schemas */
        if (types & (1u << t) && (ids[n_ids++] = comp_typed(c, sch, t, NULL)) < 0)
            n = -1;
    }
    if (n >= 0 && !sb_union_add(&c->b, n, ids, n_ids, false, c->path))
        return comp_nomem(c);
    return n;
}

int comp_schema(comp *c, const cJSON *sch)
{
    if (c->st != TS_OK)
        return -1;
    if (cJSON_IsBool(sch))
        return cJSON_IsTrue(sch) ? comp_any(c) : comp_node(c, SCH_NEVER, SCH_NEED_NEVER);
    if (!cJSON_IsObject(sch))
        return comp_fail(c, TS_ERR_INVALID_ARG, NULL, "a schema must be an object or a boolean");
    int n = memo_find(c, sch);
    if (n >= 0)
        return n;
    if (c->depth == WALK_MAX_DEPTH)
        return comp_fail(c, TS_ERR_TOO_LONG, NULL, "schemas nested over %d deep", WALK_MAX_DEPTH);
    c->depth++;
    n = walk(c, sch);
    c->depth--;
    return n;
}

/* ---- the public entry points */

ts_status ts_schema_compile(const char *json, size_t len, ts_schema **out, char *path,
                            size_t path_size, ts_error *err)
{
    *out = NULL;
    if (path && path_size)
        path[0] = '\0';
    if (len > TS_SCHEMA_MAX_BYTES)
        return ts_error_set(err, TS_ERR_TOO_LONG, "a schema over %d bytes", TS_SCHEMA_MAX_BYTES);
    comp c = {.any = -1};
    const char *end = NULL;
    c.doc = cJSON_ParseWithLengthOpts(json, len, &end, false);
    while (c.doc && end < json + len && strchr(" \t\r\n", *end))
        end++;
    if (!c.doc || end != json + len) {
        cJSON_Delete(c.doc);
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the schema is not valid JSON");
    }
    ts_schema *s = calloc(1, sizeof *s);
    c.b.s = s;
    c.consts = cJSON_CreateArray();
    c.owned = cJSON_CreateArray();
    if (!s || !c.consts || !c.owned || !cJSON_AddItemToArray(c.consts, cJSON_CreateNull()) ||
        !cJSON_AddItemToArray(c.consts, cJSON_CreateTrue()) ||
        !cJSON_AddItemToArray(c.consts, cJSON_CreateFalse()) ||
        cJSON_GetArraySize(c.consts) != 3)
        comp_nomem(&c);
    else
        atomic_init(&s->refs, 1);
    int root = comp_schema(&c, c.doc);
    if (root >= 0) {
        s->root = root;
        c.st = sb_finish(&c.b, c.msg, sizeof c.msg, c.where, sizeof c.where);
    }
    ts_status st = c.st;
    if (st != TS_OK) {
        ts_error_set(err, st, "%s", c.msg);
        if (path && path_size)
            snprintf(path, path_size, "%s", c.where);
        if (s) {
            atomic_init(&s->refs, 1);
            ts_schema_release(s);
        }
    } else {
        *out = s;
    }
    sb_free(&c.b);
    free(c.memo_key);
    free(c.memo_node);
    cJSON_Delete(c.consts);
    cJSON_Delete(c.owned);
    cJSON_Delete(c.doc);
    return st;
}

ts_schema *ts_schema_retain(ts_schema *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void ts_schema_release(ts_schema *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (int i = 0; i < s->n_dfas; i++)
        schema__dfa_free(&s->dfas[i]);
    free(s->dfas);
    free(s->nodes);
    free(s->props);
    free(s->targets);
    free(s->lits);
    free(s->text);
    free(s->hashes);
    free(s->shortest);
    free(s);
}
