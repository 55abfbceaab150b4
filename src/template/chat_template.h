/* chat_template.h: renders chat messages into prompt text in a model family's native
 * format, picked from the GGUF tokenizer.chat_template string by characteristic markers
 * (no Jinja interpreter). */
#ifndef TESSERA_TEMPLATE_CHAT_TEMPLATE_H
#define TESSERA_TEMPLATE_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/status.h"
#include "tessera/tokenizer.h"

typedef enum chat_template_kind {
    CHAT_TEMPLATE_PLAIN = 0, /* "System: ...\nUser: ...\nAssistant: ...\n" then "Assistant:" */
    CHAT_TEMPLATE_CHATML,    /* <|im_start|>role\n...<|im_end|>\n */
    CHAT_TEMPLATE_LLAMA2,    /* [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] */
    CHAT_TEMPLATE_LLAMA3,    /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    CHAT_TEMPLATE_MISTRAL,   /* [INST] ... [/INST]...</s> */
    CHAT_TEMPLATE_ZEPHYR,    /* <|role|>\n...</s>\n */
    CHAT_TEMPLATE_PHI3,      /* <|role|>\n...<|end|>\n */
    CHAT_TEMPLATE_GEMMA,     /* <start_of_turn>user\n...<end_of_turn>\n */
    CHAT_TEMPLATE_COUNT
} chat_template_kind;

struct cJSON;

typedef struct chat_message {
    const char *role;    /* "system", "user", "assistant" or "tool"; borrowed */
    const char *content; /* NUL-terminated UTF-8; borrowed */
    /* assistant: the calls it made as OpenAI writes them, [{"id", "type", "function":
     * {"name", "arguments"}}], with each arguments an object (the API's JSON string
     * parsed); NULL or empty for none. Borrowed. */
    const struct cJSON *tool_calls;
    const char *tool_call_id; /* tool: the id of the call it answers, or NULL; borrowed */
} chat_message;

/* The family a Jinja template string belongs to; PLAIN for NULL, "" or an unknown one. */
chat_template_kind chat_template_detect(const char *jinja);

/* The family called name ("plain", "chatml", "llama2", "llama3", "mistral", "zephyr",
 * "phi3", "gemma"); TS_ERR_NOT_FOUND (err lists the names) for any other. */
ts_status chat_template_from_name(const char *name, chat_template_kind *out, ts_error *err);

/* The family's name as chat_template_from_name() accepts it. */
const char *chat_template_name(chat_template_kind kind);

/* Whether the family has a tool-call format of its own (chatml as Qwen 2.5 and Hermes,
 * llama3 as Llama 3.1, mistral as Mistral Nemo): its renderings of tools, calls and
 * results are those models' templates', and its models' answers call tools in that
 * format. */
bool chat_template_has_tools(chat_template_kind kind);

/* Whether the format drops ASCII whitespace at the ends of messages, as its template does
 * (llama3 and gemma every message; llama2 a turn's text, so a user text after the system
 * block keeps its start). The others keep every message as sent. */
bool chat_template_trims(chat_template_kind kind);

/* A rendered conversation. */
typedef struct chat_rendering {
    char *text;            /* NUL-terminated UTF-8 */
    ts_text_span *content; /* where the messages' own text lies in it, in order: tokenize
                            * with these as ts_tokenize_opts.plain so the markup's special
                            * tokens ("<|im_start|>") count and the users' text cannot forge them */
    size_t n_content;
} chat_rendering;

/* Renders n messages (borrowed) followed by the opening of the assistant's turn into
 * *out, which the caller frees with chat_rendering_free. BOS is not part of the text:
 * tokenize it with add_special, which adds BOS where the vocabulary says to. Unknown roles
 * give TS_ERR_INVALID_ARG.
 * tools (borrowed; NULL or an empty array for none) is OpenAI's tools array. A chat with
 * tools, tool calls or tool results is rendered in the family's tool format (see
 * chat_template_has_tools); a family without one shows the tools, calls and results as
 * plain text in Qwen's words and Hermes' tags (<tools>, <tool_call>, <tool_response>),
 * results as user turns. Tool definitions, arguments and results are content: plain text
 * to the tokenizer. */
ts_status chat_template_render(chat_template_kind kind, const chat_message *msgs, size_t n,
                               const struct cJSON *tools, chat_rendering *out, ts_error *err);

/* Accepts a zeroed or freed rendering. */
void chat_rendering_free(chat_rendering *r);

#endif /* TESSERA_TEMPLATE_CHAT_TEMPLATE_H */
