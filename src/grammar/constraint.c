/* constraint.c: a sequence's constraint over the JSON automata and the token trie. */
#include "grammar/constraint.h"

#include <string.h>

_Static_assert(sizeof(json_pda) <= TOKEN_TRIE_MAX_STATE, "json_pda must fit a trie walk");

void constraint_init(constraint *c, ts_constraint_kind kind, const ts_schema *schema,
                     const ts_grammar *grammar)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    if (kind == TS_CONSTRAINT_GRAMMAR) {
        c->grammar = grammar;
        gr_init(&c->gr, grammar);
    } else if (kind == TS_CONSTRAINT_JSON_SCHEMA) {
        c->schema = schema;
        sch_init(&c->sch, schema);
    } else {
        json_pda_init(&c->json);
    }
}

static bool json_step(void *state, uint8_t byte)
{
    return json_pda_step(state, byte);
}

static bool schema_next(const void *ctx, const void *from, uint8_t byte, void *to)
{
    return sch_step(ctx, from, byte, to);
}

/* A grammar's trie walk: the work of its steps is summed, and past GR_MAX_MASK_WORK
 * every byte is refused and the walk reported as too costly. */
typedef struct grammar_walk {
    const ts_grammar *g;
    uint32_t work;
    bool over;
} grammar_walk;

static bool grammar_next(const void *ctx, const void *from, uint8_t byte, void *to)
{
    grammar_walk *w = (grammar_walk *)ctx; /* the walk's own, passed through the trie */
    if (w->over)
        return false;
    bool ok = gr_step_work(w->g, from, byte, to, &w->work);
    w->over = w->work > GR_MAX_MASK_WORK;
    return ok && !w->over;
}

static uint32_t grammar_cost(const void *ctx, const void *state)
{
    return gr_cost(((const grammar_walk *)ctx)->g, state);
}

/* The grammar's mask within limit (UINT32_MAX: none). */
static int grammar_allowed(const constraint *c, const token_trie *t, uint32_t limit,
                           uint8_t *allowed, uint32_t *max_cost)
{
    grammar_walk w = {c->grammar, 0, false};
    int n = token_trie_walk_within(t, grammar_next, limit == UINT32_MAX ? NULL : grammar_cost,
                                   &w, &c->gr, sizeof c->gr, limit, allowed, max_cost);
    if (n >= 0 && w.over) {
        memset(allowed, 0, (size_t)t->vocab_size);
        return CONSTRAINT_TOO_COSTLY;
    }
    return n;
}

int constraint_allowed(const constraint *c, const token_trie *t, uint8_t *allowed)
{
    switch (c->kind) {
    case TS_CONSTRAINT_NONE:
        memset(allowed, 1, (size_t)t->vocab_size);
        return t->vocab_size;
    case TS_CONSTRAINT_JSON_SCHEMA:
        return token_trie_walk(t, schema_next, c->schema, &c->sch, sizeof c->sch, allowed);
    case TS_CONSTRAINT_GRAMMAR: {
        uint32_t max_cost;
        return grammar_allowed(c, t, UINT32_MAX, allowed, &max_cost);
    }
    default: return token_trie_allowed(t, json_step, &c->json, sizeof c->json, allowed);
    }
}

static bool schema_advance(constraint *c, const char *bytes, size_t len)
{
    sch_state buf[2];
    const sch_state *at = &c->sch;
    for (size_t i = 0; i < len; i++) {
        sch_state *next = &buf[i & 1];
        if (!sch_step(c->schema, at, (uint8_t)bytes[i], next))
            return false;
        at = next;
    }
    if (at != &c->sch)
        memcpy(&c->sch, at, sch_state_size(at));
    return true;
}

static bool grammar_advance(constraint *c, const char *bytes, size_t len)
{
    gr_state buf[2];
    const gr_state *at = &c->gr;
    for (size_t i = 0; i < len; i++) {
        gr_state *next = &buf[i & 1];
        if (!gr_step(c->grammar, at, (uint8_t)bytes[i], next))
            return false;
        at = next;
    }
    if (at != &c->gr)
        memcpy(&c->gr, at, gr_state_size(at));
    return true;
}

bool constraint_advance(constraint *c, const char *bytes, size_t len)
{
    if (c->kind == TS_CONSTRAINT_NONE)
        return true;
    if (c->kind == TS_CONSTRAINT_GRAMMAR)
        return grammar_advance(c, bytes, len);
    if (c->kind == TS_CONSTRAINT_JSON_SCHEMA)
        return schema_advance(c, bytes, len);
    json_pda p = c->json;
    for (size_t i = 0; i < len; i++)
        if (!json_pda_step(&p, (uint8_t)bytes[i]))
            return false;
    c->json = p;
    return true;
}

bool constraint_done(const constraint *c)
{
    switch (c->kind) {
    case TS_CONSTRAINT_NONE: return false;
    case TS_CONSTRAINT_JSON_SCHEMA: return sch_done(c->schema, &c->sch);
    case TS_CONSTRAINT_GRAMMAR: return gr_done(&c->gr);
    default: return json_pda_accepted(&c->json);
    }
}

bool constraint_can_end(const constraint *c)
{
    switch (c->kind) {
    case TS_CONSTRAINT_NONE: return true;
    case TS_CONSTRAINT_JSON_SCHEMA: return sch_can_end(c->schema, &c->sch);
    case TS_CONSTRAINT_GRAMMAR: return gr_can_end(&c->gr);
    default: return json_pda_accepted(&c->json);
    }
}

bool constraint_same(const constraint *a, const constraint *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case TS_CONSTRAINT_NONE: return true;
    case TS_CONSTRAINT_JSON_SCHEMA:
        return a->schema == b->schema && sch_same(a->schema, &a->sch, &b->sch);
    case TS_CONSTRAINT_GRAMMAR: return a->grammar == b->grammar && gr_same(&a->gr, &b->gr);
    default: return json_pda_same(&a->json, &b->json);
    }
}

bool constraint_closes(const constraint *c)
{
    return c->kind == TS_CONSTRAINT_GRAMMAR || c->kind == TS_CONSTRAINT_JSON_OBJECT ||
           c->kind == TS_CONSTRAINT_JSON_SCHEMA;
}

uint32_t constraint_close_cost(const constraint *c)
{
    switch (c->kind) {
    case TS_CONSTRAINT_GRAMMAR: return gr_cost(c->grammar, &c->gr);
    case TS_CONSTRAINT_JSON_OBJECT: return (uint32_t)json_pda_close_cost(&c->json);
    case TS_CONSTRAINT_JSON_SCHEMA: return sch_close_cost(c->schema, &c->sch);
    default: return 0;
    }
}

static bool json_next(const void *ctx, const void *from, uint8_t byte, void *to)
{
    (void)ctx;
    memcpy(to, from, sizeof(json_pda));
    return json_pda_step(to, byte);
}

static uint32_t json_cost(const void *ctx, const void *state)
{
    (void)ctx;
    return (uint32_t)json_pda_close_cost(state);
}

static uint32_t schema_cost(const void *ctx, const void *state)
{
    return sch_close_cost(ctx, state);
}

int constraint_allowed_within(const constraint *c, const token_trie *t, uint32_t limit,
                              uint8_t *allowed, uint32_t *max_cost)
{
    switch (c->kind) {
    case TS_CONSTRAINT_GRAMMAR: return grammar_allowed(c, t, limit, allowed, max_cost);
    case TS_CONSTRAINT_JSON_OBJECT:
        return token_trie_walk_within(t, json_next, json_cost, NULL, &c->json, sizeof c->json,
                                      limit, allowed, max_cost);
    case TS_CONSTRAINT_JSON_SCHEMA:
        return token_trie_walk_within(t, schema_next, limit == UINT32_MAX ? NULL : schema_cost,
                                      c->schema, &c->sch, sizeof c->sch, limit, allowed,
                                      max_cost);
    default:
        *max_cost = 0;
        return constraint_allowed(c, t, allowed);
    }
}
