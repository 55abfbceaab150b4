/* openai_tools.c: a chat request's tools, tool_choice and parallel_tool_calls, checked;
 * the tool fields of its messages; and the JSON Schema of the call(s) a forced
 * tool_choice constrains the answer to. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"
#include "server/openai_schema.h"

/* A member of o that is given (absent and null are not). */
static const cJSON *given(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNull(f) ? NULL : f;
}

static ts_status wrong_type(oai_error *err, const char *name, const char *want)
{
    return oai_error_set(err, 400, name, "invalid_type", "'%s' must be %s", name, want);
}

/* OpenAI's rule for function names: 1-64 of a-z, A-Z, 0-9, '_' and '-'. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > OAI_MAX_TOOL_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Objects and arrays nested in v (0 for a scalar), counted no further than limit + 1. */
static int json_depth(const cJSON *v, int limit)
{
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return 0;
    int deepest = 0;
    if (limit >= 0)
        for (const cJSON *c = v->child; c && deepest <= limit; c = c->next) {
            int d = json_depth(c, limit - 1);
            deepest = d > deepest ? d : deepest;
        }
    return deepest + 1;
}

/* The same for JSON text: brackets outside strings (a text need not be valid JSON to be
 * too deep). */
static int text_depth(const char *s)
{
    int depth = 0, deepest = 0;
    bool in_str = false;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == '"')
                in_str = false;
        } else if (*s == '"') {
            in_str = true;
        } else if (*s == '{' || *s == '[') {
            deepest = ++depth > deepest ? depth : deepest;
        } else if ((*s == '}' || *s == ']') && depth > 0) {
            depth--;
        }
    }
    return deepest;
}

static ts_status too_deep(oai_error *err, const char *name)
{
    return oai_error_set(err, 400, name, "invalid_value",
                         "'%s' nests objects and arrays deeper than %d", name,
                         OAI_MAX_JSON_DEPTH);
}

/* tools[i]: {"type": "function", "function": {"name", "description"?, "parameters"?,
 * "strict"?}}, its name unlike those before it. */
static ts_status check_tool(const cJSON *tools, const cJSON *t, int i, oai_error *err)
{
    char name[96];
    snprintf(name, sizeof name, "tools[%d]", i);
    if (!cJSON_IsObject(t))
        return wrong_type(err, name, "an object");
    snprintf(name, sizeof name, "tools[%d].type", i);
    const cJSON *type = given(t, "type");
    if (!type)
        return oai_error_set(err, 400, name, "missing_required_parameter", "'%s' is required",
                             name);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return oai_error_set(err, 400, name, "unsupported_value",
                             "'%s' must be \"function\" (the only tool type supported)", name);
    snprintf(name, sizeof name, "tools[%d].function", i);
    const cJSON *fn = given(t, "function");
    if (!cJSON_IsObject(fn))
        return fn ? wrong_type(err, name, "an object")
                  : oai_error_set(err, 400, name, "missing_required_parameter",
                                  "'%s' is required", name);
    snprintf(name, sizeof name, "tools[%d].function.name", i);
    const cJSON *fname = given(fn, "name");
    if (!fname)
        return oai_error_set(err, 400, name, "missing_required_parameter", "'%s' is required",
                             name);
    if (!cJSON_IsString(fname))
        return wrong_type(err, name, "a string");
    if (!name_ok(fname->valuestring))
        return oai_error_set(err, 400, name, "invalid_value",
                             "'%s' must be 1 to %d letters, digits, '_' or '-'", name,
                             OAI_MAX_TOOL_NAME);
    int k = 0;
    for (const cJSON *u = tools->child; u && u != t; u = u->next, k++)
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(u, "function"), "name")->valuestring,
                    fname->valuestring))
            return oai_error_set(err, 400, name, "invalid_value",
                                 "'%s' repeats the name of tools[%d]: '%s'", name, k,
                                 fname->valuestring);
    static const struct { const char *key, *want; cJSON_bool (*is)(const cJSON *); } opt[] = {
        {"description", "a string", cJSON_IsString},
        {"parameters", "an object (a JSON Schema)", cJSON_IsObject},
        {"strict", "a boolean", cJSON_IsBool},
    };
    for (size_t o = 0; o < sizeof opt / sizeof opt[0]; o++) {
        const cJSON *v = given(fn, opt[o].key);
        snprintf(name, sizeof name, "tools[%d].function.%s", i, opt[o].key);
        if (v && !opt[o].is(v))
            return wrong_type(err, name, opt[o].want);
        if (v && json_depth(v, OAI_MAX_JSON_DEPTH) > OAI_MAX_JSON_DEPTH)
            return too_deep(err, name);
    }
    return TS_OK;
}

/* The index of the tool called name, or -1. */
static int find_tool(const cJSON *tools, const char *name)
{
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring, name))
            return i;
        i++;
    }
    return -1;
}

/* tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name"}}. */
static ts_status read_choice(const cJSON *tc, oai_tools *t, oai_error *err)
{
    const char *want = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}";
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "none"))
            t->choice = OAI_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto"))
            t->choice = OAI_TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required"))
            t->choice = OAI_TOOL_CHOICE_REQUIRED;
        else
            return oai_error_set(err, 400, "tool_choice", "invalid_value",
                                 "'tool_choice' must be %s (got \"%.40s\")", want, s);
    } else if (cJSON_IsObject(tc)) {
        const cJSON *type = given(tc, "type"), *fn = given(tc, "function");
        const cJSON *name = fn ? given(fn, "name") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
            return oai_error_set(err, 400, "tool_choice", "unsupported_value",
                                 "'tool_choice' must be %s", want);
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name))
            return wrong_type(err, "tool_choice",
                              "{\"type\": \"function\", \"function\": {\"name\": string}}");
        t->choice = OAI_TOOL_CHOICE_NAMED;
        t->named = t->defs ? find_tool(t->defs, name->valuestring) : -1;
        if (t->defs && t->named < 0)
            return oai_error_set(err, 400, "tool_choice", "invalid_value",
                                 "'tool_choice' names function '%.64s', which is not in "
                                 "'tools'", name->valuestring);
    } else {
        return wrong_type(err, "tool_choice", want);
    }
    if (t->choice >= OAI_TOOL_CHOICE_REQUIRED && !t->defs)
        return oai_error_set(err, 400, "tool_choice", "invalid_value",
                             "'tool_choice' %s needs 'tools'",
                             t->choice == OAI_TOOL_CHOICE_NAMED ? "naming a function"
                                                                : "\"required\"");
    return TS_OK;
}

/* ---- the schema of a forced answer */

/* Adds item to obj (an object, or an array when name is NULL); item is freed when it
 * cannot be added, or is NULL. */
static bool add(cJSON *obj, const char *name, cJSON *item)
{
    if (obj && item && (name ? cJSON_AddItemToObject(obj, name, item)
                             : cJSON_AddItemToArray(obj, item)))
        return true;
    cJSON_Delete(item);
    return false;
}

/* {"type": "object", "properties": {"name": {"const": NAME}, "arguments": PARAMS},
 * "required": ["name", "arguments"], "additionalProperties": false} for tool t. */
static cJSON *call_schema(const cJSON *t)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    const cJSON *params = given(fn, "parameters");
    cJSON *args = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    if (args && !params) { /* a function of no parameters: {} */
        cJSON_AddStringToObject(args, "type", "object");
        cJSON_AddObjectToObject(args, "properties");
        cJSON_AddFalseToObject(args, "additionalProperties");
    }
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
    cJSON *req = cJSON_CreateArray();
    const char *fname = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
    bool ok = add(name, "const", cJSON_CreateString(fname)) & add(props, "name", name) &
              add(props, "arguments", args) & add(req, NULL, cJSON_CreateString("name")) &
              add(req, NULL, cJSON_CreateString("arguments")) &
              add(s, "type", cJSON_CreateString("object")) & add(s, "properties", props) &
              add(s, "required", req) & add(s, "additionalProperties", cJSON_CreateFalse());
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* One call of any tool: the call's schema itself for one tool, else {"anyOf": [...]}. */
static cJSON *any_call_schema(const oai_tools *t)
{
    if (t->n == 1)
        return call_schema(t->defs->child);
    cJSON *s = cJSON_CreateObject(), *any = cJSON_CreateArray();
    bool ok = add(s, "anyOf", any);
    const cJSON *x;
    cJSON_ArrayForEach(x, t->defs) ok = ok && add(any, NULL, call_schema(x));
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

cJSON *oai_tools_schema(const oai_tools *t)
{
    cJSON *s = NULL;
    if (t->choice == OAI_TOOL_CHOICE_NAMED) {
        s = call_schema(cJSON_GetArrayItem(t->defs, t->named));
    } else if (t->choice == OAI_TOOL_CHOICE_REQUIRED && !t->parallel) {
        s = any_call_schema(t);
    } else if (t->choice == OAI_TOOL_CHOICE_REQUIRED) { /* [call, ...], one at least */
        s = cJSON_CreateObject();
        if (!(add(s, "type", cJSON_CreateString("array")) & add(s, "items", any_call_schema(t)) &
              add(s, "minItems", cJSON_CreateNumber(1)) &
              add(s, "maxItems", cJSON_CreateNumber(OAI_MAX_PARALLEL_CALLS)))) {
            cJSON_Delete(s);
            return NULL;
        }
    }
    return s;
}

/* The forced answer's schema compiled into t->schema. A refusal names the parameters of
 * the tool at fault where one alone fails (tools[1].function.parameters.minimum), else
 * tool_choice. */
static ts_status compile_forced(oai_tools *t, oai_error *err)
{
    cJSON *s = oai_tools_schema(t);
    if (!s)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    ts_status st = oai_schema_compile(s, "tool_choice", &t->schema, err);
    cJSON_Delete(s);
    if (st == TS_OK || err->http_status != 400)
        return st;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, t->defs) {
        const cJSON *params = given(cJSON_GetObjectItemCaseSensitive(x, "function"), "parameters");
        if ((t->choice == OAI_TOOL_CHOICE_REQUIRED || i == t->named) && params) {
            char field[64];
            ts_schema *one = NULL;
            snprintf(field, sizeof field, "tools[%d].function.parameters", i);
            oai_error e1;
            if (oai_schema_compile(params, field, &one, &e1) != TS_OK) {
                *err = e1;
                return TS_ERR_INVALID_ARG;
            }
            ts_schema_release(one);
        }
        i++;
    }
    return st;
}

void oai_tools_clear(oai_tools *t)
{
    cJSON_Delete(t->defs);
    ts_schema_release(t->schema);
    memset(t, 0, sizeof *t);
}

/* ---- the request's fields */

ts_status oai_read_tools(const cJSON *root, oai_request *r, oai_error *err)
{
    oai_tools *t = &r->tools;
    t->parallel = true;
    const cJSON *tools = given(root, "tools"), *x;
    if (tools && !cJSON_IsArray(tools))
        return wrong_type(err, "tools", "an array");
    int n = cJSON_GetArraySize(tools), i = 0;
    if (n > OAI_MAX_TOOLS)
        return oai_error_set(err, 400, "tools", "out_of_range",
                             "'tools' may hold at most %d tools (got %d)", OAI_MAX_TOOLS, n);
    cJSON_ArrayForEach(x, tools)
        if (check_tool(tools, x, i++, err) != TS_OK)
            return TS_ERR_INVALID_ARG;
    if (n > 0) {
        if (!(t->defs = cJSON_Duplicate(tools, true)))
            return oai_error_set(err, 500, NULL, NULL, "out of memory");
        t->n = n;
        t->choice = OAI_TOOL_CHOICE_AUTO;
    }
    const cJSON *tc = given(root, "tool_choice"), *ptc = given(root, "parallel_tool_calls");
    if (tc && read_choice(tc, t, err) != TS_OK)
        return TS_ERR_INVALID_ARG;
    if (ptc && !cJSON_IsBool(ptc))
        return wrong_type(err, "parallel_tool_calls", "a boolean");
    if (ptc)
        t->parallel = cJSON_IsTrue(ptc);
    if (t->choice >= OAI_TOOL_CHOICE_REQUIRED && r->format != OAI_FORMAT_TEXT)
        return oai_error_set(err, 400, "tool_choice", "unsupported_value",
                             "a forced 'tool_choice' already constrains the answer: "
                             "'response_format' must be text");
    return t->choice >= OAI_TOOL_CHOICE_REQUIRED ? compile_forced(t, err) : TS_OK;
}

ts_status oai_check_message_tools(const cJSON *m, int i, const char *role, oai_error *err)
{
    char name[96];
    if (!strcmp(role, "tool")) {
        snprintf(name, sizeof name, "messages[%d].tool_call_id", i);
        const cJSON *id = given(m, "tool_call_id");
        if (!id)
            return oai_error_set(err, 400, name, "missing_required_parameter",
                                 "'%s' is required", name);
        return cJSON_IsString(id) ? TS_OK : wrong_type(err, name, "a string");
    }
    const cJSON *calls = given(m, "tool_calls"), *c;
    if (!calls || strcmp(role, "assistant"))
        return TS_OK;
    snprintf(name, sizeof name, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(calls))
        return wrong_type(err, name, "an array");
    int k = 0;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *id = given(c, "id"), *type = given(c, "type"), *fn = given(c, "function");
        const cJSON *fname = fn ? given(fn, "name") : NULL;
        const cJSON *args = fn ? given(fn, "arguments") : NULL;
        const char *what = NULL, *want = NULL;
        if (!cJSON_IsObject(c))
            what = "", want = "an object";
        else if (!cJSON_IsString(id))
            what = ".id", want = "a string";
        else if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function")))
            what = ".type", want = "\"function\"";
        else if (!cJSON_IsObject(fn))
            what = ".function", want = "an object";
        else if (!cJSON_IsString(fname))
            what = ".function.name", want = "a string";
        else if (args && !cJSON_IsString(args) && !cJSON_IsObject(args))
            what = ".function.arguments", want = "a string of JSON";
        if (what) {
            snprintf(name, sizeof name, "messages[%d].tool_calls[%d]%s", i, k, what);
            return wrong_type(err, name, want);
        }
        if (args && (cJSON_IsString(args) ? text_depth(args->valuestring)
                                          : json_depth(args, OAI_MAX_JSON_DEPTH)) >
                        OAI_MAX_JSON_DEPTH) {
            snprintf(name, sizeof name, "messages[%d].tool_calls[%d].function.arguments", i, k);
            return too_deep(err, name);
        }
        k++;
    }
    return TS_OK;
}
