/* jinja_internal.h: what the interpreter's files share: the arena, values, tokens, the
 * syntax tree and the render state. */
#ifndef TESSERA_TEMPLATE_JINJA_INTERNAL_H
#define TESSERA_TEMPLATE_JINJA_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "template/jinja.h"

/* ---- arena: every value and node lives in one, freed at once ---- */
typedef struct jinja_chunk jinja_chunk;
typedef struct jinja_arena {
    jinja_chunk *head;
    size_t used;  /* bytes handed out so far */
    size_t limit; /* allocation fails past this */
} jinja_arena;

/* Zeroed memory, or NULL past the limit or when out of memory. */
void *jinja_alloc(jinja_arena *a, size_t n);
void jinja_arena_free(jinja_arena *a);

/* ---- budget: what one render may spend, charged where the work is done ---- */
enum { JB_OK, JB_WORK, JB_BYTES, JB_CANCELLED };
typedef struct jv_budget {
    size_t work, max_work;     /* units spent and allowed (jinja_limits.max_work) */
    size_t max_bytes;          /* the longest string a render builds (max_output) */
    const atomic_bool *cancel; /* borrowed; when another thread sets it the render stops */
    int why;                   /* JB_*: why the budget ran out; once set it stays */
} jv_budget;

/* Units charged per value a comparison, search or serialisation visits: visiting a value
 * takes about as long as scanning this many bytes, so max_work bounds time either way. */
enum { JV_VISIT_UNITS = 8 };

/* Spends units of w; false once the work is spent or the render cancelled (w->why says). */
bool jv_charge(jv_budget *w, size_t units);
/* Whether a string of n bytes may be built; false (w->why = JB_BYTES) when longer. */
bool jv_fits(jv_budget *w, size_t n);

/* ---- values ---- */
typedef enum jv_type {
    JV_UNDEF = 0,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_MACRO,
    JV_FUNC
} jv_type;

typedef struct jv jv;
typedef struct jv_list {
    jv *items;
    size_t n, cap;
    bool tuple; /* a Python tuple: prints with parentheses, otherwise a list */
} jv_list;
typedef struct jv_dict {
    jv *keys, *vals; /* in insertion order, as Python's dicts keep them */
    size_t n, cap;
    bool ns; /* a namespace(): its attributes may be set */
} jv_dict;

struct jnode;
struct jinja_scope;
struct jv {
    jv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t n;
        } s;
        jv_list *l;
        jv_dict *d;
        struct {
            const struct jnode *node;
            struct jinja_scope *scope;
        } m;    /* macro, caller */
        int fn; /* a global function, JF_* */
    } u;
};

enum { JF_RANGE, JF_NAMESPACE, JF_RAISE, JF_STRFTIME, JF_DICT };

jv jv_str(const char *s, size_t n);
jv jv_int(int64_t i);
jv jv_bool(bool b);
bool jv_truthy(const jv *v);
/* A new empty list or dict, or a JV_UNDEF with .u.l NULL when out of memory. */
bool jv_new_list(jinja_arena *a, jv *out, size_t cap);
bool jv_new_dict(jinja_arena *a, jv *out, size_t cap);
bool jv_list_push(jinja_arena *a, jv_list *l, jv v);
/* The functions below that take a budget w charge it for every value they visit and byte
 * they compare or write, and stop (false, or "not equal") once it is spent: the caller
 * reads w->why to tell that from a real answer. */
bool jv_dict_set(jinja_arena *a, jv_budget *w, jv_dict *d, jv key, jv val);
/* The value under key, or NULL. */
jv *jv_dict_get(jv_budget *w, const jv_dict *d, const char *key, size_t n);
jv *jv_dict_find(jv_budget *w, const jv_dict *d, const jv *key);
bool jv_eq(jv_budget *w, const jv *a, const jv *b);
/* -1, 0 or 1; false when a and b cannot be ordered. fold: compare strings ASCII-lowercased. */
bool jv_cmp(jv_budget *w, const jv *a, const jv *b, bool fold, int *out);
/* Python's str(v) (repr inside lists and dicts); undefined is "". Stops past w->max_bytes. */
bool jv_to_str(jv_budget *w, strbuf *b, const jv *v);
/* json.dumps(v, indent, separators, sort_keys, ensure_ascii=False); indent < 0 = none.
 * item_sep / key_sep NULL take the defaults. False for a value JSON cannot hold, or past
 * w->max_bytes. */
bool jv_to_json(jv_budget *w, strbuf *b, const jv *v, int indent, const char *item_sep,
                const char *key_sep, bool sort_keys, int depth);
bool jv_from_json(jinja_arena *a, jv_budget *w, const cJSON *j, jv *out, int depth);
/* The string view of v if it is one. */
const char *jv_type_name(const jv *v);

/* ---- lexer ---- */
typedef enum jtok_type {
    JT_EOF,
    JT_TEXT,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP
} jtok_type;

typedef struct jtok {
    jtok_type t;
    const char *s; /* text, name, operator or the string literal's decoded bytes */
    size_t n;
    int64_t i;
    double f;
    int line, col;
} jtok;

/* Splits src into tokens (in the arena) with the whitespace control applied. */
ts_status jinja_lex(jinja_arena *a, const char *src, size_t len, jtok **out, size_t *n,
                    ts_error *err);

/* ---- syntax tree ---- */
typedef enum jnode_kind {
    /* statements */
    JN_BODY,
    JN_TEXT,
    JN_OUTPUT,
    JN_IF,
    JN_FOR,
    JN_SET,
    JN_SET_BLOCK,
    JN_MACRO,
    JN_CALL_BLOCK,
    JN_FILTER_BLOCK,
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_LIT,
    JN_NAME,
    JN_LIST,
    JN_DICT,
    JN_ATTR,
    JN_ITEM,
    JN_SLICE,
    JN_NEG,
    JN_POS,
    JN_NOT,
    JN_AND,
    JN_OR,
    JN_BIN,
    JN_COND,
    JN_FILTER,
    JN_TEST,
    JN_CALL,
    JN_KWARG
} jnode_kind;

typedef enum jop {
    JO_ADD,
    JO_SUB,
    JO_MUL,
    JO_DIV,
    JO_FLOORDIV,
    JO_MOD,
    JO_POW,
    JO_CONCAT,
    JO_EQ,
    JO_NE,
    JO_LT,
    JO_LE,
    JO_GT,
    JO_GE,
    JO_IN,
    JO_NOT_IN
} jop;

typedef struct jnode jnode;
struct jnode {
    jnode_kind k;
    int op; /* jop for JN_BIN; 1 = negated for JN_TEST */
    int line, col;
    jnode *a, *b, *c, *d; /* children: see the parser for each kind */
    jnode **kids;         /* a body's statements, a list's items, a call's arguments */
    size_t n;
    const char *name; /* a variable, attribute, filter, test or macro name */
    size_t name_n;
    const char **names; /* a for loop's targets, a macro's parameters */
    size_t n_names;
    jv lit;
};

struct jinja_template {
    jinja_arena arena;
    jnode *root;
    jinja_limits limits;
};

/* Whether a filter, test or method is in the supported subset (the parser rejects others). */
bool jinja_filter_known(const char *name, size_t n);
bool jinja_test_known(const char *name, size_t n);
bool jinja_method_known(const char *name, size_t n);

/* ---- evaluation: the render state ---- */
typedef struct jinja_scope {
    struct jinja_scope *parent;
    jv_dict vars;
} jinja_scope;

typedef struct jctx {
    jinja_arena *arena;
    const jinja_limits *lim;
    strbuf *out; /* where output goes now (macros and blocks capture theirs) */
    size_t steps;
    int depth; /* macro calls */
    int nest;  /* jinja_eval and jinja_exec frames on the C stack */
    time_t now;
    jv_budget w; /* work and string bytes, and the caller's cancel flag */
    int jump; /* JUMP_BREAK or JUMP_CONTINUE while unwinding a loop body */
    ts_error *err;
    ts_status st;      /* set with the first error */
    const jnode *hole; /* the {% filter %} placeholder being filled, and its text */
    jv hole_val;
} jctx;

enum { JUMP_NONE, JUMP_BREAK, JUMP_CONTINUE };

/* A filter, test or method applied to v with evaluated arguments: names[i] is NULL for a
 * positional one. */
typedef struct jargs {
    const jv *v;
    const char *const *names;
    const size_t *name_n;
    size_t n;
} jargs;

/* ---- jinja_ctx.c: helpers every part of the evaluator uses (calls only jinja_value.c) ---- */

/* Records the first error; returns false so callers can `return jinja_fail(...)`. */
bool jinja_fail(jctx *c, const jnode *at, ts_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Counts a step (and a unit of work); false (error recorded) past max_steps. */
bool jinja_step(jctx *c, const jnode *at);
/* Charges units of work; false (error recorded) once the budget is spent or cancelled. */
bool jinja_work(jctx *c, const jnode *at, size_t units);
/* Counts one more nested evaluation; false (error recorded) past max_eval_depth. The
 * caller decrements c->nest when it returns. */
bool jinja_nest(jctx *c, const jnode *at);
/* Records running out of the arena; returns false. */
bool jinja_oom(jctx *c, const jnode *at);
/* Appends to the current output, within max_output. */
bool jinja_emit(jctx *c, const jnode *at, const char *s, size_t n);
/* Copies b into the arena as a string value and frees b. */
bool jinja_make_str(jctx *c, const jnode *at, strbuf *b, jv *out);
jv *jinja_lookup(jctx *c, jinja_scope *s, const char *name, size_t n);
bool jinja_set_var(jctx *c, const jnode *at, jinja_scope *s, const char *name, jv v);
jinja_scope *jinja_new_scope(jctx *c, const jnode *at, jinja_scope *parent);
bool jinja_get_int(jctx *c, const jnode *at, const jv *v, int64_t *out);
/* Code points in s, and the byte offset of code point i (n when past the end). */
int64_t jinja_cp_count(const char *s, size_t n);
size_t jinja_cp_offset(const char *s, size_t n, int64_t i);
/* The argument called name or at position pos (NULL when absent). */
const jv *jargs_get(const jargs *a, size_t pos, const char *name);
/* v as a list: a list itself, a dict's keys, a string's characters, [] for undefined. */
bool jinja_as_list(jctx *c, const jnode *at, const jv *v, jv *out);
/* item.attr (attr dotted, "a.b", or an integer index), or item itself when attr is NULL. */
bool jinja_attr_of(jctx *c, const jnode *at, const jv *item, const jv *attr, jv *out);

/* ---- jinja_eval.c and jinja_exec.c: expressions and statements, each calling the other ---- */

bool jinja_eval(jctx *c, jinja_scope *s, const jnode *e, jv *out);
/* A call node, with caller (may be NULL) passed to a macro for {% call %}. */
bool jinja_eval_call(jctx *c, jinja_scope *s, const jnode *e, const jv *caller, jv *out);
/* Runs a body with its output captured as a string. */
bool jinja_capture(jctx *c, jinja_scope *s, const jnode *body, jv *out);

/* ---- jinja_filters.c, jinja_filters_seq.c, jinja_methods.c, jinja_ops.c: the built-ins ---- */

/* Filters in jinja_filters_seq.c, listed for jinja_filters.c's table. */
typedef bool (*filter_fn)(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,
                          jv *out);
#define JINJA_SEQ_FILTERS(X)                                                              \
    X(map) X(select) X(reject) X(selectattr) X(rejectattr) X(unique) X(sort) X(dictsort)  \
    X(batch) X(indent) X(sum) X(min) X(max)
#define JINJA_FILTER_DECL(name)                                                                    \
    bool jinja_f_##name(jctx *c, jinja_scope *s, const jnode *at, const jv *v, const jargs *a,     \
                        jv *out);
JINJA_SEQ_FILTERS(JINJA_FILTER_DECL)
#undef JINJA_FILTER_DECL

bool jinja_filter(jctx *c, jinja_scope *s, const jnode *at, const char *name, size_t n, const jv *v,
                  const jargs *args, jv *out);
bool jinja_test(jctx *c, const jnode *at, const char *name, size_t n, const jv *v,
                const jargs *args, bool *out);
bool jinja_method(jctx *c, const jnode *at, jv *self, const char *name, size_t n, const jargs *args,
                  jv *out);
bool jinja_global(jctx *c, const jnode *at, int fn, const jargs *args, jv *out);
/* Binary operator op (jop) on x and y. */
bool jinja_arith(jctx *c, const jnode *at, int op, const jv *x, const jv *y, jv *out);

#endif /* TESSERA_TEMPLATE_JINJA_INTERNAL_H */
