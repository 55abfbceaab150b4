/* constraint.c: a sequence's constraint over the JSON automaton and the token trie. */
#include "grammar/constraint.h"

#include <string.h>

_Static_assert(sizeof(json_pda) <= TOKEN_TRIE_MAX_STATE, "json_pda must fit a trie walk");

void constraint_init(constraint *c, ts_constraint_kind kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    json_pda_init(&c->json);
}

static bool json_step(void *state, uint8_t byte)
{
    return json_pda_step(state, byte);
}

int constraint_allowed(const constraint *c, const token_trie *t, uint8_t *allowed)
{
    if (c->kind == TS_CONSTRAINT_NONE) {
        memset(allowed, 1, (size_t)t->vocab_size);
        return t->vocab_size;
    }
    return token_trie_allowed(t, json_step, &c->json, sizeof c->json, allowed);
}

bool constraint_advance(constraint *c, const char *bytes, size_t len)
{
    if (c->kind == TS_CONSTRAINT_NONE)
        return true;
    json_pda p = c->json;
    for (size_t i = 0; i < len; i++)
        if (!json_pda_step(&p, (uint8_t)bytes[i]))
            return false;
    c->json = p;
    return true;
}

bool constraint_done(const constraint *c)
{
    return c->kind != TS_CONSTRAINT_NONE && json_pda_accepted(&c->json);
}

bool constraint_same(const constraint *a, const constraint *b)
{
    return a->kind == b->kind &&
           (a->kind == TS_CONSTRAINT_NONE || json_pda_same(&a->json, &b->json));
}
