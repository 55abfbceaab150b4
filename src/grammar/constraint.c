/* constraint.c: a sequence's constraint over the JSON automata and the token trie. */
#include "grammar/constraint.h"

#include <string.h>

_Static_assert(sizeof(json_pda) <= TOKEN_TRIE_MAX_STATE, "json_pda must fit a trie walk");

void constraint_init(constraint *c, ts_constraint_kind kind, const ts_schema *schema)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    if (kind == TS_CONSTRAINT_JSON_SCHEMA) {
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

int constraint_allowed(const constraint *c, const token_trie *t, uint8_t *allowed)
{
    switch (c->kind) {
    case TS_CONSTRAINT_NONE:
        memset(allowed, 1, (size_t)t->vocab_size);
        return t->vocab_size;
    case TS_CONSTRAINT_JSON_SCHEMA:
        return token_trie_walk(t, schema_next, c->schema, &c->sch, sizeof c->sch, allowed);
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

bool constraint_advance(constraint *c, const char *bytes, size_t len)
{
    if (c->kind == TS_CONSTRAINT_NONE)
        return true;
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
    default: return json_pda_accepted(&c->json);
    }
}

bool constraint_can_end(const constraint *c)
{
    switch (c->kind) {
    case TS_CONSTRAINT_NONE: return true;
    case TS_CONSTRAINT_JSON_SCHEMA: return sch_can_end(c->schema, &c->sch);
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
    default: return json_pda_same(&a->json, &b->json);
    }
}
