/* tiny_gguf.h: the tiny Llama GGUF that the fuzz seed generator and the fuzz regression
 * tests build with the GGUF writer: tensors of dim 8, ffn 16, one layer, 2 heads of 4, one
 * KV head, and 8 SentencePiece tokens. Plain C (no cmocka), so the seed generator can
 * link it too. */
#ifndef TESSERA_TESTS_TINY_GGUF_H
#define TESSERA_TESTS_TINY_GGUF_H

#include <stdint.h>

#include "gguf/gguf.h"

/* What the metadata says of the shape; the tensors stay tiny whatever it says, so a
 * dishonest header can be built on the same file. */
typedef struct tiny_meta {
    uint32_t dim, ffn, layers, heads, kv_heads;
} tiny_meta;

extern const tiny_meta tiny_honest; /* what the tensors really hold */

/* Adds the model's metadata (shape from meta, context 16, the vocabulary) and tensors to
 * w. Writer failures show up when w is finished. */
void tiny_gguf_add_llama(gguf_writer *w, const tiny_meta *meta);

#endif
