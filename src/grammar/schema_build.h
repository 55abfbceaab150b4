/* schema_build.h: what the compiler (schema_compile.c) and the graph builder
 * (schema_build.c) share while a schema compiles: the pools of ts_schema grown, the
 * literal values kept for oneOf's checks, and the passes run once the walk is done. */
#ifndef TESSERA_GRAMMAR_SCHEMA_BUILD_H
#define TESSERA_GRAMMAR_SCHEMA_BUILD_H

#include <cjson/cJSON.h>

#include "grammar/schema.h"

/* A union's alternatives while compiling (before flattening into ts_schema.targets). */
typedef struct sb_union {
    int node;
    int *alts;  /* (n) node ids */
    int n;
    bool one_of; /* check that no value matches two alternatives */
    char path[TS_SCHEMA_PATH_LEN]; /* where the union is, for errors */
} sb_union;

typedef struct schema_builder {
    ts_schema *s;
    sb_union *unions;
    int n_unions, cap_unions;
    const cJSON ***values; /* (cap_values) a literal node's JSON values, borrowed */
    int *n_values;         /* (cap_values) */
    double *num_lo, *num_hi; /* (cap_values) a number node's bounds as the schema says
                              * them (inclusive doubles), wider than what it writes */
    int cap_values;
} schema_builder;

/* A new node of kind (its id), or -1 past SCH_MAX_NODES or out of memory. */
int sb_node(schema_builder *b, sch_kind kind);

/* A literal node of the given values (borrowed; they must outlive the builder). */
int sb_literal(schema_builder *b, const cJSON *const *values, int n);

/* Appends a property to the props pool; name is the key's JSON text (quotes included),
 * hash its schema__value_hash. */
bool sb_prop(schema_builder *b, const char *name, size_t len, bool required, int node,
             uint32_t hash);

/* Records node (made by sb_node(SCH_UNION)) with its alternatives (copied). */
bool sb_union_add(schema_builder *b, int node, const int *alts, int n, bool one_of,
                  const char *path);

/* After the walk: flattens unions, works out what each node needs, checks oneOf, and
 * checks the root. On failure msg (msg_size) and path (path_size) say why and where. */
ts_status sb_finish(schema_builder *b, char *msg, size_t msg_size, char *path,
                    size_t path_size);

void sb_free(schema_builder *b);

/* dst (size bytes) = a, then "." and b when both are non-empty; cut to fit. */
void sb_path_join(char *dst, size_t size, const char *a, const char *b);

#endif /* TESSERA_GRAMMAR_SCHEMA_BUILD_H */
