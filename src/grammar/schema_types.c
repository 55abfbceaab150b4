/* schema_types.c: the node of a schema read as one JSON type: strings (lengths, pattern,
 * format), integers and numbers (bounds), arrays (items, counts) and objects (properties
 * in schema order, required, additionalProperties).
 * Mutual recursion with schema_compile.c, the schemas' own: items and properties are
 * schemas (comp_typed -> comp_schema), and each schema's type is made here
 * (schema_compile.c's walk -> comp_typed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_comp.h"

#define DATE "[1-9][0-9]{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|" \
             "(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
#define TIME "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?" \
             "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#define OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define HEX4 "[0-9a-f]{1,4}"
/* A DNS label of a letter and up to 15 more letters or digits (DNS allows 63 and inner
 * hyphens), and a name of at most 4 of them, well under the 253 bytes a host name may
 * have: small enough for the pattern's DFA. */
#define LABEL "[a-z][a-z0-9]{0,15}"
#define HOST LABEL "(?:\\." LABEL "){0,3}"

/* Each format as a pattern of values every validator accepts, a safe subset of each: dates
 * of years 1000-9999 and no February 29th, no leap seconds; lower-case host names, e-mail
 * addresses and IPv6 addresses; uri as an http or https URL with a host, an optional port,
 * path and query of unreserved characters (no percent escapes, no fragment). */
static const struct {
    const char *name, *pattern;
} formats[] = {
    {"date", DATE},
    {"time", TIME},
    {"date-time", DATE "T" TIME},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    {"ipv4", "(?:" OCTET "\\.){3}" OCTET},
    {"ipv6", "(?:" HEX4 ":){7}" HEX4 "|(?:" HEX4 ":){1,6}:" HEX4 "|::(?:" HEX4 ")?"},
    {"hostname", HOST},
    {"email", "[a-z0-9]{1,16}(?:[._+-][a-z0-9]{1,16})?@" LABEL "(?:\\." LABEL "){1,2}"},
    {"uri", "https?://" HOST "(?::[1-9][0-9]{0,3})?(?:/[A-Za-z0-9._~-]{1,16}){0,3}/?"
            "(?:\\?[A-Za-z0-9._~=&-]{1,16})?"},
};

const char *schema__format_pattern(const char *format)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(formats[i].name, format))
            return formats[i].pattern;
    return NULL;
}

/* A non-negative integer keyword of sch into *out (left alone when absent). */
static bool read_count(comp *c, const cJSON *sch, const char *name, uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sch, name);
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
        return comp_fail(c, TS_ERR_INVALID_ARG, name, "'%s' must be a non-negative integer", name), false;
    *out = v->valuedouble >= (double)UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)v->valuedouble;
    return true;
}

static bool read_number(comp *c, const cJSON *sch, const char *name, double *out, bool *given)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sch, name);
    *given = v != NULL;
    if (v && cJSON_IsBool(v))
        return comp_fail(c, TS_ERR_UNSUPPORTED, name, "a boolean '%s' (draft 4) is not supported: "
                    "give the bound itself as a number", name), false;
    if (v && !cJSON_IsNumber(v))
        return comp_fail(c, TS_ERR_INVALID_ARG, name, "'%s' must be a number", name), false;
    if (v)
        *out = v->valuedouble;
    return true;
}

/* The strings c->excl names, as hashes string node n refuses to end in. */
static bool exclude_strings(comp *c, int n)
{
    ts_schema *s = c->b.s;
    const cJSON *v;
    s->nodes[n].u.str.excl = (uint32_t)s->n_hashes;
    cJSON_ArrayForEach(v, c->excl) {
        if (!cJSON_IsString(v))
            continue;
        if (s->n_hashes == s->cap_hashes) {
            int cap = s->cap_hashes ? 2 * s->cap_hashes : 16;
            uint32_t *g = realloc(s->hashes, (size_t)cap * sizeof *g);
            if (!g)
                return comp_nomem(c), false;
            s->hashes = g;
            s->cap_hashes = cap;
        }
        s->hashes[s->n_hashes++] = schema__value_hash(v);
        s->nodes[n].u.str.n_excl++;
    }
    return true;
}

static int string_node(comp *c, const cJSON *sch)
{
    uint32_t min = 0, max = UINT32_MAX;
    if (!read_count(c, sch, "minLength", &min) || !read_count(c, sch, "maxLength", &max))
        return -1;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(sch, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(sch, "format");
    if (pat && !cJSON_IsString(pat))
        return comp_fail(c, TS_ERR_INVALID_ARG, "pattern", "'pattern' must be a string");
    if (fmt && !cJSON_IsString(fmt))
        return comp_fail(c, TS_ERR_INVALID_ARG, "format", "'format' must be a string");
    if (pat && fmt)
        return comp_fail(c, TS_ERR_UNSUPPORTED, "format", "'format' beside 'pattern' is not supported");
    const char *regex = pat ? pat->valuestring : NULL;
    if (fmt && !(regex = schema__format_pattern(fmt->valuestring)))
        return comp_fail(c, TS_ERR_UNSUPPORTED, "format", "format '%.40s' is not supported "
                    "(supported: date, time, date-time, uuid, ipv4, ipv6, hostname, email, uri)", fmt->valuestring);
    int n = comp_node(c, SCH_STRING, min <= max ? 0 : SCH_NEED_NEVER);
    if (n < 0 || !exclude_strings(c, n))
        return -1;
    ts_schema *s = c->b.s;
    s->nodes[n].u.str.min = min;
    s->nodes[n].u.str.max = max;
    s->nodes[n].u.str.dfa = -1;
    if (!regex || min > max)
        return n;
    if (s->n_dfas == s->cap_dfas) {
        int cap = s->cap_dfas ? 2 * s->cap_dfas : 4;
        sch_dfa *g = realloc(s->dfas, (size_t)cap * sizeof *g);
        if (!g)
            return comp_nomem(c);
        s->dfas = g;
        s->cap_dfas = cap;
    }
    char msg[200];
    ts_status st = schema__regex_compile(regex, strlen(regex), min, max, &s->dfas[s->n_dfas],
                                         msg, sizeof msg);
    if (st != TS_OK)
        return comp_fail(c, st, pat ? "pattern" : "format", "%s", msg);
    s->nodes[n].u.str.dfa = s->n_dfas++;
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int excluded_numbers(const cJSON *excl)
{
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, excl)
        k += cJSON_IsNumber(e);
    return k;
}

/* A number node between bounds v (minimum, maximum, exclusiveMinimum, exclusiveMaximum;
 * given says which) that skips the numbers of c->excl: the union of the open gaps
 * between them, each gap a number node. */
static int number_gaps(comp *c, const double *v, const bool *given, bool integer)
{
    int k = excluded_numbers(c->excl), n_ids = 0;
    double *cut = malloc((size_t)k * sizeof *cut);
    int *ids = malloc((size_t)(k + 1) * sizeof *ids);
    int u = cut && ids ? comp_node(c, SCH_UNION, 0) : comp_nomem(c);
    const cJSON *e;
    k = 0;
    cJSON_ArrayForEach(e, c->excl)
        if (cJSON_IsNumber(e))
            cut[k++] = e->valuedouble;
    if (u >= 0)
        qsort(cut, (size_t)k, sizeof *cut, cmp_double);
    for (int i = 0; i <= k && u >= 0; i++) {
        double xmin = i > 0 ? cut[i - 1] : 0, xmax = i < k ? cut[i] : 0;
        bool has_xmin = i > 0 || given[2], has_xmax = i < k || given[3];
        if (i == 0 && given[2])
            xmin = v[2];
        if (i > 0 && given[2] && v[2] > xmin)
            xmin = v[2];
        if (i == k && given[3])
            xmax = v[3];
        if (i < k && given[3] && v[3] < xmax)
            xmax = v[3];
        int n = comp_node(c, SCH_NUMBER, 0);
        if (n < 0) {
            u = -1;
            break;
        }
        if (schema__number_bounds(&c->b.s->nodes[n], integer, given[0] ? &v[0] : NULL,
                                  given[1] ? &v[1] : NULL, has_xmin ? &xmin : NULL,
                                  has_xmax ? &xmax : NULL, &c->b.num_lo[n], &c->b.num_hi[n]))
            ids[n_ids++] = n;
    }
    if (u >= 0 && n_ids == 0)
        ids[n_ids++] = comp_node(c, SCH_NEVER, SCH_NEED_NEVER);
    if (u >= 0 && (ids[0] < 0 || !sb_union_add(&c->b, u, ids, n_ids, false, c->path)))
        u = comp_nomem(c);
    free(cut);
    free(ids);
    return u;
}

static int number_node(comp *c, const cJSON *sch, bool integer)
{
    double v[4];
    bool given[4];
    static const char *const names[] = {"minimum", "maximum", "exclusiveMinimum",
                                        "exclusiveMaximum"};
    for (int i = 0; i < 4; i++)
        if (!read_number(c, sch, names[i], &v[i], &given[i]))
            return -1;
    if (excluded_numbers(c->excl))
        return number_gaps(c, v, given, integer);
    int n = comp_node(c, SCH_NUMBER, 0);
    if (n < 0)
        return -1;
    sch_node *node = &c->b.s->nodes[n];
    if (!schema__number_bounds(node, integer, given[0] ? &v[0] : NULL, given[1] ? &v[1] : NULL,
                               given[2] ? &v[2] : NULL, given[3] ? &v[3] : NULL,
                               &c->b.num_lo[n], &c->b.num_hi[n]))
        node->need = SCH_NEED_NEVER;
    return n;
}

/* Compiles the schemas of prefix (an array, or NULL) and records them as the prefix of
 * array node n, in one run of ts_schema.targets. */
static bool prefix_nodes(comp *c, int n, const cJSON *prefix, const char *word)
{
    int count = prefix ? cJSON_GetArraySize(prefix) : 0, k = 0;
    if (count > SCH_MAX_PROPS)
        return comp_fail(c, TS_ERR_TOO_LONG, word, "'%s' of over %d schemas", word,
                         SCH_MAX_PROPS), false;
    int ids[SCH_MAX_PROPS + 1];
    const cJSON *p;
    cJSON_ArrayForEach(p, prefix) {
        size_t at = comp_push(c, ".%s[%d]", word, k);
        ids[k] = comp_schema(c, p);
        comp_pop(c, at);
        if (ids[k++] < 0)
            return false;
    }
    ts_schema *s = c->b.s;
    if (s->n_targets + count > s->cap_targets) {
        int cap = s->cap_targets ? s->cap_targets : 64;
        while (cap < s->n_targets + count)
            cap *= 2;
        uint16_t *g = realloc(s->targets, (size_t)cap * sizeof *g);
        if (!g)
            return comp_nomem(c), false;
        s->targets = g;
        s->cap_targets = cap;
    }
    s->nodes[n].u.arr.prefix = (uint32_t)s->n_targets;
    s->nodes[n].u.arr.n_prefix = (uint16_t)count;
    for (int i = 0; i < count; i++)
        s->targets[s->n_targets++] = (uint16_t)ids[i];
    return true;
}

/* The node a chain of one-alternative unions ($ref, allOf) stands for. */
static int resolved(const comp *c, int node)
{
    for (int hops = 0; hops < 64 && c->b.s->nodes[node].kind == SCH_UNION; hops++) {
        int next = -1;
        for (int i = 0; i < c->b.n_unions; i++)
            if (c->b.unions[i].node == node && c->b.unions[i].n == 1)
                next = c->b.unions[i].alts[0];
        if (next < 0)
            break;
        node = next;
    }
    return node;
}

/* Whether every value of node is a string, number or literal (values compared by hash),
 * following its alternatives (depth-bounded; a union still being compiled: false). */
static bool scalar_only(const comp *c, int node, int depth)
{
    const sch_node *n = &c->b.s->nodes[node];
    if (n->kind == SCH_STRING || n->kind == SCH_NUMBER || n->kind == SCH_NEVER)
        return true;
    if (n->kind == SCH_LITERAL) {
        for (int i = 0; i < c->b.n_values[node]; i++)
            if (cJSON_IsObject(c->b.values[node][i]) || cJSON_IsArray(c->b.values[node][i]))
                return false;
        return true;
    }
    if (n->kind != SCH_UNION || depth > 8)
        return false;
    for (int i = 0; i < c->b.n_unions; i++)
        if (c->b.unions[i].node == node) {
            for (int k = 0; k < c->b.unions[i].n; k++)
                if (!scalar_only(c, c->b.unions[i].alts[k], depth + 1))
                    return false;
            return true;
        }
    return false;
}

/* How many distinct values items node can take, UINT32_MAX when many: a literal's values
 * or an integer range, so a uniqueItems array never wants more items than there are. */
static uint32_t distinct_values(const comp *c, int node)
{
    node = resolved(c, node);
    const sch_node *n = &c->b.s->nodes[node];
    if (n->kind == SCH_NUMBER && n->u.num.frac == 0 && n->u.num.hi - n->u.num.lo < UINT16_MAX)
        return (uint32_t)(n->u.num.hi - n->u.num.lo + 1);
    if (n->kind != SCH_LITERAL)
        return UINT32_MAX;
    uint32_t k = 0;
    for (int i = 0; i < c->b.n_values[node]; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = cJSON_Compare(c->b.values[node][i], c->b.values[node][j], true);
        k += !seen;
    }
    return k;
}

/* uniqueItems of array node n into its flag, and its item counts bounded by what can be
 * told apart: at most SCH_MAX_UNIQUE items, of strings, numbers and literals only. */
static bool unique_items(comp *c, const cJSON *sch, int n, uint32_t *min, uint32_t *max)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(sch, "uniqueItems");
    if (u && !cJSON_IsBool(u))
        return comp_fail(c, TS_ERR_INVALID_ARG, "uniqueItems", "'uniqueItems' must be a "
                         "boolean"), false;
    if (!cJSON_IsTrue(u))
        return true;
    sch_node *a = &c->b.s->nodes[n];
    bool scalars = scalar_only(c, a->u.arr.items, 0);
    for (int i = 0; i < a->u.arr.n_prefix; i++)
        scalars &= scalar_only(c, c->b.s->targets[a->u.arr.prefix + (uint32_t)i], 0);
    if (!scalars)
        return comp_fail(c, TS_ERR_UNSUPPORTED, "uniqueItems", "'uniqueItems' is supported "
                         "for items that are strings, numbers, booleans, null or enums"), false;
    if (*min > SCH_MAX_UNIQUE)
        return comp_fail(c, TS_ERR_TOO_LONG, "uniqueItems", "'uniqueItems' with 'minItems' "
                         "over %d", SCH_MAX_UNIQUE), false;
    uint32_t most = a->u.arr.n_prefix ? UINT32_MAX : distinct_values(c, a->u.arr.items);
    most = most < SCH_MAX_UNIQUE ? most : SCH_MAX_UNIQUE;
    *max = *max < most ? *max : most;
    a->u.arr.unique = 1;
    return true;
}

static int array_node(comp *c, const cJSON *sch, const cJSON *memo_for)
{
    uint32_t min = 0, max = UINT32_MAX;
    if (!read_count(c, sch, "minItems", &min) || !read_count(c, sch, "maxItems", &max))
        return -1;
    if (min > UINT16_MAX)
        return comp_fail(c, TS_ERR_TOO_LONG, "minItems", "'minItems' over %d", UINT16_MAX);
    if (max != UINT32_MAX && max > UINT16_MAX)
        max = UINT16_MAX; /* items are counted in 16 bits: never more than that many */
    int n = comp_memo_add(c, memo_for, comp_node(c, SCH_ARRAY, 0));
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(sch, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(sch, "prefixItems");
    if (n < 0)
        return -1;
    const char *prefix_word = prefix ? "prefixItems" : "items";
    if (cJSON_IsArray(items)) { /* draft 4-7 tuples: items as an array, the rest any */
        if (prefix)
            return comp_fail(c, TS_ERR_INVALID_ARG, "items", "'items' as an array beside "
                             "'prefixItems'");
        prefix = items;
        items = NULL;
    }
    if (prefix && !cJSON_IsArray(prefix))
        return comp_fail(c, TS_ERR_INVALID_ARG, "prefixItems", "'prefixItems' must be an array");
    if (!prefix_nodes(c, n, prefix, prefix_word))
        return -1;
    size_t at = comp_push(c, ".items");
    int it = items ? comp_schema(c, items) : comp_any(c);
    comp_pop(c, at);
    if (it < 0)
        return -1;
    sch_node *node = &c->b.s->nodes[n];
    node->u.arr.items = (uint16_t)it;
    if (!unique_items(c, sch, n, &min, &max))
        return -1;
    node = &c->b.s->nodes[n];
    node->u.arr.min = min;
    node->u.arr.max = max;
    if (min > max)
        node->kind = SCH_NEVER, node->need = SCH_NEED_NEVER;
    return n;
}

/* additionalProperties: true, absent or {} let required names outside properties appear
 * (with any value), and keys beyond properties only as minProperties needs them; false
 * forbids them; a schema lets keys beyond properties come last, their values under it. */
static bool extra_allowed(const cJSON *add, bool *open)
{
    *open = !add || cJSON_IsTrue(add) || (cJSON_IsObject(add) && !add->child);
    return !cJSON_IsFalse(add);
}

/* The node of the values of extra keys (SCH_NO_NODE when none are written), and of the
 * keys themselves, into obj. */
static bool extra_nodes(comp *c, int n, const cJSON *add, bool open, bool wanted)
{
    sch_node *o = &c->b.s->nodes[n];
    o->u.obj.extra = o->u.obj.key = SCH_NO_NODE;
    if (!wanted)
        return true;
    size_t at = comp_push(c, ".additionalProperties");
    int v = open ? comp_any(c) : comp_schema(c, add);
    comp_pop(c, at);
    int k = v < 0 ? -1 : comp_node(c, SCH_STRING, 0);
    if (k < 0)
        return false;
    ts_schema *s = c->b.s;
    s->nodes[k].u.str.min = 1;
    s->nodes[k].u.str.max = SCH_MAX_KEY / 4; /* a key of a few words, not an essay */
    s->nodes[k].u.str.dfa = -1;
    s->nodes[n].u.obj.extra = (uint16_t)v;
    s->nodes[n].u.obj.key = (uint16_t)k;
    return true;
}

static bool is_required(const cJSON *req, const char *name)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
        if (!strcmp(r->valuestring, name))
            return true;
    return false;
}

/* Appends the properties (names, nodes) of object node n, in order, to the props pool. */
static int add_props(comp *c, int n, const char **names, const int *nodes, const bool *req,
                     int count)
{
    ts_schema *s = c->b.s;
    s->nodes[n].u.obj.first = (uint32_t)s->n_props;
    s->nodes[n].u.obj.n = (uint16_t)count;
    for (int i = 0; i < count; i++) {
        cJSON *str = cJSON_CreateString(names[i]);
        char *key = str ? cJSON_PrintUnformatted(str) : NULL;
        cJSON_Delete(str);
        if (!key)
            return comp_nomem(c);
        size_t len = strlen(key);
        uint32_t hash = schema__hash_bytes(SCH_HASH_STRING, names[i], strlen(names[i]));
        bool ok = len <= SCH_MAX_KEY && sb_prop(&c->b, key, len, req[i], nodes[i], hash);
        free(key);
        if (!ok)
            return len > SCH_MAX_KEY ? comp_fail(c, TS_ERR_TOO_LONG, "properties",
                                                 "a property name over %d bytes", SCH_MAX_KEY)
                                     : comp_nomem(c);
    }
    return n;
}

/* minProperties and maxProperties of object node n, which declares count properties. */
static int count_bounds(comp *c, int n, uint32_t min, uint32_t max, int count, bool free_keys)
{
    sch_node *o = &c->b.s->nodes[n];
    int required = 0;
    for (int i = 0; i < count; i++)
        required += c->b.s->props[o->u.obj.first + (uint32_t)i].required;
    uint32_t most = (uint32_t)count + (free_keys ? SCH_MAX_FREE : 0);
    if (min > most && free_keys)
        return comp_fail(c, TS_ERR_TOO_LONG, "minProperties", "'minProperties' over the "
                         "declared properties and %d more", SCH_MAX_FREE);
    o->u.obj.min = (uint16_t)(min < most ? min : most);
    o->u.obj.max = (uint16_t)(max < most ? max : most);
    if (min > most || (uint32_t)required > max || min > max)
        o->kind = SCH_NEVER, o->need = SCH_NEED_NEVER;
    return n;
}

static int object_node(comp *c, const cJSON *sch, const cJSON *memo_for)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(sch, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(sch, "required"), *r;
    if (props && !cJSON_IsObject(props))
        return comp_fail(c, TS_ERR_INVALID_ARG, "properties", "'properties' must be an object");
    if (req && !cJSON_IsArray(req))
        return comp_fail(c, TS_ERR_INVALID_ARG, "required", "'required' must be an array");
    cJSON_ArrayForEach(r, req)
        if (!cJSON_IsString(r))
            return comp_fail(c, TS_ERR_INVALID_ARG, "required", "'required' must hold strings");
    bool open;
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(sch, "additionalProperties");
    bool extra = extra_allowed(add, &open);
    int n_props = props ? cJSON_GetArraySize(props) : 0, n_req = req ? cJSON_GetArraySize(req) : 0;
    uint32_t min = 0, max = UINT32_MAX;
    if (!read_count(c, sch, "minProperties", &min) || !read_count(c, sch, "maxProperties", &max))
        return -1;
    bool counted = cJSON_GetObjectItemCaseSensitive(sch, "minProperties") ||
                   cJSON_GetObjectItemCaseSensitive(sch, "maxProperties");
    if (n_props == 0 && n_req == 0 && open && !counted)
        return comp_memo_add(c, memo_for, comp_node(c, SCH_ANY_OBJECT, 0));
    if (n_props + n_req > SCH_MAX_PROPS * 4 || n_props > SCH_MAX_PROPS)
        return comp_fail(c, TS_ERR_TOO_LONG, "properties", "over %d properties", SCH_MAX_PROPS);
    int n = comp_memo_add(c, memo_for, comp_node(c, SCH_OBJECT, 0));
    const char **names = malloc((size_t)(n_props + n_req + 1) * sizeof *names);
    int *nodes = malloc((size_t)(n_props + n_req + 1) * sizeof *nodes);
    bool *reqd = malloc((size_t)(n_props + n_req + 1));
    int count = 0;
    if (n >= 0 && (!names || !nodes || !reqd))
        n = comp_nomem(c);
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        if (n < 0)
            break;
        for (int i = 0; i < count; i++)
            if (!strcmp(names[i], p->string))
                n = comp_fail(c, TS_ERR_INVALID_ARG, "properties", "property '%.60s' is given "
                              "twice", p->string);
        size_t at = comp_push(c, ".properties.%s", p->string);
        names[count] = p->string;
        reqd[count] = is_required(req, p->string);
        nodes[count++] = n < 0 ? -1 : comp_schema(c, p);
        comp_pop(c, at);
        if (nodes[count - 1] < 0)
            n = -1;
    }
    cJSON_ArrayForEach(r, req) { /* required names outside properties: any value */
        bool seen = false;
        for (int i = 0; i < count && !seen; i++)
            seen = !strcmp(names[i], r->valuestring);
        if (n < 0 || seen)
            continue;
        if (!extra) {
            n = comp_fail(c, TS_ERR_INVALID_ARG, "required", "'%.60s' is required but not in "
                          "'properties', and additionalProperties is false", r->valuestring);
            break;
        }
        if (count == SCH_MAX_PROPS) {
            n = comp_fail(c, TS_ERR_TOO_LONG, "required", "over %d properties", SCH_MAX_PROPS);
            break;
        }
        names[count] = r->valuestring;
        reqd[count] = true;
        size_t at = comp_push(c, ".additionalProperties");
        nodes[count++] = open ? comp_any(c) : comp_schema(c, add);
        comp_pop(c, at);
        if (nodes[count - 1] < 0)
            n = -1;
    }
    /* keys beyond properties: under a schema, or as many as minProperties needs */
    bool free_keys = extra && (!open || min > (uint32_t)count || (counted && count == 0));
    if (n >= 0 && !extra_nodes(c, n, add, open, free_keys))
        n = -1;
    if (n >= 0)
        n = add_props(c, n, names, nodes, reqd, count);
    if (n >= 0)
        n = count_bounds(c, n, min, max, count, free_keys);
    free(names);
    free(nodes);
    free(reqd);
    return n;
}

static bool excluded(const cJSON *excl, const cJSON *v)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, excl)
        if (cJSON_Compare(e, v, true))
            return true;
    return false;
}

int comp_typed(comp *c, const cJSON *sch, int type, const cJSON *memo_for)
{
    const cJSON *v[2];
    int k = 0;
    switch (type) {
    case TY_NULL:
    case TY_BOOL:
        for (int i = type == TY_NULL ? 0 : 1; i < (type == TY_NULL ? 1 : 3); i++)
            if (!excluded(c->excl, cJSON_GetArrayItem(c->consts, i)))
                v[k++] = cJSON_GetArrayItem(c->consts, i);
        return comp_memo_add(c, memo_for, comp_literal(c, v, k));
    case TY_STRING: return comp_memo_add(c, memo_for, string_node(c, sch));
    case TY_NUMBER:
    case TY_INTEGER: return comp_memo_add(c, memo_for, number_node(c, sch, type == TY_INTEGER));
    case TY_ARRAY: return array_node(c, sch, memo_for);
    default: return object_node(c, sch, memo_for);
    }
}
