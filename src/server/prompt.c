/* prompt.c: a completion request's prompt as token ids: token prompts checked against
 * the vocabulary, text prompts tokenized, chats rendered in the model's template first. */
#include <stdlib.h>
#include <string.h>

#include "server/chat_family.h"
#include "server/server_internal.h"

ts_status prompt_tokens(const oai_request *r, const srv_model *m, const ts_tokenizer *tok,
                        int32_t **ids, size_t *n, oai_error *e)
{
    if (r->kind != OAI_CHAT && !r->prompt) {
        int vocab = ts_tokenizer_vocab_size(tok);
        for (size_t i = 0; i < r->n_prompt_tokens; i++)
            if (r->prompt_tokens[i] >= vocab)
                return oai_error_set(e, 400, "prompt", "invalid_value",
                                     "'prompt' token %zu is %d, past the vocabulary of %d", i,
                                     (int)r->prompt_tokens[i], vocab);
        *ids = malloc(r->n_prompt_tokens * sizeof **ids);
        if (!*ids)
            return oai_error_set(e, 500, NULL, NULL, "out of memory");
        memcpy(*ids, r->prompt_tokens, r->n_prompt_tokens * sizeof **ids);
        *n = r->n_prompt_tokens;
        return TS_OK;
    }
    chat_rendering chat = {0};
    ts_tokenize_opts opts = {.add_special = true, .parse_special = true};
    const char *text = r->prompt;
    if (r->kind == OAI_CHAT && m->jinja.t) {
        /* The template writes BOS itself where the model wants one (bos_token), as Hugging
         * Face renders and tokenizes chats: no BOS added, special tokens read as such. */
        char *rendered = NULL;
        if (srv_template_render(m, r, &rendered, e) != TS_OK)
            return TS_ERR_INVALID_ARG;
        opts.add_special = false;
        ts_status st = ts_tokenize_alloc(tok, rendered, strlen(rendered), &opts, ids, n);
        free(rendered);
        if (st != TS_OK)
            return oai_error_set(e, 500, NULL, NULL, "cannot tokenize the prompt: %s",
                                 ts_status_str(st));
        return TS_OK;
    }
    if (r->kind == OAI_CHAT) {
        ts_error err = {0};
        ts_status st = chat_family_render(m->template, r, &chat, &err);
        if (st != TS_OK)
            return oai_error_set(e, st == TS_ERR_NOMEM ? 500 : 400, "messages", NULL, "%s",
                                 err.msg);
        text = chat.text;
        opts.plain = chat.content;
        opts.n_plain = chat.n_content;
    }
    ts_status st = ts_tokenize_alloc(tok, text, strlen(text), &opts, ids, n);
    chat_rendering_free(&chat);
    if (st != TS_OK)
        return oai_error_set(e, 500, NULL, NULL, "cannot tokenize the prompt: %s",
                             ts_status_str(st));
    return TS_OK;
}
