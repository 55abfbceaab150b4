/* fuzz_tokenizer_bpe.c: libFuzzer target: byte-level BPE encoding and decoding with
 * GPT-2's vocabulary, round trips checked. */
#include <stdlib.h>

#include "common.h"
#include "tokenizer_props.h"

static ts_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ts_error err = {0};
    if (ts_tokenizer_load_gguf(fuzz_shared("vocab/ggml-vocab-gpt-2.gguf"), &tok, &err) != TS_OK)
        fuzz_fail("cannot load ggml-vocab-gpt-2.gguf: %s", err.msg);
    fuzz_tokenizer_require_bytes(tok);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_tokenizer_check(tok, data, size);
    return 0;
}
