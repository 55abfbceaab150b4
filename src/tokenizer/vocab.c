/* vocab.c: releasing a vocabulary filled by a model reader. The default a reader applies
 * where the file does not say whether prompts start with BOS (vocab_default_add_bos) is
 * bpe.c's, beside the pre-tokenizer table it reads, so that this file calls nothing. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/vocab.h"

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
    free(v->charsmap);
    v->charsmap = NULL;
    v->charsmap_len = 0;
    v->tokens = NULL;
    v->merges = NULL;
    v->n_tokens = 0;
    v->n_merges = 0;
}
