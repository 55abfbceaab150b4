/* chat_family.c: a chat request as the built-in chat families take it: each message's
 * role and joined text from the parsed request, its tool calls (arguments parsed) and
 * tool call id from the request's template variables, and the request's tools. */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "server/chat_family.h"

ts_status chat_family_render(chat_template_kind kind, const oai_request *r,
                             chat_rendering *out, ts_error *err)
{
    *out = (chat_rendering){0};
    chat_message *msgs = calloc(r->n_messages ? r->n_messages : 1, sizeof *msgs);
    if (!msgs)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* chat_vars holds the messages in order, as the request gave them */
    const cJSON *vm = cJSON_GetObjectItemCaseSensitive(r->chat_vars, "messages");
    const cJSON *m = vm ? vm->child : NULL;
    for (size_t i = 0; i < r->n_messages; i++, m = m ? m->next : NULL) {
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        msgs[i] = (chat_message){r->messages[i].role, r->messages[i].content,
                                 cJSON_IsArray(calls) ? calls : NULL,
                                 cJSON_IsString(id) ? id->valuestring : NULL};
    }
    ts_status st = chat_template_render(kind, msgs, r->n_messages, r->tools.defs, out, err);
    free(msgs);
    return st;
}
