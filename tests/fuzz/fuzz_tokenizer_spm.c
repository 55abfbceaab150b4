/* fuzz_tokenizer_spm.c: libFuzzer target: SentencePiece-BPE encoding and decoding with
 * the 512-token llama2.c vocabulary (byte fallback), round trips checked. */
#include <stdlib.h>

#include "common.h"
#include "tokenizer_props.h"

static ts_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ts_error err = {0};
    if (ts_tokenizer_load_llama2c(fuzz_shared("models/stories260K/tok512.bin"), 512, &tok,
                                  &err) != TS_OK)
        fuzz_fail("cannot load tok512.bin: %s", err.msg);
    fuzz_tokenizer_require_bytes(tok);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_tokenizer_check(tok, data, size);
    return 0;
}
