/* openai_schema.c: compiling a request's JSON Schema, and its refusals as OpenAI errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai_schema.h"

ts_status oai_schema_compile(const cJSON *schema, const char *field, ts_schema **out,
                             oai_error *err)
{
    *out = NULL;
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return oai_error_set(err, 400, field, "invalid_type",
                             "'%s' must be a JSON Schema (an object)", field);
    char *text = cJSON_PrintUnformatted(schema);
    if (!text)
        return oai_error_set(err, 500, NULL, NULL, "out of memory");
    char where[TS_SCHEMA_PATH_LEN];
    ts_error e = {0};
    ts_status st = ts_schema_compile(text, strlen(text), out, where, sizeof where, &e);
    free(text);
    if (st == TS_OK)
        return TS_OK;
    if (st == TS_ERR_NOMEM)
        return oai_error_set(err, 500, NULL, NULL, "out of memory compiling '%s'", field);
    char param[sizeof err->param];
    snprintf(param, sizeof param, "%s%s%s", field, where[0] ? "." : "", where);
    return oai_error_set(err, 400, param,
                         st == TS_ERR_UNSUPPORTED ? "unsupported_value" : "invalid_value",
                         "%s: %s", field, e.msg);
}
