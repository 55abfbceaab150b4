/* fuzz_tokenizer_bpe.c: libFuzzer target: byte-level BPE encoding and decoding with
 * GPT-2's vocabulary, round trips checked, under each pre-tokenizer we know: the first
 * byte's bits from 3 up, modulo their number, pick GPT-2's, Llama 3's, Qwen2's, SmolLM's or
 * DeepSeek LLM's (its low bits as tokenizer_props.h says). */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "tokenizer/vocab.h"
#include "tokenizer_props.h"

static const char *const pres[] = {"gpt-2", "llama-bpe", "qwen2", "smollm", "deepseek-llm"};
enum { N_PRES = sizeof pres / sizeof *pres };
static ts_tokenizer *toks[N_PRES];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ts_error err = {0};
    if (ts_tokenizer_load_gguf(fuzz_shared("vocab/ggml-vocab-gpt-2.gguf"), &toks[0], &err) != TS_OK)
        fuzz_fail("cannot load ggml-vocab-gpt-2.gguf: %s", err.msg);
    for (int i = 1; i < N_PRES; i++) {
        tokenizer_vocab v = *tokenizer_get_vocab(toks[0]); /* tokenizer_create copies it */
        snprintf(v.pre, sizeof v.pre, "%s", pres[i]);
        if (tokenizer_create(&v, &toks[i], &err) != TS_OK)
            fuzz_fail("cannot build the %s tokenizer: %s", pres[i], err.msg);
    }
    for (int i = 0; i < N_PRES; i++)
        fuzz_tokenizer_require_bytes(toks[i]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_tokenizer_check(toks[size ? (data[0] >> 3) % N_PRES : 0], data, size);
    return 0;
}
