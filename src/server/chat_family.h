/* chat_family.h: a chat request rendered by a built-in chat family (the fallback for
 * models without a usable Jinja template): its messages with their tool calls and tool
 * call ids, and its tools. */
#ifndef TESSERA_SERVER_CHAT_FAMILY_H
#define TESSERA_SERVER_CHAT_FAMILY_H

#include "server/openai.h"
#include "template/chat_template.h"

/* Renders chat request r (borrowed; parsed by oai_parse_request) in family kind into *out
 * (chat_rendering_free). TS_ERR_INVALID_ARG or TS_ERR_NOMEM with err saying why. */
ts_status chat_family_render(chat_template_kind kind, const oai_request *r,
                             chat_rendering *out, ts_error *err);

#endif /* TESSERA_SERVER_CHAT_FAMILY_H */
