/* chat_template.c: native C renderings of the common chat formats and the detection of a
 * GGUF Jinja template's family by its markers. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "tokenizer/chat_template.h"

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

/* Appends the NUL-terminated strings given, up to a NULL. */
static void sb_cat(strbuf *b, ...)
{
    va_list ap;
    va_start(ap, b);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        strbuf_add(b, s, strlen(s));
    va_end(ap);
}

typedef enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT } role;

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
    return -1;
}

/* Formats where every message is a turn with the role spelled out. */
static void render_turns(strbuf *b, chat_template_kind kind, const chat_message *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role, *c = m[i].content;
        switch (kind) {
        case CHAT_TEMPLATE_CHATML:
            sb_cat(b, "<|im_start|>", r, "\n", c, "<|im_end|>\n", NULL);
            break;
        case CHAT_TEMPLATE_LLAMA3:
            sb_cat(b, "<|start_header_id|>", r, "<|end_header_id|>\n\n", c, "<|eot_id|>", NULL);
            break;
        case CHAT_TEMPLATE_ZEPHYR:
            sb_cat(b, "<|", r, "|>\n", c, "</s>\n", NULL);
            break;
        case CHAT_TEMPLATE_PHI3:
            sb_cat(b, "<|", r, "|>\n", c, "<|end|>\n", NULL);
            break;
        default: { /* PLAIN */
            const char *label = !strcmp(r, "system") ? "System: "
                                : !strcmp(r, "user") ? "User: " : "Assistant: ";
            sb_cat(b, label, c, "\n", NULL);
            break;
        }
        }
    }
    switch (kind) {
    case CHAT_TEMPLATE_CHATML: sb_cat(b, "<|im_start|>assistant\n", NULL); break;
    case CHAT_TEMPLATE_LLAMA3:
        sb_cat(b, "<|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
        break;
    case CHAT_TEMPLATE_ZEPHYR:
    case CHAT_TEMPLATE_PHI3: sb_cat(b, "<|assistant|>\n", NULL); break;
    default: sb_cat(b, "Assistant:", NULL); break;
    }
}

/* Formats without a system turn of their own (Llama-2, Mistral, Gemma): system text is
 * held and opens the next user turn (Llama-2 wraps it in <<SYS>>; the others join it to
 * the user text with a blank line). A trailing system message becomes a user turn. */
static void render_inst(strbuf *b, chat_template_kind kind, const chat_message *m, size_t n)
{
    strbuf sys = {0};
    for (size_t i = 0; i <= n; i++) {
        int r = i < n ? parse_role(m[i].role) : -1;
        if (r == ROLE_SYSTEM) {
            if (sys.len)
                sb_cat(&sys, "\n\n", NULL);
            sb_cat(&sys, m[i].content, NULL);
            continue;
        }
        if (r == ROLE_ASSISTANT) {
            if (kind == CHAT_TEMPLATE_GEMMA)
                sb_cat(b, "<start_of_turn>model\n", m[i].content, "<end_of_turn>\n", NULL);
            else if (kind == CHAT_TEMPLATE_LLAMA2)
                sb_cat(b, " ", m[i].content, " </s>", NULL);
            else
                sb_cat(b, m[i].content, "</s>", NULL);
            continue;
        }
        if (i == n && !sys.len)
            break;
        const char *user = i < n ? m[i].content : "";
        const char *open = kind == CHAT_TEMPLATE_GEMMA ? "<start_of_turn>user\n" : "[INST] ";
        const char *close = kind == CHAT_TEMPLATE_GEMMA ? "<end_of_turn>\n" : " [/INST]";
        sb_cat(b, open, NULL);
        if (sys.len && kind == CHAT_TEMPLATE_LLAMA2)
            sb_cat(b, "<<SYS>>\n", sys.s, "\n<</SYS>>\n\n", NULL);
        else if (sys.len)
            sb_cat(b, sys.s, *user ? "\n\n" : "", NULL);
        sb_cat(b, user, close, NULL);
        sys.len = 0;
    }
    b->failed |= sys.failed;
    strbuf_free(&sys);
    if (kind == CHAT_TEMPLATE_GEMMA)
        sb_cat(b, "<start_of_turn>model\n", NULL);
}

ts_status chat_template_render(chat_template_kind kind, const chat_message *msgs, size_t n,
                               char **out, ts_error *err)
{
    *out = NULL;
    if ((unsigned)kind >= CHAT_TEMPLATE_COUNT)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "chat template kind %d out of range",
                            (int)kind);
    for (size_t i = 0; i < n; i++) {
        if (parse_role(msgs[i].role) < 0)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "messages[%zu].role '%s' is not system, user or assistant", i,
                                msgs[i].role ? msgs[i].role : "(null)");
        if (!msgs[i].content)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "messages[%zu].content is missing", i);
    }
    strbuf b = {0};
    if (kind == CHAT_TEMPLATE_LLAMA2 || kind == CHAT_TEMPLATE_MISTRAL ||
        kind == CHAT_TEMPLATE_GEMMA)
        render_inst(&b, kind, msgs, n);
    else
        render_turns(&b, kind, msgs, n);
    if (!b.failed)
        strbuf_add(&b, "", 0); /* an empty rendering is still a string */
    if (b.failed) {
        strbuf_free(&b);
        return ts_error_set(err, TS_ERR_NOMEM, "cannot render %zu chat messages", n);
    }
    *out = b.s;
    return TS_OK;
}
