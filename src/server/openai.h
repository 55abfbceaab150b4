/* openai.h: OpenAI-shaped request bodies -> validated parameters, and the JSON bodies
 * (responses, stream chunks, errors) the server answers with. Of the engine's API only the
 * sampling parameters (tessera/sampling.h, which need no model), so everything can be
 * tested without a model. */
#ifndef TESSERA_SERVER_OPENAI_H
#define TESSERA_SERVER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/sampling.h"
#include "tessera/status.h"

enum {
    OAI_MAX_STOP = 4,          /* == TS_MAX_STOP */
    OAI_MAX_STOP_LEN = 256,    /* == TS_MAX_STOP_LEN */
    OAI_MAX_N = 16,            /* == TS_MAX_N */
    OAI_MAX_TOP_LOGPROBS = TS_SAMPLING_MAX_TOP_LOGPROBS,
    OAI_MAX_MESSAGES = 4096,
    OAI_MAX_PROMPT_TOKENS = 1 << 20,
    OAI_IGNORED_LEN = 256,
    OAI_MAX_TOOLS = 128,       /* tools of a request */
    OAI_MAX_TOOL_NAME = 64,    /* bytes of a function name: [a-zA-Z0-9_-], as OpenAI's */
    OAI_MAX_PARALLEL_CALLS = 8, /* calls of a forced answer (tool_choice required): a model
                                 * that never closes the list stops there */
    OAI_MAX_JSON_DEPTH = 32,   /* objects and arrays nested in a tool's parameters or a
                                * call's arguments: the chat template renders them with
                                * tojson, which stops at 64 with what surrounds them */
};

typedef enum oai_kind { OAI_CHAT, OAI_COMPLETION } oai_kind;

/* An error as OpenAI shapes it: {"error": {"message", "type", "param", "code"}}. */
typedef struct oai_error {
    int http_status; /* 400, 401, 404, 405, 413, 429, 500, 503 */
    char type[32];   /* "invalid_request_error", "authentication_error", ... */
    char param[224]; /* the offending field ("messages[2].content"), "" for none */
    char code[40];   /* machine-readable code, "" for none */
    char message[512];
} oai_error;

/* Fills e (may be NULL); the type follows from the status (4xx invalid_request_error,
 * 401 authentication_error, 429 rate_limit_error, 5xx server_error). param and code may
 * be NULL. Returns TS_ERR_INVALID_ARG so callers can `return oai_error_set(...)`. */
ts_status oai_error_set(oai_error *e, int http_status, const char *param, const char *code,
                        const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* response_format's type. */
typedef enum oai_format {
    OAI_FORMAT_TEXT,
    OAI_FORMAT_JSON_OBJECT,
    OAI_FORMAT_JSON_SCHEMA, /* oai_request.schema holds the compiled schema */
    OAI_FORMAT_GRAMMAR,     /* oai_request.grammar holds the compiled grammar (GBNF, regex
                             * or choice: openai_guided.c) */
} oai_format;

/* tool_choice: whether and how the answer calls the request's tools. */
typedef enum oai_tool_choice {
    OAI_TOOL_CHOICE_NONE,     /* the answer is text (the default without tools) */
    OAI_TOOL_CHOICE_AUTO,     /* text or calls, in the model family's syntax (the default
                               * with tools) */
    OAI_TOOL_CHOICE_REQUIRED, /* one call or more, constrained to the tools' schemas */
    OAI_TOOL_CHOICE_NAMED,    /* one call of the named tool, constrained to its schema */
} oai_tool_choice;

typedef struct oai_tools {
    struct cJSON *defs;     /* owned: the request's tools, checked ([{"type": "function",
                             * "function": {"name", "description"?, "parameters"?}}]);
                             * NULL for none (an empty array is none) */
    int n;                  /* tools in defs */
    oai_tool_choice choice;
    int named;              /* NAMED: the tool's index in defs */
    bool parallel;          /* parallel_tool_calls (default true): REQUIRED may make
                             * several calls */
    struct ts_schema *schema; /* owned (ts_schema_release): REQUIRED, NAMED: the compiled
                               * oai_tools_schema the answer is constrained to */
} oai_tools;

typedef struct oai_message {
    char *role;    /* owned; "system", "user", "assistant" or "tool" ("developer" ->
                    * "system"); tool calls and ids are in the request's chat_vars */
    char *content; /* owned; text parts of an array content are joined */
} oai_message;

typedef struct oai_request {
    oai_kind kind;
    char *model;                  /* owned; NULL = the server's default model */
    oai_message *messages;        /* (n_messages) chat only; owned */
    size_t n_messages;
    char *prompt;                 /* completions: text prompt, owned; or NULL ... */
    int32_t *prompt_tokens;       /* ... (n_prompt_tokens) token ids, owned */
    size_t n_prompt_tokens;
    int max_tokens;               /* 0 = not given (or given 0: score_only) */
    bool score_only;              /* completions: max_tokens 0 with echo: the prompt is
                                   * scored, nothing generated */
    bool echo;                    /* completions: the answer repeats the prompt (and its
                                   * tokens' logprobs) before the completion */
    bool prompt_logprobs;         /* vLLM's prompt_logprobs given: each prompt token's
                                   * logprob, rank and sampling.top_logprobs alternatives */
    bool prompt_logprobs_only;    /* sampling.logprobs was set for them alone: the
                                   * completion's logprobs are answered null */
    ts_sampling_params sampling;  /* temperature ... top_logprobs, checked by
                                   * ts_sampling_params_check; defaults elsewhere */
    char *stop[OAI_MAX_STOP];     /* (n_stop) owned, each 1..OAI_MAX_STOP_LEN bytes */
    int n_stop;
    int n;                        /* 1..OAI_MAX_N */
    bool stream;
    bool include_usage;           /* stream_options.include_usage */
    bool ignore_eos;              /* extension: generate past end-of-generation tokens */
    bool speculative;             /* extension (default true): false opts the request out
                                   * of the engine's speculative decoding */
    oai_format format;            /* response_format */
    struct ts_schema *schema;     /* owned (ts_schema_release): response_format's compiled
                                   * json_schema, or NULL */
    struct ts_grammar *grammar;   /* owned (ts_grammar_release): the compiled grammar of
                                   * grammar, guided_* or structured_outputs, or NULL */
    oai_tools tools;              /* tools, tool_choice, parallel_tool_calls (chat) */
    char *user;                   /* owned; recorded, not used */
    char ignored[OAI_IGNORED_LEN]; /* top-level fields tessera does not know, ", "-separated
                                    * and header-safe (X-Tessera-Ignored-Fields); "" none */
    char *cache_salt;             /* owned or NULL: narrows the prefix-cache namespace */
    struct cJSON *chat_vars;      /* owned; chat only: what a Jinja template reads
                                   * (oai_chat_vars) */
} oai_request;

/* Parses and validates a request body of len bytes (borrowed). Unknown fields are
 * listed in out->ignored; a field of the wrong type or out of range gives 400 naming it;
 * malformed JSON or invalid UTF-8 gives 400. On failure *out is left cleared. */
ts_status oai_parse_request(oai_kind kind, const char *body, size_t len, oai_request *out,
                            oai_error *err);

struct cJSON;
/* openai_fields.c: every top-level field of root (borrowed, an object) is looked up in
 * the table of OpenAI's fields for kind: a refused one is a 400 naming it, a documented
 * no-op of the wrong type a 400, an unknown one is added to r->ignored. Then the fields
 * accepted only in some values (echo, best_of against r->n, suffix, modalities,
 * tool_choice) are checked and response_format sets r->format (and compiles r->schema). */
ts_status oai_check_fields(oai_kind kind, const struct cJSON *root, oai_request *r,
                           oai_error *err);
/* openai_guided.c: the constraint fields of llama.cpp and vLLM clients in root (borrowed):
 * grammar, json_schema, guided_regex, guided_choice, guided_grammar, guided_json,
 * structured_outputs. At most one, and not with a response_format other than text; it
 * sets r->format and compiles r->grammar or r->schema. A fault is a 400 naming the field. */
ts_status oai_read_guided(const struct cJSON *root, oai_request *r, oai_error *err);
/* openai_tools.c: tools, tool_choice and parallel_tool_calls of root (borrowed) into
 * r->tools; a 400 names the field (tools[2].function.name, tool_choice). A call forced
 * (required, named) needs tools and no other response_format than text, so r->format must
 * be read first; its schema is compiled into r->tools.schema, a parameters schema outside
 * the supported subset a 400 naming it (tools[1].function.parameters.properties.x...). */
ts_status oai_read_tools(const struct cJSON *root, oai_request *r, oai_error *err);
/* openai_sampling.c: llama.cpp's and vLLM's sampling fields of root (borrowed) into
 * r->sampling (after logprobs and top_logprobs, which n_probs must agree with); types are
 * checked here, ranges by ts_sampling_params_check. */
ts_status oai_read_llama_sampling(const struct cJSON *root, oai_request *r, oai_error *err);
/* Frees what t owns and zeroes it. */
void oai_tools_clear(oai_tools *t);
/* The tool fields of message m (borrowed), messages[i] of role role: an assistant's
 * tool_calls ([{"id": string, "type": "function", "function": {"name": string,
 * "arguments": JSON text or object}}]) and a tool message's tool_call_id (a string,
 * required). */
ts_status oai_check_message_tools(const struct cJSON *m, int i, const char *role,
                                  oai_error *err);
/* The JSON Schema a forced answer must match (the caller's to cJSON_Delete), or NULL when
 * the choice forces no call (or out of memory: check t->choice). A call is {"name":
 * const, "arguments": the function's parameters ({"type": "object", "properties": {},
 * ...} when it has none)}; NAMED: that tool's call; REQUIRED: any tool's call (anyOf), or
 * with t->parallel an array of one or more. */
struct cJSON *oai_tools_schema(const oai_tools *t);

/* A chat request's variables for a Jinja chat template (chat_vars.c), from its parsed
 * body root (borrowed, its messages already checked): messages (content parts joined,
 * "developer" as "system", tool_calls' arguments parsed from their JSON string), tools,
 * add_generation_prompt (default true) and the members of chat_template_kwargs. *out is
 * the caller's to cJSON_Delete. */
ts_status oai_chat_vars(const struct cJSON *root, struct cJSON **out, oai_error *err);

/* vLLM's "prompt_logprobs": k (0..OAI_MAX_TOP_LOGPROBS) alternatives per prompt token,
 * into r->prompt_logprobs and r->sampling.top_logprobs (which logprobs, when also asked
 * for, must equal). n > 1 and stream are refused with it (prompt_logprobs.c). */
ts_status oai_read_prompt_logprobs(const struct cJSON *root, oai_request *r, oai_error *err);

/* Frees what the request owns and zeroes it. Accepts a zeroed or half-filled request. */
void oai_request_clear(oai_request *r);

/* One piece of /tokenize's input: a text, or a token id as given (llama.cpp's "content"
 * array mixes both). */
typedef struct oai_tokenize_part {
    char *text; /* owned; NULL where the part is an id */
    int32_t id;
} oai_tokenize_part;

/* POST /tokenize {"model"?, "prompt"|"text"|"content", "add_special"?, "parse_special"?,
 * "with_pieces"?}; "content" is llama.cpp's name, whose add_special defaults to false, and
 * may be an array of strings and ids. */
typedef struct oai_tokenize_request {
    char *model;             /* owned, or NULL */
    oai_tokenize_part *parts; /* (n_parts) owned: one text, or the parts of a "content"
                               * array in order (may be empty) */
    size_t n_parts;
    bool text_field_named_text; /* the body said "text" (answers use the same name) */
    bool add_special;      /* BOS where the vocabulary adds one (default true), before the
                            * first part when it is a text (as llama.cpp); false: never */
    bool parse_special;    /* special tokens spelled out in the text count (default true,
                            * as /v1/completions reads a prompt) */
    bool with_pieces;      /* llama.cpp's: each token as {"id", "piece"} */
} oai_tokenize_request;

/* POST /detokenize {"model"?, "tokens": [ids]}. */
typedef struct oai_detokenize_request {
    char *model;     /* owned, or NULL */
    int32_t *tokens; /* (n_tokens) owned */
    size_t n_tokens;
} oai_detokenize_request;

ts_status oai_parse_tokenize(const char *body, size_t len, oai_tokenize_request *out,
                             oai_error *err);
void oai_tokenize_request_clear(oai_tokenize_request *r);
ts_status oai_parse_detokenize(const char *body, size_t len, oai_detokenize_request *out,
                               oai_error *err);
void oai_detokenize_request_clear(oai_detokenize_request *r);

/* ---- response builders: each returns a malloc'd NUL-terminated JSON text, or NULL when
 * out of memory. Every pointer argument is borrowed. */

typedef struct oai_top_logprob {
    const char *bytes; /* the token's bytes, may be part of a UTF-8 character */
    size_t len;
    float logprob;
} oai_top_logprob;

typedef struct oai_token_logprob {
    const char *bytes; /* the sampled token's bytes */
    size_t len;
    size_t text_offset; /* bytes of the completion's text emitted before this token's; a
                         * token whose text is held back adds nothing (completions) */
    float logprob;
    bool no_logprob; /* the prompt's first token under echo: logprob and top are null */
    int n_top;
    oai_top_logprob top[OAI_MAX_TOP_LOGPROBS];
} oai_token_logprob;

typedef struct oai_meta {
    oai_kind kind;
    const char *id;    /* "chatcmpl-..." or "cmpl-..." */
    long long created; /* Unix seconds */
    const char *model;
} oai_meta;

/* A tool call of an answer: {"id", "type": "function", "function": {"name",
 * "arguments"}}. */
typedef struct oai_tool_call {
    const char *id, *name; /* borrowed */
    const char *arguments; /* borrowed: JSON text of an object */
} oai_tool_call;

typedef struct oai_choice {
    const char *text;            /* (text_len) valid UTF-8; with tool calls and no text the
                                  * message's content is null */
    size_t text_len;
    const char *finish_reason;   /* "stop", "length", "tool_calls", "cancelled" */
    const oai_token_logprob *logprobs; /* (n_logprobs), NULL when not asked for */
    size_t n_logprobs;
    const oai_tool_call *tool_calls; /* (n_tool_calls) chat: the message's tool_calls */
    size_t n_tool_calls;
} oai_choice;

typedef struct oai_usage {
    int prompt_tokens, completion_tokens, cached_tokens;
    /* The server's own timings, answered as "timings" beside "usage" when timed: arrival
     * to the first token, and the first token to the last. */
    bool timed;
    double ttft_ms, generation_ms;
} oai_usage;

char *oai_error_json(const oai_error *e);

/* A JSON string item of n bytes (borrowed; ill-formed UTF-8 repaired, NUL bytes written as
 * \u0000 rather than cutting the text); NULL out of memory. */
struct cJSON *oai_bytes_string(const char *s, size_t n);

/* The whole answer of a non-streamed request. */
char *oai_response_json(const oai_meta *m, const oai_choice *choices, size_t n_choices,
                        const oai_usage *usage);

/* One stream chunk for completion `index`: with_role puts {"role":"assistant"} in a chat
 * delta; text (may be NULL) is the new text; finish_reason NULL means "not finished";
 * lp (may be NULL) is the token's log-probabilities. */
char *oai_chunk_json(const oai_meta *m, int index, bool with_role, const char *text,
                     size_t text_len, const char *finish_reason, const oai_token_logprob *lp);

/* A chat stream chunk for completion `index` carrying tool call k of its answer: with
 * head its id, type and name with empty arguments (the call's first chunk, as OpenAI
 * sends it), else its arguments. */
char *oai_tool_chunk_json(const oai_meta *m, int index, int k, const oai_tool_call *call,
                          bool head);

/* The final stream chunk of stream_options.include_usage: empty choices, usage set. */
char *oai_usage_chunk_json(const oai_meta *m, const oai_usage *usage);

#endif /* TESSERA_SERVER_OPENAI_H */
