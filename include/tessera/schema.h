/* tessera/schema.h: JSON Schemas compiled for constrained decoding (response_format
 * json_schema, a tool's parameters). A compiled schema is an immutable automaton that any
 * number of requests and threads share; it needs no model or tokenizer. docs/API.md, "JSON
 * Schema subset", lists the keywords it takes and what the generated text looks like. */
#ifndef TESSERA_SCHEMA_H
#define TESSERA_SCHEMA_H

#include <stddef.h>

#include "tessera/status.h"

typedef struct ts_schema ts_schema;

enum {
    TS_SCHEMA_MAX_BYTES = 1 << 20, /* the largest schema text ts_schema_compile reads */
    TS_SCHEMA_PATH_LEN = 160,      /* bytes of the path ts_schema_compile reports */
};

/* Compiles the JSON Schema in json (len bytes, borrowed: nothing of it is kept).
 *
 * On success *out holds one reference, the caller's, to drop with ts_schema_release().
 * On failure *out is NULL, err's message names what was wrong (an unsupported keyword by
 * its name: "unsupported keyword 'uniqueItems' at properties.tags"), and path, when not
 * NULL, gets (path_size bytes, NUL-terminated, cut to fit) the dotted location of the
 * offending keyword inside the schema: "properties.tags.uniqueItems", "anyOf[1].minLength",
 * "" for the schema as a whole. A server appends it to the field that carried the schema
 * (response_format.json_schema.schema.properties.tags.uniqueItems).
 *
 * Statuses: TS_ERR_UNSUPPORTED (a keyword or value outside the supported subset),
 * TS_ERR_INVALID_ARG (not JSON, a keyword of the wrong type, a $ref that points nowhere,
 * or a schema no value can satisfy), TS_ERR_TOO_LONG (over a bound: nesting, size,
 * pattern complexity), TS_ERR_NOMEM. Thread-safe. */
ts_status ts_schema_compile(const char *json, size_t len, ts_schema **out, char *path,
                            size_t path_size, ts_error *err);

/* Takes another reference to s and returns s (NULL gives NULL). Thread-safe. */
ts_schema *ts_schema_retain(ts_schema *s);

/* Drops one reference; the last one frees the schema. Accepts NULL. Thread-safe. */
void ts_schema_release(ts_schema *s);

#endif /* TESSERA_SCHEMA_H */
