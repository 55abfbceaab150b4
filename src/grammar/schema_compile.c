/* schema_compile.c: a JSON Schema's text into the node graph of schema.h (ts_schema). */
#include <stdlib.h>

#include "grammar/schema.h"

ts_status ts_schema_compile(const char *json, size_t len, ts_schema **out, char *path,
                            size_t path_size, ts_error *err)
{
    (void)json;
    (void)len;
    *out = NULL;
    if (path && path_size)
        path[0] = '\0';
    return ts_error_set(err, TS_ERR_UNSUPPORTED, "json_schema is not implemented yet");
}

ts_schema *ts_schema_retain(ts_schema *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void ts_schema_release(ts_schema *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (int i = 0; i < s->n_dfas; i++)
        schema__dfa_free(&s->dfas[i]);
    free(s->dfas);
    free(s->nodes);
    free(s->props);
    free(s->targets);
    free(s->lits);
    free(s->text);
    free(s);
}

void schema__dfa_free(sch_dfa *dfa)
{
    free(dfa->first);
    free(dfa->tr);
    free(dfa->feas);
}
