/* slots.c: the engine's sequence slots for callers (llama.cpp's GET /slots): a copy of each
 * running sequence's counts, written by the step thread at the end of a step and read
 * under the same lock as the stats. */
#include <pthread.h>

#include "engine/slots.h"

void engine_publish_slots_locked(ts_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->step.n_running && n < e->opts.max_seqs; i++) {
        const seq *s = e->step.running[i];
        if (s->done)
            continue;
        const ts_request *r = s->job->req;
        int done = s->n_computed < r->n_prompt ? s->n_computed : r->n_prompt;
        e->shared.slots[n++] = (ts_slot_info){
            .request_id = r->id,
            .index = s->index,
            .n_prompt = r->n_prompt,
            .n_prompt_done = done,
            .n_cached = s->job->cached_tokens,
            .n_decoded = s->n_generated,
            .n_remain = r->max_tokens > s->n_generated ? r->max_tokens - s->n_generated : 0,
        };
    }
    e->shared.n_slots = n;
}

int ts_engine_max_seqs(const ts_engine *e)
{
    return e->opts.max_seqs;
}

int ts_engine_get_slots(ts_engine *e, ts_slot_info *out, int cap)
{
    pthread_mutex_lock(&e->mu);
    int n = e->shared.n_slots;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = e->shared.slots[i];
    pthread_mutex_unlock(&e->mu);
    return n;
}
