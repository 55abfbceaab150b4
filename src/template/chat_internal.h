/* chat_internal.h: what the built-in chat families' files share (chat_template.c renders
 * chats without tools, chat_tools.c chats with tools, calls or results, both with
 * chat_render.c's primitives): a rendering under way, its markup and its content. */
#ifndef TESSERA_TEMPLATE_CHAT_INTERNAL_H
#define TESSERA_TEMPLATE_CHAT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "template/chat_template.h"

/* The text so far, and the spans of it that are content (ts_text_span values, back to
 * back); either strbuf's `failed` means out of memory. */
typedef struct chat_render {
    strbuf text;
    strbuf spans;
} chat_render;

/* ---- chat_render.c: the primitives both renderers use ---- */

/* Appends markup: the NUL-terminated strings given, up to a NULL. */
void chat_template__markup(chat_render *out, ...);

/* Appends len bytes of content and records where they lie, less the ASCII whitespace at
 * their start (strip_lead) and end (strip_trail). Nothing is recorded for empty text. */
void chat_template__content(chat_render *out, const char *c, size_t len, bool strip_lead,
                            bool strip_trail);

/* Appends v (borrowed) as content, as the tojson filter writes it (indent < 0: one line);
 * false when out of memory or nested too deep. */
bool chat_template__json(chat_render *out, const cJSON *v, int indent);

/* chat_tools.c: renders a chat in tool mode for kind into out. A family without a tool
 * format gets rewritten messages (tools in the system text, calls in the assistant's,
 * results as user turns) rendered by render (chat_template.c's renderer without tools).
 * TS_ERR_NOMEM when out of memory. */
typedef void chat_plain_renderer(chat_render *out, chat_template_kind kind,
                                 const chat_message *m, size_t n);
ts_status chat_template__render_tools(chat_render *out, chat_template_kind kind,
                                      const chat_message *m, size_t n, const cJSON *tools,
                                      chat_plain_renderer *render);

#endif /* TESSERA_TEMPLATE_CHAT_INTERNAL_H */
