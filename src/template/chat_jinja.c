/* chat_jinja.c: a model's Jinja chat template with its special tokens' texts. */
#include <stdlib.h>
#include <string.h>

#include "template/chat_jinja.h"
#include "tokenizer/vocab.h"

/* The token's text as the vocabulary stores it ("<s>"), "" for -1. */
static char *token_text(const ts_tokenizer *tok, int32_t id)
{
    const tokenizer_vocab *v = tokenizer_get_vocab(tok);
    const char *t = id >= 0 && id < v->n_tokens ? v->tokens[id].text : "";
    return strdup(t ? t : "");
}

ts_status chat_jinja_init(chat_jinja *cj, const char *src, size_t len, const ts_tokenizer *tok,
                          ts_error *err)
{
    ts_status st;
    memset(cj, 0, sizeof *cj);
    if ((st = jinja_parse(&cj->t, src, len, NULL, err)) != TS_OK)
        return st;
    cj->bos = token_text(tok, ts_tokenizer_bos(tok));
    cj->eos = token_text(tok, ts_tokenizer_eos(tok));
    if (!cj->bos || !cj->eos) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    cJSON *probe = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                               "\"add_generation_prompt\": true}");
    char *text = NULL;
    ts_error perr = {0};
    st = probe ? chat_jinja_render(cj, probe, 0, NULL, &text, &perr) : TS_ERR_NOMEM;
    cJSON_Delete(probe);
    free(text);
    if (st != TS_OK && st != TS_ERR_INVALID_ARG) {
        ts_error_set(err, st, "%s", probe ? perr.msg : "out of memory");
        goto fail;
    }
    return TS_OK;
fail:
    chat_jinja_free(cj);
    return st;
}

ts_status chat_jinja_render(const chat_jinja *cj, const cJSON *vars, time_t now,
                            const atomic_bool *cancel, char **out, ts_error *err)
{
    /* vars is borrowed: bos_token and eos_token go on a copy. */
    cJSON *all = vars ? cJSON_Duplicate(vars, true) : cJSON_CreateObject();
    ts_status st = TS_OK;
    if (!all)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(all, "bos_token");
    cJSON_DeleteItemFromObjectCaseSensitive(all, "eos_token");
    if (!cJSON_AddStringToObject(all, "bos_token", cj->bos) ||
        !cJSON_AddStringToObject(all, "eos_token", cj->eos))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (st == TS_OK)
        st = jinja_render(cj->t, all, now, cancel, out, err);
    cJSON_Delete(all);
    return st;
}

void chat_jinja_free(chat_jinja *cj)
{
    jinja_free(cj->t);
    free(cj->bos);
    free(cj->eos);
    memset(cj, 0, sizeof *cj);
}
