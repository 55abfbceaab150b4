/* jinja.h: a small, sandboxed Jinja interpreter for the subset that chat templates use
 * (Hugging Face's way: trim_blocks, lstrip_blocks, loop controls). It knows nothing of
 * servers or models: a template is parsed once and rendered with variables from JSON. */
#ifndef TESSERA_TEMPLATE_JINJA_H
#define TESSERA_TEMPLATE_JINJA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "tessera/status.h"

typedef struct jinja_template jinja_template;

/* Bounds that keep an untrusted template from running away. Zero fields take the
 * defaults of jinja_limits_default. */
typedef struct jinja_limits {
    size_t max_source; /* template bytes (1 MiB) */
    size_t max_nodes;  /* syntax nodes (100000) */
    int max_depth;     /* nesting of statements and expressions, macro calls (64) */
    size_t max_steps;  /* evaluation steps per render (2000000) */
    size_t max_output; /* rendered bytes, and the longest string a render builds (4 MiB) */
    size_t max_memory; /* bytes of values a render may allocate (64 MiB) */
    /* Height of the syntax tree (256): every statement, expression and operator of a chain
     * (`x|f|f`, `a + b + c`, `a.b.c`) is a level. Rendering recurses along the tree, so this
     * bounds the C stack a template can take; a taller template is refused at parse. */
    int max_tree_depth;
    /* Evaluations nested while rendering, through macro calls too (2048): the C stack bound
     * at run time, where macros calling macros stack their trees. */
    int max_eval_depth;
    /* Units of work per render (256 Mi): one per step, per byte a string operation reads or
     * writes, per value a comparison, search or serialisation visits. Charged inside those
     * loops, so a few steps cannot hide a quadratic or unbounded amount of work. */
    size_t max_work;
} jinja_limits;

void jinja_limits_default(jinja_limits *l);

/* Parses src (len bytes, borrowed) into *out, which the caller frees with jinja_free.
 * Syntax errors give TS_ERR_FORMAT, a statement, filter, test or method outside the
 * supported subset TS_ERR_UNSUPPORTED, a template over a bound TS_ERR_TOO_LONG; each
 * message names the construct and its line and column. limits may be NULL. */
ts_status jinja_parse(jinja_template **out, const char *src, size_t len, const jinja_limits *limits,
                      ts_error *err);

/* Renders t with the members of the JSON object vars (borrowed) as its variables, now as
 * the time strftime_now formats (UTC). *out is a NUL-terminated string the caller frees.
 * raise_exception(msg) gives TS_ERR_INVALID_ARG with msg itself as the message; a bound
 * exceeded (work, bytes, depth, memory) gives TS_ERR_TOO_LONG; other errors (a type
 * error, an undefined value used) TS_ERR_INVALID_ARG with the line and column. cancel
 * (borrowed, may be NULL) is read as the render works: once another thread sets it, the
 * render stops within a unit of work with TS_ERR_CANCELLED. Thread-safe: t is only read. */
ts_status jinja_render(const jinja_template *t, const cJSON *vars, time_t now,
                       const atomic_bool *cancel, char **out, ts_error *err);

/* Accepts NULL. */
void jinja_free(jinja_template *t);

/* v (borrowed) as the tojson filter writes it (Python's json.dumps, non-ASCII kept):
 * ", " and ": " between items, or with indent >= 0 one item a line indented that many
 * spaces a level. A NUL-terminated string the caller frees; NULL when out of memory or
 * nested past 64. The built-in chat families write tools with it, so their JSON is the
 * Jinja templates'. Thread-safe. */
char *jinja_tojson(const cJSON *v, int indent);

#endif /* TESSERA_TEMPLATE_JINJA_H */
