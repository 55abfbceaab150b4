/* schema_comp.h: one schema's compilation in progress, shared by the walk over its
 * keywords (schema_compile.c) and the nodes of each JSON type (schema_types.c). */
#ifndef TESSERA_GRAMMAR_SCHEMA_COMP_H
#define TESSERA_GRAMMAR_SCHEMA_COMP_H

#include "grammar/schema_build.h"

/* The JSON types of "type", in the order of schema_compile.c's names. */
enum { TY_NULL, TY_BOOL, TY_OBJECT, TY_ARRAY, TY_NUMBER, TY_INTEGER, TY_STRING, TY_COUNT };

typedef struct comp {
    schema_builder b;
    cJSON *doc;
    cJSON *consts;          /* [null, true, false]: the values of null and boolean */
    cJSON *owned;           /* schemas made while compiling (allOf merged), freed with it */
    long merge_spent;       /* JSON values read and made by allOf merges (schema_merge.c) */
    const cJSON **memo_key; /* schema objects compiled, and their nodes */
    int *memo_node;
    int n_memo, cap_memo;
    int any;                /* the shared any-value node, -1 until made */
    const cJSON *excl;      /* the values `not` excludes from the type being made (an
                             * array), NULL: none; read only by comp_typed's own nodes */
    int depth;              /* schema objects being walked, one inside the other */
    char path[TS_SCHEMA_PATH_LEN]; /* where the walk is: "properties.a.items" */
    ts_status st;           /* the first failure */
    char msg[256];
    char where[TS_SCHEMA_PATH_LEN];
} comp;

/* ---- schema_comp.c: the compilation's state */

/* Records the first failure, at keyword (NULL: the schema at the current path); -1. */
int comp_fail(comp *c, ts_status st, const char *keyword, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int comp_nomem(comp *c);

/* Appends a printf-made segment (".items", "[2]") to the path; returns what comp_pop
 * restores. */
size_t comp_push(comp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void comp_pop(comp *c, size_t at);

/* Records node as sch's (sch NULL: nothing); returns node. */
int comp_memo_add(comp *c, const cJSON *sch, int node);

/* A new node with need set; -1 with the failure recorded. */
int comp_node(comp *c, sch_kind kind, uint16_t need);

/* A literal node of values (borrowed from the schema's document or c->consts). */
int comp_literal(comp *c, const cJSON *const *values, int n);

/* The node of any JSON value. */
int comp_any(comp *c);

/* ---- schema_merge.c */

/* The one schema that allOf's parts (alts, a non-empty array) mean together, owned by
 * c->owned; NULL with the failure recorded (parts that cannot be merged exactly). */
const cJSON *comp_merge_all_of(comp *c, const cJSON *alts);

/* ---- schema_compile.c and schema_types.c, which call each other as schemas nest */

/* The node of schema sch (an object or a boolean), compiled once however often it is
 * reached. */
int comp_schema(comp *c, const cJSON *sch);

/* The node of sch read as type (TY_*); memo_for, when not NULL, is recorded as its schema
 * before its parts are compiled (so they may refer back to it). */
int comp_typed(comp *c, const cJSON *sch, int type, const cJSON *memo_for);

#endif /* TESSERA_GRAMMAR_SCHEMA_COMP_H */
