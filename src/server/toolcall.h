/* toolcall.h: tool calls found in a model's answer as it is generated, in the syntax its
 * chat family was trained on. Text goes in piece by piece; out comes the text that is
 * content and each call once it is whole. Text that could still turn out to be a call
 * (a marker's beginning, a call's JSON not yet closed) is held back until it is decided,
 * so the content and calls of an answer are the same whether it was fed whole or in any
 * pieces. A call that does not parse stays content, as text. */
#ifndef TESSERA_SERVER_TOOLCALL_H
#define TESSERA_SERVER_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "tessera/tokenizer.h"
#include "template/chat_template.h"

typedef enum toolcall_syntax {
    TOOLCALL_SYNTAX_NONE,    /* no calls: everything is content */
    TOOLCALL_SYNTAX_HERMES,  /* <tool_call>{"name", "arguments"}</tool_call>, any number,
                              * anywhere (Hermes, Qwen; the closing tag may be missing at
                              * the end) */
    TOOLCALL_SYNTAX_MISTRAL, /* [TOOL_CALLS] then a JSON array of {"name", "arguments"}
                              * (Nemo, Small 3.0/3.1), or [TOOL_CALLS]name[ARGS]{...} per
                              * call (Small 3.2, Magistral, Devstral; [ARGS] may be a
                              * control token the detokenizer dropped) */
    TOOLCALL_SYNTAX_LLAMA3,  /* {"name", "parameters"} at the start of the answer, or after
                              * <|python_tag|>; several separated by ';' or whitespace */
    TOOLCALL_SYNTAX_JSON,    /* the answer is one {"name", "arguments"} or an array of them
                              * (the output of a forced tool_choice) */
} toolcall_syntax;

/* The syntax a family's models call tools in: chatml Hermes, llama3 Llama 3.1's, mistral
 * Mistral's; families without a format of their own Hermes (chat_tools.c shows them past
 * calls in its tags). */
toolcall_syntax toolcall_syntax_for(chat_template_kind kind);

/* The marker that opens the syntax's calls ("<tool_call>", "[TOOL_CALLS]",
 * "<|python_tag|>"), or NULL. A vocabulary may hold it as a control token, whose text the
 * detokenizer drops: the caller then feeds the marker's text when that token comes. */
const char *toolcall_marker(toolcall_syntax syntax);

/* The token of the syntax's marker where tok (borrowed) holds it as a control token, whose
 * text the detokenizer drops; -1 where the text shows the marker, or no single token is
 * it. */
int32_t toolcall_marker_token(const ts_tokenizer *tok, toolcall_syntax syntax);

typedef struct toolcall_call {
    char *name;      /* owned */
    char *arguments; /* owned: an object as compact JSON text */
} toolcall_call;

/* What feeding released. The caller takes what it wants and resets it between feeds or
 * lets it accumulate; each call comes once. */
typedef struct toolcall_out {
    strbuf content;       /* content text, in order */
    toolcall_call *calls; /* (n_calls) whole calls, in order */
    size_t n_calls, cap_calls;
    bool failed;          /* out of memory: what is here may be incomplete */
} toolcall_out;

/* Empties out (frees its calls, keeps its memory for content). */
void toolcall_out_reset(toolcall_out *out);
void toolcall_out_free(toolcall_out *out);

typedef struct toolcall_parser {
    toolcall_syntax syntax;
    int state;
    strbuf held;            /* text not decided yet (a marker's beginning, a call) */
    size_t value_at;        /* PAYLOAD: where the call's JSON starts in held (SIZE_MAX:
                             * not yet), and scan the next byte to look at */
    size_t scan, block_end; /* block_end: CLOSE: where the call's JSON ended */
    int depth;              /* PAYLOAD: JSON nesting, strings and escapes so far */
    bool in_str, esc;
    size_t name_at, name_end; /* PAYLOAD, MISTRAL: a call's name before [ARGS] in held
                               * (name_end 0: none) */
    toolcall_call *pending; /* CLOSE: the calls waiting for their closing tag */
    size_t n_pending;
    const struct cJSON *tools; /* borrowed: the request's declared tools (oai_tools.defs);
                                * a call naming no tool of them is content. NULL: any name */
} toolcall_parser;

/* Zeroed parser for syntax; free it with toolcall_parser_free. */
void toolcall_init(toolcall_parser *p, toolcall_syntax syntax);
/* Calls must name one of tools ([{"type": "function", "function": {"name", ...}}], borrowed
 * for the parser's life): a call of an undeclared name is released as content, its text as
 * the model wrote it. */
void toolcall_declare(toolcall_parser *p, const struct cJSON *tools);
void toolcall_parser_free(toolcall_parser *p);

/* Feeds len bytes of the answer (borrowed); appends to out what they decide. False when
 * out of memory (out->failed set). */
bool toolcall_feed(toolcall_parser *p, const char *text, size_t len, toolcall_out *out);

/* The answer ended: whatever is still held is decided (a call whose JSON is whole is a
 * call, the rest content). */
bool toolcall_finish(toolcall_parser *p, toolcall_out *out);

#endif /* TESSERA_SERVER_TOOLCALL_H */
