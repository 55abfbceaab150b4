/* fuzz_llama2c_model.c: libFuzzer target: llama2.c checkpoints through the real loader
 * (model_load_llama2c reads paths, so each input goes to a scratch file).
 *
 * Input: the checkpoint, optionally followed by the separator "TSTOKBIN" and the bytes of
 * its tokenizer.bin; without one the tokenizer is ../shared's tok512.bin. Checked: every
 * failure carries a message and its own status; a loaded model has a validated config
 * and a tokenizer of the config's vocabulary size. */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "model/model.h"

static char tok512[4096];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(tok512, sizeof tok512, "%s", fuzz_shared("models/stories260K/tok512.bin"));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "TSTOKBIN";
    const uint8_t *split = memmem(data, size, sep, sizeof sep - 1);
    size_t n_ckpt = split ? (size_t)(split - data) : size;
    const char *ckpt = fuzz_scratch_file(0, data, n_ckpt);
    const char *tok = tok512;
    if (split) {
        size_t off = n_ckpt + sizeof sep - 1;
        tok = fuzz_scratch_file(1, data + off, size - off);
    }
    ts_model *m = NULL;
    ts_error err = {0};
    ts_status st = model_load_llama2c(ckpt, tok, &m, &err);
    if (st != TS_OK) {
        FUZZ_CHECK(err.msg[0] != '\0' && err.status == st,
                   "model_load_llama2c failed (%s) without a message", ts_status_str(st));
        FUZZ_CHECK(m == NULL, "the loader failed but returned a model");
        return 0;
    }
    const ts_model_config *c = ts_model_get_config(m);
    FUZZ_CHECK(model_config_validate(c, NULL) == TS_OK, "a loaded model's config is invalid");
    FUZZ_CHECK(ts_tokenizer_vocab_size(ts_model_get_tokenizer(m)) == c->vocab_size,
               "a model of %d tokens has a tokenizer of %d", c->vocab_size,
               ts_tokenizer_vocab_size(ts_model_get_tokenizer(m)));
    ts_model_free(m);
    return 0;
}
