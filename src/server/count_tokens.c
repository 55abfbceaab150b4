/* count_tokens.c: Anthropic's POST /v1/messages/count_tokens: a Messages body rendered
 * through the model's chat template exactly as /v1/messages renders it, answered with
 * the prompt's length, {"input_tokens": n}. Nothing is generated. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/budget.h"
#include "server/server_internal.h"

/* The body's JSON tree while it is read, as complete.c counts it. */
enum { COUNT_PARSE_BYTES_PER_BYTE = 40 };

enum MHD_Result count_tokens_route(struct MHD_Connection *mc, srv_conn *c)
{
    ts_server *srv = c->srv;
    oai_error e;
    size_t parse_bytes = c->body.len * COUNT_PARSE_BYTES_PER_BYTE;
    if (budget_reserve(&srv->answer_bytes, &c->held, parse_bytes, 0,
                       srv->opts.max_answers_total) != BUDGET_OK) {
        budget_busy_error(&e, srv->opts.max_answers_total);
        return srv_send_error(mc, c, &e);
    }
    oai_request r;
    ts_status st = api_parse_count_tokens(c->body.s, c->body.len, &r, &e);
    budget_give_back(&srv->answer_bytes, &c->held, parse_bytes);
    if (st != TS_OK)
        return srv_send_error(mc, c, &e);
    memcpy(c->ignored, r.ignored, sizeof c->ignored);
    srv_model *m = srv_find_model(srv, r.model, &e);
    int32_t *ids = NULL;
    size_t n = 0;
    if (m) {
        c->model = m->name;
        const ts_tokenizer *tok = ts_model_get_tokenizer(ts_engine_get_model(m->engine));
        st = prompt_tokens(&r, m, tok, &ids, &n, &e);
    }
    oai_request_clear(&r);
    free(ids);
    if (!m || st != TS_OK) {
        api_error_rename(API_MESSAGES, &e);
        return srv_send_error(mc, c, &e);
    }
    c->prompt_tokens = (int)n;
    cJSON *j = cJSON_CreateObject();
    if (j && !cJSON_AddNumberToObject(j, "input_tokens", (double)n)) {
        cJSON_Delete(j);
        j = NULL;
    }
    return srv_send_json(mc, c, 200, j);
}
