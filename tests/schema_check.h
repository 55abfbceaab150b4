/* schema_check.h: for the JSON-schema tests: a validator of the supported subset written
 * apart from the compiler (patterns through POSIX regex, formats by hand), a seeded
 * generator of random schemas from the subset, and a random byte-level walk through a
 * compiled schema's automaton. */
#ifndef TESSERA_TESTS_SCHEMA_CHECK_H
#define TESSERA_TESTS_SCHEMA_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tessera/schema.h"

/* The generated patterns: [i][0] in JSON Schema's spelling, [i][1] the same language in
 * POSIX ERE; and the generated formats. */
extern const char *const sc_patterns[][2];
extern const int sc_n_patterns;
enum { SC_N_FORMATS = 9 };
extern const char *const sc_formats[SC_N_FORMATS];

/* A xorshift64* stream; *state must not be 0. */
uint64_t sc_rand(uint64_t *state);

/* Whether value satisfies root (a schema document; $ref resolves inside it). On false,
 * why (why_size bytes) says where and what. The process's LC_CTYPE must be UTF-8
 * (sc_init sets it). */
bool sc_validate(const cJSON *root, const cJSON *value, char *why, size_t why_size);

/* Sets a UTF-8 locale for the validator's regular expressions. */
void sc_init(void);

/* A random schema of the supported subset, nesting at most depth (the caller's to
 * cJSON_Delete). Objects, arrays, strings (lengths, patterns, formats), integers and
 * numbers (bounds, exclusive ones), booleans, null, enum, const, anyOf, disjoint oneOf,
 * type arrays, and $ref to $defs (a recursive one among them). */
cJSON *sc_random_schema(uint64_t *rng, int depth);

/* A random object schema as Pydantic and zod write them: models of fields (titled),
 * Dict[str, X] (additionalProperties, minProperties, maxProperties), Set[X]
 * (uniqueItems), Tuple (prefixItems), Optional (anyOf with null), formats, not of const
 * or enum, nested models by $ref, allOf of one $ref, and allOf of two models. */
cJSON *sc_pydantic_schema(uint64_t *rng, int depth);

/* A random text the automaton of s accepts from its start to its end, choosing each byte
 * among those allowed (biased towards closing); NULL with why set when a state allowed
 * no byte before the end (a dead end) or max_bytes went by. The caller frees the text. */
char *sc_random_walk(const ts_schema *s, uint64_t *rng, size_t max_bytes, char *why,
                     size_t why_size);

#endif /* TESSERA_TESTS_SCHEMA_CHECK_H */
