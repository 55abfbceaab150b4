/* llama_slots.c: llama.cpp's GET /slots: one entry per engine sequence slot (max_seqs),
 * the busy ones first, from the counts the engine publishes after each step. */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "server/server_internal.h"

/* A busy slot's request, under llama.cpp's names. */
static bool add_busy(cJSON *o, const ts_slot_info *s)
{
    cJSON *next = cJSON_AddArrayToObject(o, "next_token"), *n = cJSON_CreateObject();
    bool ok = next && n && cJSON_AddItemToArray(next, n);
    if (!ok)
        cJSON_Delete(n);
    return ok && cJSON_AddNumberToObject(o, "id_task", (double)s->request_id) &&
           cJSON_AddNumberToObject(o, "index", s->index) &&
           cJSON_AddNumberToObject(o, "n_prompt_tokens", s->n_prompt) &&
           cJSON_AddNumberToObject(o, "n_prompt_tokens_processed", s->n_prompt_done) &&
           cJSON_AddNumberToObject(o, "n_prompt_tokens_cache", s->n_cached) &&
           cJSON_AddBoolToObject(n, "has_next_token", s->n_remain > 0) &&
           cJSON_AddNumberToObject(n, "n_remain", s->n_remain) &&
           cJSON_AddNumberToObject(n, "n_decoded", s->n_decoded);
}

/* The array of total slots, the first n_busy of them busy (busy[]). */
static cJSON *slots_json(const ts_slot_info *busy, int n_busy, int total, int n_ctx)
{
    cJSON *a = cJSON_CreateArray();
    bool ok = a != NULL;
    for (int i = 0; ok && i < total; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddNumberToObject(o, "id", i) &&
             cJSON_AddNumberToObject(o, "n_ctx", n_ctx) &&
             cJSON_AddBoolToObject(o, "is_processing", i < n_busy) &&
             (i >= n_busy || add_busy(o, &busy[i]));
        if (!ok || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            ok = false;
        }
    }
    if (!ok) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

/* GET /slots?model=NAME (the first model without one); ?fail_on_no_slot answers 503 when
 * every slot is busy, as llama.cpp does. 501 with --no-slots, as llama.cpp's without
 * --slots. */
enum MHD_Result routes_slots(struct MHD_Connection *mc, srv_conn *c)
{
    oai_error e;
    if (c->srv->opts.no_slots) {
        oai_error_set(&e, 501, NULL, "not_supported",
                      "this server does not serve the slots endpoint (started with --no-slots)");
        return srv_send_error(mc, c, &e);
    }
    const char *name = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "model");
    srv_model *m = srv_find_model(c->srv, name, &e);
    if (!m)
        return srv_send_error(mc, c, &e);
    int total = ts_engine_max_seqs(m->engine);
    ts_slot_info *busy = malloc((size_t)total * sizeof *busy);
    if (!busy) {
        oai_error_set(&e, 500, NULL, NULL, "out of memory");
        return srv_send_error(mc, c, &e);
    }
    int n_busy = ts_engine_get_slots(m->engine, busy, total);
    if (n_busy > total)
        n_busy = total;
    if (n_busy == total &&
        MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot")) {
        free(busy);
        oai_error_set(&e, 503, NULL, "unavailable", "no slot available");
        return srv_send_error(mc, c, &e);
    }
    int n_ctx = ts_model_get_config(ts_engine_get_model(m->engine))->context_len;
    cJSON *j = slots_json(busy, n_busy, total, n_ctx);
    free(busy);
    return srv_send_json(mc, c, 200, j);
}
