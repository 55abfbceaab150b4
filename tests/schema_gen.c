/* schema_gen.c: the JSON-schema tests' random schemas and random walks through a compiled
 * schema's automaton (schema_check.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"
#include "schema_check.h"

static int pick(uint64_t *rng, int n) { return (int)(sc_rand(rng) % (uint64_t)n); }

/* Names with shared prefixes, spaces, quotes and non-ASCII letters. */
static const char *const names[] = {"a", "ab", "abc", "name", "nickname", "x y", "quo\"te",
                                    "ünï", "id", "n", "tags", "value"};

static cJSON *any_value(uint64_t *rng)
{
    switch (pick(rng, 10)) {
    case 0: return cJSON_CreateString("red");
    case 1: return cJSON_CreateString("green");
    case 2: return cJSON_CreateNumber(1);
    case 3: return cJSON_CreateNumber(12);
    case 4: return cJSON_CreateNumber(2.5);
    case 5: return cJSON_CreateBool(pick(rng, 2));
    case 6: return cJSON_CreateNull();
    case 7: return cJSON_Parse("{\"k\": [1, \"é\"]}");
    case 8: return cJSON_CreateString("quo\"te \\ é");
    default: return cJSON_Parse("[1, 2]");
    }
}

typedef struct gen {
    uint64_t *rng;
    cJSON *defs;
    int n_defs;
} gen;

static cJSON *schema(gen *g, int depth);

static cJSON *string_schema(gen *g)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "string");
    int k = pick(g->rng, 10);
    if (k < 3) {
        cJSON_AddStringToObject(s, "pattern", sc_patterns[pick(g->rng, sc_n_patterns)][0]);
    } else if (k < 5) {
        cJSON_AddStringToObject(s, "format", sc_formats[pick(g->rng, SC_N_FORMATS)]);
    } else if (k < 8) {
        int min = pick(g->rng, 4);
        if (pick(g->rng, 2))
            cJSON_AddNumberToObject(s, "minLength", min);
        if (pick(g->rng, 2))
            cJSON_AddNumberToObject(s, "maxLength", min + pick(g->rng, 8));
    }
    return s;
}

static cJSON *number_schema(gen *g, bool integer)
{
    static const double lows[] = {-5, 0, 3, -1000000, 0.1, -1.5, 7.25};
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", integer ? "integer" : "number");
    double lo = lows[pick(g->rng, 7)], hi = lo + pick(g->rng, 3) * 3.3 + (integer ? 2 : 0.3);
    int k = pick(g->rng, 6);
    if (k == 0 || k == 1)
        cJSON_AddNumberToObject(s, k ? "exclusiveMinimum" : "minimum", lo);
    if (k == 1 || k == 2)
        cJSON_AddNumberToObject(s, pick(g->rng, 2) ? "exclusiveMaximum" : "maximum", hi);
    if (k == 3) {
        cJSON_AddNumberToObject(s, "minimum", lo);
        cJSON_AddNumberToObject(s, "maximum", lo);
        cJSON_AddNumberToObject(s, "exclusiveMinimum", lo - 1);
    }
    return s;
}

static cJSON *object_schema(gen *g, int depth)
{
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    cJSON_AddStringToObject(s, "type", "object");
    int n = 1 + pick(g->rng, 4);
    for (int i = 0; i < n; i++) {
        const char *name = names[pick(g->rng, (int)(sizeof names / sizeof names[0]))];
        if (cJSON_GetObjectItemCaseSensitive(props, name))
            continue;
        cJSON_AddItemToObject(props, name, schema(g, depth - 1));
        if (pick(g->rng, 2))
            cJSON_AddItemToArray(req, cJSON_CreateString(name));
    }
    cJSON_AddItemToObject(s, "properties", props);
    cJSON_AddItemToObject(s, "required", req);
    int a = pick(g->rng, 3);
    if (a < 2)
        cJSON_AddBoolToObject(s, "additionalProperties", a);
    return s;
}

static cJSON *array_schema(gen *g, int depth)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "array");
    cJSON_AddItemToObject(s, "items", schema(g, depth - 1));
    int min = pick(g->rng, 3);
    if (pick(g->rng, 2))
        cJSON_AddNumberToObject(s, "minItems", min);
    if (pick(g->rng, 2))
        cJSON_AddNumberToObject(s, "maxItems", min + pick(g->rng, 4));
    return s;
}

/* oneOf whose alternatives cannot overlap: distinct types, or objects told apart by a
 * required const "kind". */
static cJSON *one_of(gen *g, int depth)
{
    cJSON *s = cJSON_CreateObject(), *alts = cJSON_CreateArray();
    if (pick(g->rng, 2)) {
        cJSON_AddItemToArray(alts, string_schema(g));
        cJSON_AddItemToArray(alts, number_schema(g, true));
        cJSON_AddItemToArray(alts, cJSON_Parse("{\"type\": \"null\"}"));
    } else {
        for (int i = 0; i < 2; i++) {
            cJSON *o = object_schema(g, depth);
            cJSON *props = cJSON_GetObjectItem(o, "properties");
            cJSON_DeleteItemFromObject(props, "kind");
            cJSON *kind = cJSON_CreateObject();
            cJSON_AddStringToObject(kind, "const", i ? "circle" : "square");
            cJSON_AddItemToObject(props, "kind", kind);
            cJSON_AddItemToArray(cJSON_GetObjectItem(o, "required"), cJSON_CreateString("kind"));
            cJSON_AddItemToArray(alts, o);
        }
    }
    cJSON_AddItemToObject(s, "oneOf", alts);
    return s;
}

static cJSON *ref_to(gen *g, cJSON *target)
{
    char name[32], ref[64];
    snprintf(name, sizeof name, "d%d", g->n_defs++);
    cJSON_AddItemToObject(g->defs, name, target);
    snprintf(ref, sizeof ref, "#/$defs/%s", name);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "$ref", ref);
    return s;
}

static cJSON *schema(gen *g, int depth)
{
    int k = pick(g->rng, depth > 0 ? 16 : 8);
    cJSON *s = NULL, *alts;
    switch (k) {
    case 0: case 1: s = string_schema(g); break;
    case 2: s = number_schema(g, true); break;
    case 3: s = number_schema(g, false); break;
    case 4: s = cJSON_Parse(pick(g->rng, 2) ? "{\"type\": \"boolean\"}" : "{\"type\": \"null\"}"); break;
    case 5:
        s = cJSON_CreateObject();
        alts = cJSON_CreateArray();
        for (int i = 1 + pick(g->rng, 4); i > 0; i--)
            cJSON_AddItemToArray(alts, any_value(g->rng));
        cJSON_AddItemToObject(s, "enum", alts);
        break;
    case 6: s = cJSON_CreateObject(); cJSON_AddItemToObject(s, "const", any_value(g->rng)); break;
    case 7: s = cJSON_Parse(pick(g->rng, 2) ? "{\"type\": [\"string\", \"null\"], \"maxLength\": 6}"
                                             : "{\"type\": [\"integer\", \"boolean\"], \"minimum\": -3}"); break;
    case 8: case 9: case 10: s = object_schema(g, depth); break;
    case 11: case 12: s = array_schema(g, depth); break;
    case 13:
        s = cJSON_CreateObject();
        alts = cJSON_CreateArray();
        for (int i = 2 + pick(g->rng, 2); i > 0; i--)
            cJSON_AddItemToArray(alts, schema(g, depth - 1));
        cJSON_AddItemToObject(s, "anyOf", alts);
        break;
    case 14: s = one_of(g, depth - 1); break;
    default: s = ref_to(g, schema(g, depth - 1)); break;
    }
    if (pick(g->rng, 8) == 0)
        cJSON_AddStringToObject(s, "description", "ignored");
    return s;
}

cJSON *sc_random_schema(uint64_t *rng, int depth)
{
    gen g = {rng, cJSON_CreateObject(), 0};
    cJSON *root = schema(&g, depth);
    if (pick(rng, 4) == 0) { /* a recursive tree beside */
        cJSON_AddItemToObject(g.defs, "node", cJSON_Parse(
            "{\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, \"kids\": "
            "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}, \"maxItems\": 2}}, "
            "\"required\": [\"v\"], \"additionalProperties\": false}"));
        cJSON *wrap = cJSON_CreateObject(), *props = cJSON_CreateObject();
        cJSON_AddStringToObject(wrap, "type", "object");
        cJSON_AddItemToObject(props, "tree", cJSON_Parse("{\"$ref\": \"#/$defs/node\"}"));
        cJSON_AddItemToObject(props, "other", root);
        cJSON_AddItemToObject(wrap, "properties", props);
        cJSON_AddItemToObject(wrap, "required", cJSON_Parse("[\"tree\"]"));
        root = wrap;
    }
    if (g.defs->child)
        cJSON_AddItemToObject(root, "$defs", g.defs);
    else
        cJSON_Delete(g.defs);
    return root;
}

/* ---- schemas as Pydantic and zod write them */

static cJSON *titled(cJSON *s, const char *title)
{
    cJSON_AddStringToObject(s, "title", title);
    return s;
}

/* A scalar field: an int, float, bool, str (with a format or a length), or an enum. */
static cJSON *py_scalar(gen *g)
{
    static const char *const simple[] = {
        "{\"type\": \"integer\"}", "{\"type\": \"number\", \"minimum\": 0}",
        "{\"type\": \"boolean\"}", "{\"type\": \"string\", \"maxLength\": 12}",
        "{\"enum\": [\"red\", \"green\", \"blue\"], \"type\": \"string\"}",
        "{\"type\": \"integer\", \"minimum\": -3, \"maximum\": 40}",
        "{\"type\": \"string\", \"not\": {\"const\": \"\"}, \"maxLength\": 8}",
        "{\"type\": \"integer\", \"not\": {\"enum\": [0, 1]}, \"minimum\": 0, \"maximum\": 9}",
    };
    if (pick(g->rng, 3) == 0) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "string");
        cJSON_AddStringToObject(s, "format", sc_formats[pick(g->rng, SC_N_FORMATS)]);
        return s;
    }
    return cJSON_Parse(simple[pick(g->rng, (int)(sizeof simple / sizeof simple[0]))]);
}

static cJSON *py_field(gen *g, int depth);

/* A model: an object of named fields, some required, extra keys forbidden or not. */
static cJSON *py_model(gen *g, int depth)
{
    static const char *const fields[] = {"id", "name", "tags", "scores", "pair", "email",
                                         "when", "meta", "kind", "size"};
    cJSON *s = titled(cJSON_CreateObject(), "Model"), *props = cJSON_CreateObject();
    cJSON *req = cJSON_CreateArray();
    cJSON_AddStringToObject(s, "type", "object");
    for (int i = 0, n = 1 + pick(g->rng, 3); i < n; i++) {
        const char *name = fields[pick(g->rng, (int)(sizeof fields / sizeof fields[0]))];
        if (cJSON_GetObjectItemCaseSensitive(props, name))
            continue;
        cJSON_AddItemToObject(props, name, titled(py_field(g, depth - 1), name));
        if (pick(g->rng, 3))
            cJSON_AddItemToArray(req, cJSON_CreateString(name));
    }
    cJSON_AddItemToObject(s, "properties", props);
    cJSON_AddItemToObject(s, "required", req);
    if (pick(g->rng, 2))
        cJSON_AddBoolToObject(s, "additionalProperties", false);
    return s;
}

/* model with each property's name prefixed "b_" (and its required names alike). */
static cJSON *renamed(cJSON *model)
{
    cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(model, "properties")) {
        char *name = malloc(strlen(p->string) + 3);
        sprintf(name, "b_%s", p->string);
        free(p->string);
        p->string = name;
    }
    cJSON *req = cJSON_GetObjectItem(model, "required"), *fresh = cJSON_CreateArray();
    cJSON_ArrayForEach(p, req) {
        char name[64];
        snprintf(name, sizeof name, "b_%s", p->valuestring);
        cJSON_AddItemToArray(fresh, cJSON_CreateString(name));
    }
    cJSON_ReplaceItemInObject(model, "required", fresh);
    return model;
}

/* A field: a scalar, Dict[str, X], Set[X], Tuple[X, Y], Optional[X], a nested model
 * (by $ref, or allOf of one $ref as Pydantic v1 wrote it), or zod's intersection of two
 * objects (allOf of several). */
static cJSON *py_field(gen *g, int depth)
{
    cJSON *s, *list;
    switch (depth > 0 ? pick(g->rng, 9) : 0) {
    case 0: case 1: return py_scalar(g);
    case 2: /* Dict[str, X] */
        s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "object");
        cJSON_AddItemToObject(s, "additionalProperties", py_field(g, depth - 1));
        if (pick(g->rng, 2))
            cJSON_AddNumberToObject(s, "minProperties", pick(g->rng, 3));
        if (pick(g->rng, 2))
            cJSON_AddNumberToObject(s, "maxProperties", 2 + pick(g->rng, 3));
        return s;
    case 3: /* Set[X] */
        s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "array");
        cJSON_AddItemToObject(s, "items", py_scalar(g));
        cJSON_AddBoolToObject(s, "uniqueItems", true);
        if (pick(g->rng, 2))
            cJSON_AddNumberToObject(s, "maxItems", 1 + pick(g->rng, 5));
        else if (pick(g->rng, 2))
            cJSON_AddNumberToObject(s, "minItems", 1 + pick(g->rng, 6));
        return s;
    case 4: /* Tuple[X, Y] */
        s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "array");
        list = cJSON_AddArrayToObject(s, "prefixItems");
        cJSON_AddItemToArray(list, py_scalar(g));
        cJSON_AddItemToArray(list, py_field(g, depth - 1));
        cJSON_AddNumberToObject(s, "minItems", 2);
        cJSON_AddNumberToObject(s, "maxItems", 2);
        return s;
    case 5: /* Optional[X] */
        s = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(s, "anyOf");
        cJSON_AddItemToArray(list, py_field(g, depth - 1));
        cJSON_AddItemToArray(list, cJSON_Parse("{\"type\": \"null\"}"));
        return s;
    case 6: return ref_to(g, py_model(g, depth - 1));
    case 7: /* Pydantic v1: a $ref wrapped in allOf beside a description */
        s = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(s, "allOf");
        cJSON_AddItemToArray(list, ref_to(g, py_model(g, depth - 1)));
        cJSON_AddStringToObject(s, "description", "a nested model");
        return s;
    default: /* zod: a.and(b), their fields apart so that both can hold */
        s = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(s, "allOf");
        cJSON *a = py_model(g, depth - 1), *b = renamed(py_model(g, depth - 1));
        cJSON_DeleteItemFromObject(a, "additionalProperties"); /* zod's default: strip */
        cJSON_DeleteItemFromObject(b, "additionalProperties");
        cJSON_AddItemToArray(list, a);
        cJSON_AddItemToArray(list, pick(g->rng, 2) ? b : ref_to(g, b));
        return s;
    }
}

cJSON *sc_pydantic_schema(uint64_t *rng, int depth)
{
    gen g = {rng, cJSON_CreateObject(), 0};
    cJSON *root = py_model(&g, depth);
    if (g.defs->child)
        cJSON_AddItemToObject(root, "$defs", g.defs);
    else
        cJSON_Delete(g.defs);
    return root;
}

char *sc_random_walk(const ts_schema *s, uint64_t *rng, size_t max_bytes, char *why,
                     size_t why_size)
{
    sch_state *st = malloc(sizeof *st), *next = malloc(sizeof *next);
    char *text = malloc(max_bytes + 1);
    size_t n = 0;
    bool ok = st && next && text;
    if (ok)
        sch_init(st, s);
    while (ok) {
        if (sch_done(s, st) || (sch_can_end(s, st) && pick(rng, 4) == 0))
            break;
        uint8_t allowed[256];
        int n_allowed = 0;
        bool closer = false, quote = false;
        for (int c = 0; c < 256; c++)
            if (sch_step(s, st, (uint8_t)c, next)) {
                allowed[n_allowed++] = (uint8_t)c;
                closer |= c == '}' || c == ']';
                quote |= c == '"';
            }
        if (n_allowed == 0) {
            ok = sch_can_end(s, st);
            if (!ok)
                snprintf(why, why_size, "dead end after %zu bytes: %.*s", n, (int)(n < 200 ? n : 200), text);
            break;
        }
        if (n == max_bytes) {
            snprintf(why, why_size, "no end within %zu bytes: %.200s", n, text);
            ok = false;
            break;
        }
        uint8_t c = allowed[pick(rng, n_allowed)];
        if (closer && pick(rng, 10) < 4)
            c = memchr(allowed, '}', (size_t)n_allowed) ? '}' : ']';
        else if (quote && pick(rng, 10) == 0)
            c = '"';
        sch_step(s, st, c, next);
        sch_state *t = st;
        st = next;
        next = t;
        text[n++] = (char)c;
        text[n] = '\0';
    }
    if (ok)
        text[n] = '\0';
    free(st);
    free(next);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}
