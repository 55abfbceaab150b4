/* chat_template.c: native C renderings of the common chat formats and the detection of a
 * GGUF Jinja template's family by its markers. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_internal.h"

static const char *const kind_names[CHAT_TEMPLATE_COUNT] = {
    [CHAT_TEMPLATE_PLAIN] = "plain",     [CHAT_TEMPLATE_CHATML] = "chatml",
    [CHAT_TEMPLATE_LLAMA2] = "llama2",   [CHAT_TEMPLATE_LLAMA3] = "llama3",
    [CHAT_TEMPLATE_MISTRAL] = "mistral", [CHAT_TEMPLATE_ZEPHYR] = "zephyr",
    [CHAT_TEMPLATE_PHI3] = "phi3",       [CHAT_TEMPLATE_GEMMA] = "gemma",
};

chat_template_kind chat_template_detect(const char *t)
{
    if (!t || !*t)
        return CHAT_TEMPLATE_PLAIN;
    /* Most specific markers first: Phi-3 and Zephyr share <|user|>. */
    if (strstr(t, "<|im_start|>"))
        return CHAT_TEMPLATE_CHATML;
    if (strstr(t, "<|start_header_id|>"))
        return CHAT_TEMPLATE_LLAMA3;
    if (strstr(t, "<start_of_turn>"))
        return CHAT_TEMPLATE_GEMMA;
    if (strstr(t, "<|user|>") && strstr(t, "<|end|>"))
        return CHAT_TEMPLATE_PHI3;
    if (strstr(t, "<|user|>") && (strstr(t, "</s>") || strstr(t, "eos_token")))
        return CHAT_TEMPLATE_ZEPHYR;
    if (strstr(t, "[INST]"))
        return strstr(t, "<<SYS>>") ? CHAT_TEMPLATE_LLAMA2 : CHAT_TEMPLATE_MISTRAL;
    return CHAT_TEMPLATE_PLAIN;
}

ts_status chat_template_from_name(const char *name, chat_template_kind *out, ts_error *err)
{
    for (int k = 0; k < CHAT_TEMPLATE_COUNT; k++) {
        if (name && !strcmp(name, kind_names[k])) {
            *out = (chat_template_kind)k;
            return TS_OK;
        }
    }
    return ts_error_set(err, TS_ERR_NOT_FOUND,
                        "unknown chat template '%s' (known: plain, chatml, llama2, llama3, "
                        "mistral, zephyr, phi3, gemma)", name ? name : "(null)");
}

const char *chat_template_name(chat_template_kind kind)
{
    return (unsigned)kind < CHAT_TEMPLATE_COUNT ? kind_names[kind] : "unknown";
}

bool chat_template_has_tools(chat_template_kind kind)
{
    return kind == CHAT_TEMPLATE_CHATML || kind == CHAT_TEMPLATE_LLAMA3 ||
           kind == CHAT_TEMPLATE_MISTRAL;
}

bool chat_template_trims(chat_template_kind kind)
{
    return kind == CHAT_TEMPLATE_LLAMA3 || kind == CHAT_TEMPLATE_GEMMA ||
           kind == CHAT_TEMPLATE_LLAMA2;
}

typedef chat_render render;
#define markup chat_template__markup

static void content_part(render *out, const char *c, bool strip_lead, bool strip_trail)
{
    chat_template__content(out, c, strlen(c), strip_lead, strip_trail);
}

/* True when the chat needs the tool formats: tools given, or a message with tool calls or
 * of the tool role. */
static bool tool_mode(const chat_message *m, size_t n, const cJSON *tools)
{
    if (cJSON_GetArraySize(tools) > 0)
        return true;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].role, "tool") || cJSON_GetArraySize(m[i].tool_calls) > 0)
            return true;
    return false;
}

typedef enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL } role;

static int parse_role(const char *r)
{
    if (!r)
        return -1;
    if (!strcmp(r, "system"))
        return ROLE_SYSTEM;
    if (!strcmp(r, "user"))
        return ROLE_USER;
    if (!strcmp(r, "assistant"))
        return ROLE_ASSISTANT;
    if (!strcmp(r, "tool"))
        return ROLE_TOOL;
    return -1;
}

/* Formats where every message is a turn with the role spelled out. */
static void render_turns(render *out, chat_template_kind kind, const chat_message *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role; /* system, user or assistant: tool mode rewrites tools */
        switch (kind) {
        case CHAT_TEMPLATE_CHATML: markup(out, "<|im_start|>", r, "\n", NULL); break;
        case CHAT_TEMPLATE_LLAMA3:
            markup(out, "<|start_header_id|>", r, "<|end_header_id|>\n\n", NULL);
            break;
        case CHAT_TEMPLATE_ZEPHYR:
        case CHAT_TEMPLATE_PHI3: markup(out, "<|", r, "|>\n", NULL); break;
        default: /* PLAIN */
            markup(out, !strcmp(r, "system") ? "System: " : !strcmp(r, "user") ? "User: "
                                                                            : "Assistant: ",
                   NULL);
            break;
        }
        bool trim = chat_template_trims(kind);
        content_part(out, m[i].content, trim, trim);
        switch (kind) {
        case CHAT_TEMPLATE_CHATML: markup(out, "<|im_end|>\n", NULL); break;
        case CHAT_TEMPLATE_LLAMA3: markup(out, "<|eot_id|>", NULL); break;
        case CHAT_TEMPLATE_ZEPHYR: markup(out, "</s>\n", NULL); break;
        case CHAT_TEMPLATE_PHI3: markup(out, "<|end|>\n", NULL); break;
        default: markup(out, "\n", NULL); break;
        }
    }
    switch (kind) {
    case CHAT_TEMPLATE_CHATML: markup(out, "<|im_start|>assistant\n", NULL); break;
    case CHAT_TEMPLATE_LLAMA3:
        markup(out, "<|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
        break;
    case CHAT_TEMPLATE_ZEPHYR:
    case CHAT_TEMPLATE_PHI3: markup(out, "<|assistant|>\n", NULL); break;
    default: markup(out, "Assistant:", NULL); break;
    }
}

/* Formats without a system turn of their own (Llama-2, Mistral, Gemma): system text is
 * held and opens the next user turn (Llama-2 wraps it in <<SYS>>; the others join it to
 * the user text with a blank line). A trailing system message becomes a user turn.
 * Llama-2 opens every user turn after the first with BOS, as its template does (the
 * first one's BOS comes from the tokenizer). Gemma trims every message; Llama-2 strips
 * what its template strips: a turn's whole text, where the system block comes first and
 * keeps the user text's start. */
static void render_inst(render *out, chat_template_kind kind, const chat_message *m, size_t n)
{
    bool gemma = kind == CHAT_TEMPLATE_GEMMA, llama2 = kind == CHAT_TEMPLATE_LLAMA2;
    size_t from = 0; /* system messages in [from, i) wait for the next user turn */
    bool held = false, turns = false;
    for (size_t i = 0; i <= n; i++) {
        int r = i < n ? parse_role(m[i].role) : -1;
        if (r == ROLE_SYSTEM) {
            held |= m[i].content[0] != '\0';
            continue;
        }
        if (r == ROLE_ASSISTANT) {
            markup(out, kind == CHAT_TEMPLATE_GEMMA ? "<start_of_turn>model\n"
                        : kind == CHAT_TEMPLATE_LLAMA2 ? " " : "", NULL);
            content_part(out, m[i].content, gemma || llama2, gemma || llama2);
            markup(out, kind == CHAT_TEMPLATE_GEMMA ? "<end_of_turn>\n"
                        : kind == CHAT_TEMPLATE_LLAMA2 ? " </s>" : "</s>", NULL);
            turns = true;
            continue;
        }
        if (i == n && !held)
            break;
        const char *user = i < n ? m[i].content : "";
        if (kind == CHAT_TEMPLATE_LLAMA2 && turns)
            markup(out, "<s>", NULL);
        markup(out, kind == CHAT_TEMPLATE_GEMMA ? "<start_of_turn>user\n" : "[INST] ", NULL);
        if (held) {
            if (kind == CHAT_TEMPLATE_LLAMA2)
                markup(out, "<<SYS>>\n", NULL);
            size_t start = out->text.len;
            for (size_t j = from; j < i; j++) {
                if (parse_role(m[j].role) != ROLE_SYSTEM || !m[j].content[0])
                    continue;
                if (out->text.len > start)
                    markup(out, "\n\n", NULL);
                content_part(out, m[j].content, gemma, gemma);
            }
            markup(out, kind == CHAT_TEMPLATE_LLAMA2 ? "\n<</SYS>>\n\n" : *user ? "\n\n" : "",
                   NULL);
        }
        content_part(out, user, gemma || (llama2 && !held), gemma || llama2);
        markup(out, kind == CHAT_TEMPLATE_GEMMA ? "<end_of_turn>\n" : " [/INST]", NULL);
        held = false;
        turns = true;
        from = i + 1;
    }
    if (kind == CHAT_TEMPLATE_GEMMA)
        markup(out, "<start_of_turn>model\n", NULL);
}

/* A chat without tool messages in any family. */
static void render_plain(chat_render *out, chat_template_kind kind, const chat_message *m,
                         size_t n)
{
    if (kind == CHAT_TEMPLATE_LLAMA2 || kind == CHAT_TEMPLATE_MISTRAL ||
        kind == CHAT_TEMPLATE_GEMMA)
        render_inst(out, kind, m, n);
    else
        render_turns(out, kind, m, n);
}

ts_status chat_template_render(chat_template_kind kind, const chat_message *msgs, size_t n,
                               const cJSON *tools, chat_rendering *out, ts_error *err)
{
    *out = (chat_rendering){0};
    if ((unsigned)kind >= CHAT_TEMPLATE_COUNT)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "chat template kind %d out of range",
                            (int)kind);
    for (size_t i = 0; i < n; i++) {
        if (parse_role(msgs[i].role) < 0)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "messages[%zu].role '%s' is not system, user, assistant or tool",
                                i,
                                msgs[i].role ? msgs[i].role : "(null)");
        if (!msgs[i].content)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "messages[%zu].content is missing", i);
    }
    render r = {0};
    if (!tool_mode(msgs, n, tools))
        render_plain(&r, kind, msgs, n);
    else if (chat_template__render_tools(&r, kind, msgs, n, tools, render_plain) != TS_OK)
        r.text.failed = true;
    if (!r.text.failed)
        strbuf_add(&r.text, "", 0); /* an empty rendering is still a string */
    if (r.text.failed || r.spans.failed) {
        strbuf_free(&r.text);
        strbuf_free(&r.spans);
        return ts_error_set(err, TS_ERR_NOMEM, "cannot render %zu chat messages", n);
    }
    *out = (chat_rendering){r.text.s, (ts_text_span *)(void *)r.spans.s,
                            r.spans.len / sizeof(ts_text_span)};
    return TS_OK;
}

void chat_rendering_free(chat_rendering *r)
{
    if (!r)
        return;
    free(r->text);
    free(r->content);
    *r = (chat_rendering){0};
}
