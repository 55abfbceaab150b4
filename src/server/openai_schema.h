/* openai_schema.h: a JSON Schema inside an OpenAI request (response_format's json_schema, a
 * tool's parameters) compiled for the engine, its faults as 400s that point at them. */
#ifndef TESSERA_SERVER_OPENAI_SCHEMA_H
#define TESSERA_SERVER_OPENAI_SCHEMA_H

#include "server/openai.h"
#include "tessera/schema.h"

struct cJSON;

/* Compiles schema (borrowed; a JSON object or boolean) into *out (the caller's reference,
 * for ts_schema_release). On failure *out is NULL and err is a 400 (500 when out of
 * memory) whose param is field (borrowed, the request field that carried the schema:
 * "response_format.json_schema.schema", "tools[0].function.parameters") followed by the
 * path of the offending keyword inside it, and whose message names the keyword. */
ts_status oai_schema_compile(const struct cJSON *schema, const char *field, ts_schema **out,
                             oai_error *err);

#endif /* TESSERA_SERVER_OPENAI_SCHEMA_H */
