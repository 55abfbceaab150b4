/* vocab.c: releasing a vocabulary filled by a model reader, and the defaults a reader
 * applies where the file is silent. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

void vocab_clear(tokenizer_vocab *v)
{
    if (!v)
        return;
    if (v->tokens)
        for (int i = 0; i < v->n_tokens; i++)
            free(v->tokens[i].text);
    free(v->tokens);
    if (v->merges)
        for (int i = 0; i < v->n_merges; i++)
            free(v->merges[i]);
    free(v->merges);
    v->tokens = NULL;
    v->merges = NULL;
    v->n_tokens = 0;
    v->n_merges = 0;
}

bool vocab_default_add_bos(vocab_kind kind, const char *pre)
{
    return kind == VOCAB_KIND_SPM || (kind == VOCAB_KIND_BPE && tokenizer_bpe_pre_adds_bos(pre));
}
