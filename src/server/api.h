/* api.h: OpenAI's Responses API (POST /v1/responses) and Anthropic's Messages
 * API (POST /v1/messages) over the chat completions path: a request body is
 * translated into a chat body and parsed as one, and the answer (whole or
 * streamed) is written back in the API's own shape. Model-free, so everything
 * can be tested without a model. */
#ifndef TESSERA_SERVER_API_H
#define TESSERA_SERVER_API_H

#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"
#include "server/openai.h"

/* The shape a completion request comes in and is answered in. */
typedef enum api_kind {
    API_CHAT,      /* /v1/chat/completions and /v1/completions (openai.h's shapes) */
    API_RESPONSES, /* OpenAI's Responses API, stateless */
    API_MESSAGES,  /* Anthropic's Messages API */
    API_LLAMA,     /* llama.cpp's native /completion, over text completions */
} api_kind;

/* Parses a Responses or Messages body (len bytes, borrowed) into *out as the
 * chat request it stands for (out->kind OAI_CHAT, n 1); a /completion body
 * (API_LLAMA) into the text completion it stands for (OAI_COMPLETION). A field of the wrong
 * shape or a feature tessera does not have (previous_response_id, store: true,
 * images, hosted tools) gives 400 naming the API's own field; unknown top-level
 * fields are listed in out->ignored. On failure *out is left cleared. */
ts_status api_parse_request(api_kind k, const char *body, size_t len, oai_request *out,
                            oai_error *err);

/* A body of Anthropic's POST /v1/messages/count_tokens: a Messages body whose
 * max_tokens may be left out; the chat request it stands for, as above. */
ts_status api_parse_count_tokens(const char *body, size_t len, oai_request *out,
                                 oai_error *err);

/* Renames what an error about the chat request says (param and message) to the API's own
 * fields: response_format.json_schema.schema -> text.format.schema, max_tokens ->
 * max_output_tokens, tools[i].function.name -> tools[i].name, stop -> stop_sequences, ...
 * Nothing for API_CHAT. */
void api_error_rename(api_kind k, oai_error *e);

/* The error body in the API's shape (Messages: {"type": "error", "error":
 * {"type", "message"}}; else OpenAI's); malloc'd, NULL when out of memory. */
char *api_error_json(api_kind k, const oai_error *e);

/* One answer of a Responses or Messages request; every pointer borrowed. */
typedef struct api_answer {
    const oai_meta *meta; /* id ("resp_..." or "msg_..."), created, model */
    const char *text;     /* (text_len) valid UTF-8, may be empty */
    size_t text_len;
    const char *finish;         /* chat's finish_reason: "stop", "length", "tool_calls",
                       * "cancelled" */
    const oai_tool_call *calls; /* (n_calls) */
    size_t n_calls;
    oai_usage usage;
    const char *stop_sequence; /* the stop string that ended the answer, or NULL */
    const oai_token_logprob *logprobs; /* (n_logprobs) when asked for, else NULL */
    size_t n_logprobs;
    const oai_request *req;   /* API_LLAMA: the request as it ran (generation_settings);
                               * NULL leaves the settings out */
    const char *prompt;       /* API_LLAMA: the prompt's text (prompt_len), or NULL */
    size_t prompt_len;
} api_answer;

/* The whole answer as the API writes it: a Responses "response" object or an
 * Anthropic "message"; malloc'd, NULL when out of memory. */
char *api_answer_json(api_kind k, const api_answer *a);

/* A streamed answer's state: which output item (Responses) or content block
 * (Messages) is open. */
typedef struct api_stream {
    api_kind kind;
    const oai_meta *meta; /* borrowed; outlives the stream */
    int seq;              /* Responses: the next event's sequence_number */
    int n_items;          /* output items / content blocks opened so far */
    int text_item;        /* the open text item or block, -1 for none */
    size_t item_start;    /* where the open text item's text starts in text */
    strbuf text;          /* the answer's text so far */
    int prompt_tokens;    /* the prompt's length, known before the answer (Messages:
                           * message_start's usage.input_tokens); 0: not known */
} api_stream;

/* Each appends its Server-Sent Events ("event: NAME\ndata: JSON\n\n") to out
 * and returns false when out of memory. begin: the opening events; text: a
 * piece of the answer's text (opens a text item when none is open); call: a
 * complete tool call (closes the open text item); end: closes what is open and
 * writes the final events (a->text is ignored: the streamed text is used);
 * error: an error event. */
void api_stream_init(api_stream *s, api_kind k, const oai_meta *meta);
void api_stream_free(api_stream *s);
bool api_stream_begin(api_stream *s, strbuf *out);
bool api_stream_text(api_stream *s, const char *text, size_t len, strbuf *out);
bool api_stream_call(api_stream *s, const oai_tool_call *call, strbuf *out);
bool api_stream_end(api_stream *s, const api_answer *a, strbuf *out);
bool api_stream_error(api_stream *s, const oai_error *e, strbuf *out);

/* ---- between api.c, api_json.c and the two API files */

struct cJSON;

/* One API's translation and writers, as the functions above describe them.
 * to_chat: the body's JSON tree root (borrowed, an object) into a chat body
 * (*chat, the caller's to cJSON_Delete), unknown fields appended to ignored
 * (OAI_IGNORED_LEN bytes). */
typedef struct api_ops {
    ts_status (*to_chat)(const struct cJSON *root, struct cJSON **chat, char *ignored,
                         oai_error *err);
    char *(*answer_json)(const api_answer *a);
    bool (*begin)(api_stream *s, strbuf *out);
    bool (*text)(api_stream *s, const char *text, size_t len, strbuf *out);
    bool (*call)(api_stream *s, const oai_tool_call *call, strbuf *out);
    bool (*end)(api_stream *s, const api_answer *a, strbuf *out);
} api_ops;

extern const api_ops api__responses_ops; /* api_responses.c */
extern const api_ops api__messages_ops;  /* api_messages.c */
extern const api_ops api__llama_ops;     /* api_llama.c */

/* llama_settings.c: llama.cpp's generation_settings of request r (borrowed): the settings it
 * ran with under llama.cpp's names; NULL when out of memory. */
struct cJSON *api__llama_settings(const oai_request *r);

/* The Messages translation for count_tokens: max_tokens may be left out. */
ts_status api__messages_count_to_chat(const struct cJSON *root, struct cJSON **chat,
                                      char *ignored, oai_error *err);

/* What an API does with one of its top-level fields. */
typedef enum api_field_use {
    API_FIELD_COPY,    /* copied into the chat body under `to` (its own name when
                      * NULL),    where the chat parser checks it */
    API_FIELD_OWN,     /* translated by the API's code */
    API_FIELD_NOOP,    /* accepted, documented as having no effect */
    API_FIELD_REFUSED, /* any value but null and false is a 400 naming it (why) */
} api_field_use;

typedef struct api_field {
    const char *name;
    api_field_use use;
    const char *to; /* COPY: the chat field; REFUSED: why */
} api_field;

/* Applies the table (n rows) to each top-level field of root (borrowed): copies
 * into chat, refuses, or lists a field outside the table in ignored. */
ts_status api__fields(const struct cJSON *root, const api_field *table, size_t n,
                      struct cJSON *chat, char *ignored, oai_error *err);

/* A chat body's message {"role": role, "content": content (taken; NULL for
 * null)} added to the array msgs; NULL when out of memory. */
struct cJSON *api__add_message(struct cJSON *msgs, const char *role, struct cJSON *content);

/* Appends "event: name\ndata: JSON of j\n\n" and deletes j (NULL: out of
 * memory). */
bool api__sse(strbuf *out, const char *name, struct cJSON *j);

/* Appends name to ignored (", "-separated, header-safe, cut at
 * OAI_IGNORED_LEN). */
void api__ignore(char *ignored, const char *name);

/* A 500 "out of memory" in err. */
ts_status api__oom(oai_error *err);
/* A 400 invalid_type in err: "'name' must be want". */
ts_status api__wrong_type(oai_error *err, const char *name, const char *want);
/* o's string member key (borrowed), NULL where o is no object or key no string. */
const char *api__string(const struct cJSON *o, const char *key);
/* A chat tool {"type": "function", "function": fn} (fn taken, also on failure; NULL
 * stays NULL); NULL when out of memory. */
struct cJSON *api__function_tool(struct cJSON *fn);
/* A chat tool_choice naming one function, {"type": "function", "function": {"name":
 * name}} (name copied); NULL when out of memory. */
struct cJSON *api__function_choice(const char *name);
/* j (taken, deleted; NULL stays NULL) printed without formatting; malloc'd, NULL when
 * out of memory. */
char *api__print(struct cJSON *j);

#endif /* TESSERA_SERVER_API_H */
