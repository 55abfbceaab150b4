/* schema.h: a JSON Schema compiled into an automaton over bytes (the body of ts_schema),
 * and the per-sequence state that walks it. Compiling (schema_compile.c, schema_regex.c,
 * schema_num.c) makes an immutable graph of schema nodes; a state (schema_run.c) is a
 * small set of paths, each a bounded stack of open containers plus the value being read,
 * copied freely (the token trie walk copies it per node). Knows nothing of tokens. */
#ifndef TESSERA_GRAMMAR_SCHEMA_H
#define TESSERA_GRAMMAR_SCHEMA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "grammar/json_pda.h"
#include "tessera/schema.h"

enum {
    SCH_MAX_DEPTH = 12,      /* open objects and arrays of schema nodes (a free JSON value
                              * below them nests up to JSON_PDA_MAX_DEPTH more) */
    SCH_MAX_PATHS = 16,      /* alternatives of anyOf/oneOf followed at once */
    SCH_MAX_INDENT = 20,     /* whitespace between JSON tokens is nothing, one space, or a
                              * newline and at most this many spaces or tabs */
    SCH_MAX_NODES = 8192,    /* schema nodes of one schema */
    SCH_MAX_PROPS = 255,     /* properties of one object */
    SCH_MAX_KEY = 250,       /* bytes of a property name as JSON text, quotes included */
    SCH_NUM_FRAC = 6,        /* fraction digits a number may have */
    SCH_NEED_NEVER = 0xFFFF, /* sch_node.need of a schema no value satisfies */
    SCH_MAX_MEM = 16,        /* values remembered by one path: the keys written under
                              * additionalProperties and the items of uniqueItems arrays
                              * in its open containers */
    SCH_MAX_FREE = 8,        /* keys one object writes under additionalProperties */
    SCH_MAX_UNIQUE = 12,     /* items of one uniqueItems array */
    SCH_NO_NODE = 0xFFFF,    /* sch_node.u.obj.extra of an object without extra keys */
};

typedef enum sch_kind {
    SCH_ANY,        /* any JSON value (json_pda, any value at its root) */
    SCH_ANY_OBJECT, /* any JSON object (json_pda) */
    SCH_OBJECT,     /* declared properties in schema order */
    SCH_ARRAY,      /* items of one schema, min..max of them */
    SCH_STRING,     /* length bounds (code points) and an optional pattern DFA */
    SCH_NUMBER,     /* integer or number between scaled bounds, no exponent */
    SCH_LITERAL,    /* one of a set of JSON texts: enum, const, boolean, null */
    SCH_UNION,      /* anyOf, oneOf, a type array: one of its targets */
    SCH_NEVER,      /* the false schema */
} sch_kind;

typedef struct sch_prop {
    uint32_t key;   /* offset in ts_schema.text: the name as a JSON string, quotes included */
    uint8_t key_len;
    bool required;
    uint16_t node;
    uint32_t hash; /* schema__value_hash of the name as a string */
} sch_prop;

typedef struct sch_node {
    uint8_t kind;  /* sch_kind */
    uint8_t mem;   /* values a path remembers for an instance at least (sch_path.mem) */
    uint16_t need; /* open containers an instance needs at least, SCH_NEED_NEVER: none */
    union {
        struct { uint32_t first; uint16_t n;                 /* props[first .. first+n) */
                 uint16_t extra, key;     /* additionalProperties: the values' node and
                                           * the keys' string node, SCH_NO_NODE: none */
                 uint16_t min, max; } obj; /* minProperties, maxProperties (saturated) */
        struct { uint16_t items; uint32_t min, max;          /* max UINT32_MAX: unbounded */
                 uint32_t prefix; uint16_t n_prefix;          /* item i < n_prefix is under
                                                               * targets[prefix + i], the
                                                               * rest under items */
                 uint8_t unique; } arr;                       /* uniqueItems */
        struct { uint32_t min, max; int32_t dfa;             /* dfa -1: no pattern */
                 uint32_t excl; uint16_t n_excl; } str;       /* not: hashes[excl ..
                                                               * excl+n_excl) excluded */
        struct { int64_t lo, hi; uint8_t frac, int_digits; } num; /* value * 10^frac in
                                                               * [lo, hi]; frac 0: integer */
        struct { uint32_t root; } lit;                       /* a lit_node */
        struct { uint32_t first; uint16_t n; } uni;          /* targets[first .. first+n) */
    } u;
} sch_node;

/* A node of the literal trie: the texts of an enum share one root. */
typedef struct sch_lit {
    int32_t child, sibling; /* -1 for none */
    uint8_t byte;           /* on the edge into this node */
    bool terminal;          /* a whole text ends here */
    uint32_t hash;          /* terminal: schema__value_hash of its value */
} sch_lit;

/* A pattern's DFA over code points, with what lengths each state can still end in. */
typedef struct sch_dfa_tr {
    uint32_t lo, hi; /* code points */
    uint16_t to;
} sch_dfa_tr;

typedef struct sch_dfa {
    int n_states;
    uint32_t *first;   /* (n_states + 1) transitions of state s: tr[first[s] .. first[s+1]) */
    sch_dfa_tr *tr;    /* sorted by lo within a state, disjoint */
    uint32_t k_max;    /* feas covers lengths 0..k_max */
    uint32_t words;    /* 64-bit words per state in feas */
    uint64_t *feas;    /* (n_states * words) bit k of state s: an accepting state is
                        * reachable from s in exactly k more code points */
} sch_dfa;

struct ts_schema {
    atomic_int refs;
    int root;
    sch_node *nodes;   /* (n_nodes) */
    int n_nodes, cap_nodes;
    sch_prop *props;   /* (n_props) */
    int n_props, cap_props;
    uint16_t *targets; /* (n_targets) the non-union nodes of each union, flattened, and
                        * the prefixItems of arrays */
    int n_targets, cap_targets;
    sch_lit *lits;     /* (n_lits) */
    int n_lits, cap_lits;
    sch_dfa *dfas;     /* (n_dfas) */
    int n_dfas, cap_dfas;
    char *text;        /* (n_text) property names as JSON strings */
    size_t n_text, cap_text;
    uint32_t *hashes;  /* (n_hashes) values excluded by `not`, as schema__value_hash */
    int n_hashes, cap_hashes;
    uint32_t *shortest; /* (n_nodes) bytes of each node's shortest compact value,
                         * SCH_COST_NEVER: none (schema_close.c) */
};

/* ---- values compared by hash (uniqueItems, not, keys under additionalProperties) */

/* FNV-1a of n bytes, continuing from h (start from SCH_HASH_SEED). */
#define SCH_HASH_SEED 2166136261u
uint32_t schema__hash_bytes(uint32_t h, const void *bytes, size_t n);

/* A string value's hash: the seed, 's', then its UTF-8 bytes (unescaped), so every
 * spelling of one string hashes alike. */
#define SCH_HASH_STRING (SCH_HASH_SEED ^ 's') * 16777619u

/* The hash of a number whose value is mag / 10^frac (neg: negative): equal values hash
 * alike whatever their spelling. */
uint32_t schema__number_hash(uint64_t mag, int frac, bool neg);

/* The hash of a JSON value as the above give it for strings and numbers (others: their
 * compact text). */
uint32_t schema__value_hash(const cJSON *v);

/* ---- compiling (schema_regex.c, schema_num.c) */

/* Compiles pattern (len bytes, borrowed; the subset of docs/API.md) into dfa, with lengths
 * feasible in [min_len, max_len] code points (max_len UINT32_MAX: unbounded). On failure
 * msg (msg_size bytes) says why: TS_ERR_UNSUPPORTED, TS_ERR_INVALID_ARG, TS_ERR_TOO_LONG. */
ts_status schema__regex_compile(const char *pattern, size_t len, uint32_t min_len,
                                uint32_t max_len, sch_dfa *dfa, char *msg, size_t msg_size);
void schema__dfa_free(sch_dfa *dfa);

/* The node item i of array node a is under (prefixItems, then items). */
static inline int schema__item_node(const ts_schema *s, const sch_node *a, uint32_t i)
{
    return i < a->u.arr.n_prefix ? s->targets[a->u.arr.prefix + i] : a->u.arr.items;
}

/* The state after code point cp from state s, -1 for none. */
int schema__dfa_next(const sch_dfa *d, int s, uint32_t cp);

/* True when from state s, with count code points read, the string can end within
 * [min, max] code points (max UINT32_MAX: unbounded). */
bool schema__dfa_feasible(const sch_dfa *d, int s, uint32_t count, uint32_t min,
                          uint32_t max);

/* True when some code point in [lo, hi] leads from s to a state that is feasible with
 * count code points read. */
bool schema__dfa_any(const sch_dfa *d, int s, uint32_t lo, uint32_t hi, uint32_t count,
                     uint32_t min, uint32_t max);

/* The regex of a supported string format ("date", "uuid", ...), or NULL. */
const char *schema__format_pattern(const char *format);

/* Fills a number node's scaled bounds from the schema's bounds (each NULL when absent;
 * exclusive ones are strict), and in *lo, *hi the inclusive double bounds they mean (a
 * double v meets them when *lo <= v <= *hi). False when no value the node can write lies
 * between them. */
bool schema__number_bounds(sch_node *n, bool integer, const double *min, const double *max,
                           const double *xmin, const double *xmax, double *lo, double *hi);

struct sch_leaf;
/* The number being read in leaf l (of node n): its first byte, a next byte (false, l
 * unchanged, when c cannot continue it within the bounds), and whether it may end here. */
bool schema__num_start(const sch_node *n, struct sch_leaf *l, uint8_t c);
bool schema__num_step(const sch_node *n, struct sch_leaf *l, uint8_t c);
bool schema__num_can_end(const sch_node *n, const struct sch_leaf *l);

/* ---- the state */

typedef enum sch_leaf_kind {
    LEAF_NONE,    /* no value being read: the top container (or the finished root) drives */
    LEAF_START,   /* before the first byte of a value of node (never a union) */
    LEAF_STRING,
    LEAF_NUMBER,
    LEAF_LITERAL,
    LEAF_ANY,     /* a free JSON value in json_pda */
} sch_leaf_kind;

typedef struct sch_leaf {
    uint8_t kind;  /* sch_leaf_kind */
    uint8_t hashed; /* a string whose hash is kept (something compares it) */
    uint16_t node;
    union {
        struct {
            uint32_t count;  /* code points read */
            uint32_t hash;   /* of the code points read, from SCH_HASH_STRING */
            uint32_t lo, hi; /* a partial UTF-8 character: the code points it may still be */
            uint16_t dfa;    /* the pattern's state */
            uint8_t more;    /* continuation bytes still to come */
            uint8_t esc;     /* after a backslash */
        } str;
        struct {
            uint64_t mag;    /* |value| * 10^frac so far */
            uint8_t phase;   /* schema_num.c's num_phase */
            uint8_t digits;  /* integer digits read */
            uint8_t fd;      /* fraction digits read */
            bool neg;
        } num;
        uint32_t lit;        /* the sch_lit reached */
        json_pda any;
    } u;
} sch_leaf;

/* What an open container expects next (sch_frame.phase). */
typedef enum frame_phase {
    F_OBJ_FIRST, /* after '{': a name or '}' */
    F_OBJ_NEXT,  /* after ',': a name */
    F_OBJ_KEY,   /* inside a name (frame.key, frame.pos) */
    F_OBJ_COLON, /* after a name: ':' */
    F_AFTER,     /* after a value: ',' or the closer */
    F_ARR_FIRST, /* after '[': a value or ']' */
    F_OBJ_FREE,  /* inside a key under additionalProperties (read as the path's leaf) */
} frame_phase;

enum { KEY_FREE = 0xFFFF }; /* sch_frame.key of a key under additionalProperties */

/* An open object or array. */
typedef struct sch_frame {
    uint16_t node;
    uint16_t count; /* object: the next property that may come; array: items begun
                     * (saturating) */
    uint16_t key;   /* object: the property whose name is being read */
    uint8_t pos;    /* object: bytes of that name read */
    uint8_t phase;  /* frame_phase */
    uint16_t written; /* object: properties written (saturating) */
} sch_frame;

typedef struct sch_path {
    uint8_t depth; /* open frames */
    uint8_t ws;    /* whitespace read since the last token: 0 none, 1 a space, 2 + n a
                    * newline and n spaces or tabs */
    uint8_t n_mem;  /* values in mem */
    uint8_t pad;
    sch_leaf leaf;
    sch_frame frame[SCH_MAX_DEPTH]; /* (depth) bottom first; the rest zeroed */
    uint32_t mem[SCH_MAX_MEM]; /* (n_mem) the keys and unique items written in the open
                                * containers: the container's depth (1 for the bottom
                                * frame) in the top 8 bits, the value's hash in the low
                                * 24; the rest zeroed */
} sch_path;

/* The whole state: a plain value. Only offsetof(path) + n * sizeof(sch_path) bytes are
 * live; sch_step writes only those. */
typedef struct sch_state {
    uint8_t n; /* paths alive; 0: nothing can follow */
    uint8_t pad[7];
    sch_path path[SCH_MAX_PATHS];
} sch_state;

/* The live bytes of st. */
size_t sch_state_size(const sch_state *st);

/* The state before the first byte. s is borrowed and must outlive every state of it. */
void sch_init(sch_state *st, const ts_schema *s);

/* to = from advanced by byte c; false when c cannot come next (to is then garbage).
 * from and to must not overlap. */
bool sch_step(const ts_schema *s, const sch_state *from, uint8_t c, sch_state *to);

/* True when the text so far is a complete value (a number may still go on). */
bool sch_can_end(const ts_schema *s, const sch_state *st);

/* True when the text is complete and no byte may follow. */
bool sch_done(const ts_schema *s, const sch_state *st);

/* True when a and b allow exactly the same continuations (fields that cannot change what
 * follows are ignored): a mask computed for one serves the other. */
bool sch_same(const ts_schema *s, const sch_state *a, const sch_state *b);

/* ---- closing within a budget (schema_close.c) */

enum { SCH_COST_NEVER = 0x00FFFFFF }; /* no completion known */

/* Fills s->shortest (the passes call it once the graph is final); TS_ERR_NOMEM. */
ts_status schema__shortest_lengths(ts_schema *s);

/* Bytes of a short text that completes a value from st (0: st can end as it is): never
 * below the shortest, and reachable byte by byte, each byte taking one off, so a mask that
 * keeps the cost within the bytes left always closes. SCH_COST_NEVER when unknown. */
uint32_t sch_close_cost(const ts_schema *s, const sch_state *st);

/* For schema_close.c: whether p's leaf is checked by hash (not, uniqueItems, keys
 * beyond properties), and whether its value, complete as it is, would be allowed. */
bool schema__leaf_checked(const ts_schema *s, const sch_path *p);
bool schema__leaf_allowed(const ts_schema *s, const sch_path *p);

/* Reads code point cp into string leaf l (its pattern state, count and hash); false (l
 * then garbage) when the pattern or maxLength refuses it. */
bool schema__str_char(const ts_schema *s, sch_leaf *l, uint32_t cp);

#endif /* TESSERA_GRAMMAR_SCHEMA_H */
