/* openai_fields.c: what tessera does with every top-level field of OpenAI's chat and
 * completions requests: used, accepted as a documented no-op, or refused by name; a field
 * outside the table is listed in the request's ignored names (X-Tessera-Ignored-Fields). */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"
#include "server/openai_schema.h"

enum { KIND_CHAT = 1, KIND_COMPLETION = 2, KIND_BOTH = 3 };

typedef enum field_use {
    FIELD_USED,    /* read by openai_parse.c */
    FIELD_NOOP,    /* accepted (its type checked) and documented as having no effect */
    FIELD_REFUSED, /* any non-null value is a 400 naming it */
} field_use;

/* The JSON type a no-op field must have (null always passes). */
typedef enum field_type { TYPE_ANY, TYPE_STRING, TYPE_BOOL, TYPE_OBJECT, TYPE_ARRAY } field_type;

typedef struct field_row {
    const char *name;
    unsigned kinds;
    field_use use;
    field_type type; /* for FIELD_NOOP */
    const char *why; /* a no-op's reason or a refusal's message */
} field_row;

/* docs/API.md's field table says the same; keep them together. */
static const field_row fields[] = {
    {"model", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"messages", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"prompt", KIND_COMPLETION, FIELD_USED, TYPE_ANY, NULL},
    {"max_tokens", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"max_completion_tokens", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"temperature", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"top_p", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"top_k", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"min_p", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"presence_penalty", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"frequency_penalty", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"repetition_penalty", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    /* llama.cpp's and vLLM's samplers (openai_sampling.c) */
    {"repeat_penalty", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"repeat_last_n", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"typical_p", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"top_n_sigma", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"min_keep", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"xtc_probability", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"xtc_threshold", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"mirostat", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"mirostat_tau", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"mirostat_eta", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"dry_multiplier", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"dry_base", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"dry_allowed_length", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"dry_penalty_last_n", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"dry_sequence_breakers", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"n_probs", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"logit_bias", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"seed", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"stop", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"n", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"logprobs", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"top_logprobs", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"stream", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"stream_options", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"ignore_eos", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"speculative", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"echo", KIND_COMPLETION, FIELD_USED, TYPE_ANY, NULL},
    {"prompt_logprobs", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"best_of", KIND_COMPLETION, FIELD_USED, TYPE_ANY, NULL},
    {"suffix", KIND_COMPLETION, FIELD_USED, TYPE_ANY, NULL},
    {"modalities", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"response_format", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"tools", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"tool_choice", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"parallel_tool_calls", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"chat_template_kwargs", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL}, /* chat_vars.c */
    {"add_generation_prompt", KIND_CHAT, FIELD_USED, TYPE_ANY, NULL},
    {"grammar", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},            /* openai_guided.c */
    {"json_schema", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"guided_regex", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"guided_choice", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"guided_grammar", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"guided_json", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"structured_outputs", KIND_BOTH, FIELD_USED, TYPE_ANY, NULL},
    {"user", KIND_BOTH, FIELD_NOOP, TYPE_STRING, "an end-user id for abuse tracking"},
    {"safety_identifier", KIND_CHAT, FIELD_NOOP, TYPE_STRING, "an end-user id"},
    {"metadata", KIND_CHAT, FIELD_NOOP, TYPE_OBJECT, "tags for stored completions"},
    {"store", KIND_CHAT, FIELD_NOOP, TYPE_BOOL, "tessera stores no completions"},
    {"service_tier", KIND_CHAT, FIELD_NOOP, TYPE_STRING,
     "the API key's tier sets the priority"},
    {"prompt_cache_key", KIND_CHAT, FIELD_NOOP, TYPE_STRING,
     "the prefix cache needs no key"},
    {"reasoning_effort", KIND_CHAT, FIELD_NOOP, TYPE_STRING, "no reasoning mode"},
    {"verbosity", KIND_CHAT, FIELD_NOOP, TYPE_STRING, "length is max_tokens'"},
    {"audio", KIND_CHAT, FIELD_REFUSED, TYPE_ANY, "audio output is not supported"},
    {"prediction", KIND_CHAT, FIELD_REFUSED, TYPE_ANY,
     "predicted outputs are not supported"},
    {"web_search_options", KIND_CHAT, FIELD_REFUSED, TYPE_ANY, "web search is not supported"},
    {"functions", KIND_CHAT, FIELD_REFUSED, TYPE_ANY,
     "'functions' is deprecated; send 'tools'"},
    {"function_call", KIND_CHAT, FIELD_REFUSED, TYPE_ANY,
     "'function_call' is deprecated; send 'tool_choice'"},
};

static const field_row *find_field(const char *name, oai_kind kind)
{
    unsigned k = kind == OAI_CHAT ? KIND_CHAT : KIND_COMPLETION;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((fields[i].kinds & k) && !strcmp(fields[i].name, name))
            return &fields[i];
    return NULL;
}

static bool type_ok(const cJSON *v, field_type t)
{
    switch (t) {
    case TYPE_STRING: return cJSON_IsString(v);
    case TYPE_BOOL: return cJSON_IsBool(v);
    case TYPE_OBJECT: return cJSON_IsObject(v);
    case TYPE_ARRAY: return cJSON_IsArray(v);
    default: return true;
    }
}

static const char *type_name(field_type t)
{
    return t == TYPE_STRING   ? "a string"
           : t == TYPE_BOOL   ? "a boolean"
           : t == TYPE_OBJECT ? "an object"
                              : "an array";
}

/* Appends name to the comma-separated list (size cap) as a header can carry it: bytes
 * other than letters, digits and _-.$ become '_' (a name must not end the header line);
 * past the cap the list ends in "...". */
static void list_ignored(char *list, size_t cap, const char *name)
{
    size_t o = strlen(list);
    if (o + 4 >= cap || (o >= 3 && !strcmp(list + o - 3, "...")))
        return;
    size_t n = strlen(name);
    if (o + (o ? 2 : 0) + n + 4 >= cap) {
        snprintf(list + o, cap - o, "%s...", o ? ", " : "");
        return;
    }
    if (o) {
        memcpy(list + o, ", ", 2);
        o += 2;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("_-.$", ch);
        list[o++] = plain && ch ? ch : '_';
    }
    list[o] = '\0';
}

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

/* echo (the prompt repeated, one completion; needed by max_tokens 0), and
 * best_of and suffix: accepted where they change nothing. */
static ts_status check_completion_values(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *echo = given(root, "echo"), *best = given(root, "best_of");
    const cJSON *suffix = given(root, "suffix");
    if (echo && !cJSON_IsBool(echo))
        return wrong_type(err, "echo", "a boolean");
    r->echo = cJSON_IsTrue(echo);
    if (r->echo && r->n > 1)
        return oai_error_set(err, 400, "echo", "unsupported_value",
                             "'echo' is supported for one completion ('n' 1)");
    if (r->score_only && !r->echo)
        return oai_error_set(err, 400, "max_tokens", "out_of_range",
                             "'max_tokens' must be at least 1 (0 scores the prompt with "
                             "'echo': true)");
    if (best && (!cJSON_IsNumber(best) || best->valuedouble != (double)r->n))
        return oai_error_set(err, 400, "best_of", "unsupported_value",
                             "'best_of' must equal 'n' (%d): tessera returns every completion",
                             r->n);
    if (suffix && !cJSON_IsString(suffix))
        return wrong_type(err, "suffix", "a string");
    if (suffix && *suffix->valuestring)
        return oai_error_set(err, 400, "suffix", "unsupported_value",
                             "'suffix' (text insertion) is not supported");
    return TS_OK;
}

/* response_format (both routes): text, json_object, or json_schema {name, schema,
 * strict, description}, whose schema is compiled into r->schema. */
static ts_status check_response_format(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *rf = given(root, "response_format");
    if (!rf)
        return TS_OK;
    const cJSON *t = cJSON_IsObject(rf) ? given(rf, "type") : NULL;
    if (!cJSON_IsString(t))
        return wrong_type(err, "response_format", "an object with a string 'type'");
    if (!strcmp(t->valuestring, "text"))
        return TS_OK;
    if (!strcmp(t->valuestring, "json_object")) {
        r->format = OAI_FORMAT_JSON_OBJECT;
        return TS_OK;
    }
    if (strcmp(t->valuestring, "json_schema"))
        return oai_error_set(err, 400, "response_format", "unsupported_value",
                             "response_format type '%.40s' is not supported",
                             t->valuestring);
    const cJSON *js = given(rf, "json_schema");
    if (!cJSON_IsObject(js))
        return wrong_type(err, "response_format.json_schema", "an object");
    const cJSON *name = given(js, "name"), *strict = given(js, "strict");
    const cJSON *desc = given(js, "description"), *schema = given(js, "schema");
    if (name && !cJSON_IsString(name))
        return wrong_type(err, "response_format.json_schema.name", "a string");
    if (desc && !cJSON_IsString(desc))
        return wrong_type(err, "response_format.json_schema.description", "a string");
    if (strict && !cJSON_IsBool(strict))
        return wrong_type(err, "response_format.json_schema.strict", "a boolean");
    /* No schema: OpenAI's default is an empty schema, any JSON value. */
    cJSON *any = schema ? NULL : cJSON_CreateObject();
    if (!schema && !any)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    ts_status st = oai_schema_compile(schema ? schema : any, "response_format.json_schema.schema",
                                      &r->schema, err);
    cJSON_Delete(any);
    if (st == TS_OK)
        r->format = OAI_FORMAT_JSON_SCHEMA;
    return st;
}

/* modalities, then the tool fields (after response_format: a forced call needs text). */
static ts_status check_chat_values(const cJSON *root, oai_request *r, oai_error *err)
{
    const cJSON *m = given(root, "modalities"), *x;
    if (m) {
        if (!cJSON_IsArray(m))
            return wrong_type(err, "modalities", "an array of strings");
        cJSON_ArrayForEach(x, m)
            if (!cJSON_IsString(x) || strcmp(x->valuestring, "text"))
                return oai_error_set(err, 400, "modalities", "unsupported_value",
                                     "only the \"text\" modality is supported");
    }
    return oai_read_tools(root, r, err);
}

ts_status oai_check_fields(oai_kind kind, const cJSON *root, oai_request *r, oai_error *err)
{
    r->ignored[0] = '\0';
    const cJSON *f;
    cJSON_ArrayForEach(f, root) {
        const char *name = f->string ? f->string : "";
        const field_row *row = find_field(name, kind);
        if (!row) {
            list_ignored(r->ignored, sizeof r->ignored, name);
            continue;
        }
        if (cJSON_IsNull(f) || row->use == FIELD_USED)
            continue;
        if (row->use == FIELD_REFUSED)
            return oai_error_set(err, 400, row->name, "unsupported_parameter", "%s", row->why);
        if (!type_ok(f, row->type))
            return oai_error_set(err, 400, row->name, "invalid_type", "'%s' must be %s",
                                 row->name, type_name(row->type));
    }
    ts_status st = check_response_format(root, r, err);
    if (st == TS_OK)
        st = oai_read_guided(root, r, err);
    if (st != TS_OK)
        return st;
    return kind == OAI_COMPLETION ? check_completion_values(root, r, err)
                                  : check_chat_values(root, r, err);
}
