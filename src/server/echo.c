/* echo.c: a text completion's `echo`: the answer repeats the prompt before the completion,
 * and with logprobs lists the prompt's tokens first, the first one's logprob null, as
 * OpenAI's legacy completions did (evaluation harnesses score prompts this way). */
#include <stdlib.h>
#include <string.h>

#include "server/job.h"

bool echo_start(srv_job *j, const int32_t *ids, size_t n)
{
    j->echo_first = ids[0];
    size_t sum = 0, one = 0;
    for (size_t k = 0; k < n; k++) {
        ts_token_bytes(j->tok, ids[k], &one);
        sum += one;
    }
    size_t decoded = ts_detokenize(j->tok, ids, n, NULL, 0);
    j->echo_drop = sum > decoded ? sum - decoded : 0;
    const char *given = j->oreq.prompt;
    size_t len = given ? strlen(given) : ts_detokenize(j->tok, ids, n, NULL, 0);
    j->echo_text = malloc(len + 1);
    if (!j->echo_text)
        return false;
    if (given)
        memcpy(j->echo_text, given, len);
    else
        ts_detokenize(j->tok, ids, n, j->echo_text, len);
    j->echo_text[len] = '\0';
    j->echo_len = len;
    return true;
}

bool echo_collect(srv_job *j, const ts_event *ev)
{
    if (!job_grow((void **)&j->plps, &j->cap_plps, j->n_plps + 1, sizeof *j->plps))
        return false;
    oai_token_logprob *lp = &j->plps[j->n_plps];
    job_fill_logprob(j, ev, 0, lp);
    /* unclamped: the next token's offset follows from this one's */
    size_t first = 0;
    ts_token_bytes(j->tok, j->echo_first, &first);
    lp->text_offset = j->n_plps ? j->plps[j->n_plps - 1].text_offset + j->plps[j->n_plps - 1].len
                                : first;
    j->n_plps++;
    return true;
}

void echo_first(const srv_job *j, oai_token_logprob *lp)
{
    memset(lp, 0, sizeof *lp);
    lp->bytes = ts_token_bytes(j->tok, j->echo_first, &lp->len);
    if (!lp->bytes)
        lp->bytes = "", lp->len = 0;
    lp->no_logprob = true;
}

oai_token_logprob echo_prompt_logprob(const srv_job *j, size_t k)
{
    oai_token_logprob lp = j->plps[k];
    /* past the first word, whose dropped space the tokens' bytes still count */
    lp.text_offset = lp.text_offset > j->echo_drop ? lp.text_offset - j->echo_drop : 0;
    if (lp.text_offset > j->echo_len) /* the tokens' bytes ran past the text */
        lp.text_offset = j->echo_len;
    return lp;
}

bool echo_choice(srv_job *j, const choice_acc *a, oai_choice *c)
{
    size_t len = j->echo_len + a->len;
    j->echo_out = malloc(len + 1);
    if (!j->echo_out)
        return false;
    memcpy(j->echo_out, j->echo_text, j->echo_len);
    if (a->len)
        memcpy(j->echo_out + j->echo_len, a->text, a->len);
    j->echo_out[len] = '\0';
    c->text = j->echo_out;
    c->text_len = len;
    if (!c->logprobs)
        return true;
    size_t n = 1 + j->n_plps + a->n_lps;
    j->echo_lps = calloc(n, sizeof *j->echo_lps);
    if (!j->echo_lps)
        return false;
    oai_token_logprob *out = j->echo_lps;
    echo_first(j, &out[0]);
    for (size_t k = 0; k < j->n_plps; k++)
        out[1 + k] = echo_prompt_logprob(j, k);
    for (size_t k = 0; k < a->n_lps; k++) {
        out[1 + j->n_plps + k] = a->lps[k];
        out[1 + j->n_plps + k].text_offset += j->echo_len;
    }
    c->logprobs = out;
    c->n_logprobs = n;
    return true;
}

void echo_free(srv_job *j)
{
    free(j->echo_text);
    free(j->plps);
    free(j->echo_out);
    free(j->echo_lps);
}
