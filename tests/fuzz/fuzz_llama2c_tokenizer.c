/* fuzz_llama2c_tokenizer.c: libFuzzer target: llama2.c tokenizer.bin files through
 * ts_tokenizer_load_llama2c (via a scratch file), then encoding and decoding with what
 * loads.
 *
 * Checked: failures carry a message and their status; a file that loads with every token
 * (vocab_size 0) holding N tokens also loads with vocab_size N and with a smaller count,
 * each giving exactly that many tokens, and refuses N + 1 as truncated; tokenizing with
 * the loaded vocabulary succeeds and gives ids inside it. */
#include <string.h>

#include "common.h"
#include "tokenizer_props.h"
#include "tessera/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static ts_tokenizer *load(const char *path, int vocab_size, ts_status want_fail)
{
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    ts_status st = ts_tokenizer_load_llama2c(path, vocab_size, &tok, &err);
    if (st != TS_OK) {
        FUZZ_CHECK(err.msg[0] != '\0' && err.status == st,
                   "ts_tokenizer_load_llama2c failed (%s) without a message", ts_status_str(st));
        FUZZ_CHECK(tok == NULL, "the loader failed but returned a tokenizer");
        FUZZ_CHECK(want_fail != TS_OK, "loading %d tokens failed: %s", vocab_size, err.msg);
        return NULL;
    }
    FUZZ_CHECK(want_fail == TS_OK || vocab_size == 0, "loading %d tokens succeeded", vocab_size);
    if (vocab_size > 0)
        FUZZ_CHECK(ts_tokenizer_vocab_size(tok) == vocab_size, "asked for %d tokens, got %d",
                   vocab_size, ts_tokenizer_vocab_size(tok));
    return tok;
}

static void use(const ts_tokenizer *tok, const uint8_t *data, size_t size)
{
    static const char *const texts[] = {"Once upon a time", "  x\n\n\xe2\x82\xac", "\xff\xfe",
                                        "<s><unk></s>"};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
        fuzz_tokenizer_use(tok, texts[k], strlen(texts[k]));
    fuzz_tokenizer_use(tok, (const char *)data, size < 64 ? size : 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_scratch_file(0, data, size);
    ts_tokenizer *all = load(path, 0, TS_ERR_FORMAT);
    if (!all)
        return 0;
    int n = ts_tokenizer_vocab_size(all);
    use(all, data, size);
    ts_tokenizer_free(all);
    ts_tokenizer_free(load(path, n, TS_OK));
    ts_tokenizer_free(load(path, (n + 1) / 2, TS_OK));
    load(path, n + 1, TS_ERR_FORMAT);
    return 0;
}
