/* chat_jinja.h: a model's Jinja chat template made ready to render chats: parsed once,
 * tried on a one-message chat, and given the model's BOS and EOS token texts, which
 * templates read as bos_token and eos_token. */
#ifndef TESSERA_TEMPLATE_CHAT_JINJA_H
#define TESSERA_TEMPLATE_CHAT_JINJA_H

#include <time.h>

#include <cjson/cJSON.h>

#include "tessera/status.h"
#include "tessera/tokenizer.h"
#include "template/jinja.h"

typedef struct chat_jinja {
    jinja_template *t; /* owned */
    char *bos, *eos;   /* owned; the tokens' texts ("<s>"), "" where the vocabulary has none */
} chat_jinja;

/* Parses src (len bytes, borrowed) and renders a one-user-message chat with it, so that a
 * template outside the supported subset or over a bound fails here, at load, with the
 * construct named, rather than on a request. tok (borrowed) gives bos/eos. A template
 * that raises for that chat (raise_exception) still loads. */
ts_status chat_jinja_init(chat_jinja *cj, const char *src, size_t len, const ts_tokenizer *tok,
                          ts_error *err);

/* Renders the chat in vars (a JSON object: messages, tools, add_generation_prompt and any
 * other variables; borrowed) with bos_token and eos_token added, now as strftime_now's
 * time, stopping when cancel (borrowed, may be NULL) is set. See jinja_render for the
 * errors. */
ts_status chat_jinja_render(const chat_jinja *cj, const cJSON *vars, time_t now,
                            const atomic_bool *cancel, char **out, ts_error *err);

/* Accepts a zeroed or freed one. */
void chat_jinja_free(chat_jinja *cj);

#endif /* TESSERA_TEMPLATE_CHAT_JINJA_H */
