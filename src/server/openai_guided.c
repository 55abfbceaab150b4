/* openai_guided.c: the constraint fields other servers' clients send, beside OpenAI's
 * response_format: llama.cpp's `grammar` (GBNF) and top-level `json_schema`, vLLM's
 * `guided_regex`, `guided_choice`, `guided_grammar`, `guided_json` and
 * `structured_outputs` ({"regex"}, {"choice"}, {"grammar"}, {"json"}, {"json_object"}).
 * Each is compiled here; a fault is a 400 naming the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"
#include "server/openai_schema.h"
#include "tessera/grammar.h"

/* A member of o that is given (absent and null are not). */
static const cJSON *given(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* A compiler's refusal as a 400 (500 when out of memory) naming field. */
static ts_status refused(oai_error *err, const char *field, ts_status st, const ts_error *e)
{
    if (st == TS_ERR_NOMEM)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    return oai_error_set(err, 400, field, "invalid_grammar", "'%s': %s", field, e->msg);
}

static ts_status want_string(const cJSON *v, const char *field, oai_error *err)
{
    return cJSON_IsString(v) ? TS_OK
                             : oai_error_set(err, 400, field, "invalid_type",
                                             "'%s' must be a string", field);
}

static ts_status read_gbnf(const cJSON *v, const char *field, oai_request *r, oai_error *err)
{
    ts_error e = {0};
    if (want_string(v, field, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    ts_status st = ts_grammar_compile_gbnf(v->valuestring, strlen(v->valuestring), &r->grammar,
                                           &e);
    return st == TS_OK ? TS_OK : refused(err, field, st, &e);
}

static ts_status read_regex(const cJSON *v, const char *field, oai_request *r, oai_error *err)
{
    ts_error e = {0};
    if (want_string(v, field, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    ts_status st = ts_grammar_compile_regex(v->valuestring, strlen(v->valuestring),
                                            &r->grammar, &e);
    return st == TS_OK ? TS_OK : refused(err, field, st, &e);
}

static ts_status read_choice(const cJSON *v, const char *field, oai_request *r,
                             oai_error *err)
{
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (n < 1 || n > TS_GRAMMAR_MAX_CHOICES)
        return oai_error_set(err, 400, field, "invalid_type",
                             "'%s' must be an array of 1 to %d strings", field,
                             TS_GRAMMAR_MAX_CHOICES);
    const char **s = calloc((size_t)n, sizeof *s);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    ts_status st = s && lens ? TS_OK : oai_error_set(err, 500, NULL, NULL, "out of memory");
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        if (st != TS_OK)
            break;
        if (!cJSON_IsString(x)) {
            st = oai_error_set(err, 400, field, "invalid_type", "'%s[%d]' must be a string",
                               field, i);
            break;
        }
        s[i] = x->valuestring;
        lens[i++] = strlen(x->valuestring);
    }
    if (st == TS_OK) {
        ts_error e = {0};
        st = ts_grammar_compile_choice(s, lens, (size_t)n, &r->grammar, &e);
        if (st != TS_OK)
            st = refused(err, field, st, &e);
    }
    free(s);
    free(lens);
    return st;
}

/* A JSON Schema given as an object, a boolean or (vLLM) a string holding one. */
static ts_status read_json(const cJSON *v, const char *field, oai_request *r, oai_error *err)
{
    cJSON *parsed = NULL;
    if (cJSON_IsString(v)) {
        parsed = cJSON_Parse(v->valuestring);
        if (!parsed)
            return oai_error_set(err, 400, field, "invalid_type",
                                 "'%s' is a string that is not JSON", field);
        v = parsed;
    }
    ts_status st = cJSON_IsObject(v) || cJSON_IsBool(v)
                       ? oai_schema_compile(v, field, &r->schema, err)
                       : oai_error_set(err, 400, field, "invalid_type",
                                       "'%s' must be a JSON Schema object", field);
    cJSON_Delete(parsed);
    if (st == TS_OK)
        r->format = OAI_FORMAT_JSON_SCHEMA;
    return st;
}

typedef ts_status (*read_fn)(const cJSON *v, const char *field, oai_request *r,
                             oai_error *err);

typedef struct guided_field {
    const char *name;
    read_fn read; /* NULL: structured_outputs, read by its members */
} guided_field;

static const guided_field top_fields[] = {
    {"grammar", read_gbnf},       {"guided_grammar", read_gbnf}, {"guided_regex", read_regex},
    {"guided_choice", read_choice}, {"guided_json", read_json},  {"json_schema", read_json},
    {"structured_outputs", NULL},
};

static const guided_field structured_members[] = {
    {"grammar", read_gbnf}, {"regex", read_regex}, {"choice", read_choice},
    {"json", read_json},
};

/* structured_outputs: exactly one of its constraint members. */
static ts_status read_structured(const cJSON *so, oai_request *r, oai_error *err)
{
    if (!cJSON_IsObject(so))
        return oai_error_set(err, 400, "structured_outputs", "invalid_type",
                             "'structured_outputs' must be an object");
    const cJSON *m;
    const char *seen = NULL;
    cJSON_ArrayForEach(m, so) {
        if (cJSON_IsNull(m) || cJSON_IsFalse(m))
            continue;
        const char *name = m->string ? m->string : "";
        const guided_field *f = NULL;
        for (size_t i = 0; i < sizeof structured_members / sizeof structured_members[0]; i++)
            if (!strcmp(name, structured_members[i].name))
                f = &structured_members[i];
        bool json_object = !strcmp(name, "json_object");
        if (!f && !json_object)
            return oai_error_set(err, 400, "structured_outputs", "unsupported_value",
                                 "'structured_outputs.%.40s' is not supported (regex, choice, "
                                 "grammar, json, json_object are)", name);
        if (seen)
            return oai_error_set(err, 400, "structured_outputs", "invalid_value",
                                 "'structured_outputs' has both '%s' and '%.40s': give one",
                                 seen, name);
        seen = f ? f->name : "json_object";
        char field[64];
        snprintf(field, sizeof field, "structured_outputs.%s", seen);
        ts_status st;
        if (json_object) {
            st = cJSON_IsTrue(m) ? TS_OK
                                 : oai_error_set(err, 400, field, "invalid_type",
                                                 "'%s' must be true", field);
            r->format = OAI_FORMAT_JSON_OBJECT;
        } else {
            st = f->read(m, field, r, err);
        }
        if (st != TS_OK)
            return st;
    }
    if (!seen)
        return oai_error_set(err, 400, "structured_outputs", "invalid_value",
                             "'structured_outputs' names no constraint (regex, choice, "
                             "grammar, json, json_object)");
    return TS_OK;
}

ts_status oai_read_guided(const cJSON *root, oai_request *r, oai_error *err)
{
    const char *seen = NULL;
    for (size_t i = 0; i < sizeof top_fields / sizeof top_fields[0]; i++) {
        const guided_field *f = &top_fields[i];
        const cJSON *v = given(root, f->name);
        if (!v || (f->read == read_gbnf && cJSON_IsString(v) && !*v->valuestring))
            continue; /* llama.cpp's clients send "grammar": "" for none */
        if (seen || r->format != OAI_FORMAT_TEXT)
            return oai_error_set(err, 400, f->name, "invalid_value",
                                 "'%s' and '%s' both constrain the output: give one", f->name,
                                 seen ? seen : "response_format");
        seen = f->name;
        ts_status st = f->read ? f->read(v, f->name, r, err) : read_structured(v, r, err);
        if (st != TS_OK)
            return st;
        if (r->grammar)
            r->format = OAI_FORMAT_GRAMMAR;
    }
    return TS_OK;
}
