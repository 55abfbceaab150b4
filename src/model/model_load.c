/* model_load.c: the public entry points that load a model: a GGUF file by its magic
 * (model_gguf_load.c), anything else as a llama2.c checkpoint with its tokenizer
 * (model_llama2c.c). */
#include <stdio.h>
#include <string.h>

#include "model/model.h"

/* GGUF files start with these four bytes; anything else is taken for llama2.c. */
static int is_gguf_file(const char *path, ts_error *err, ts_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *st = ts_error_set(err, TS_ERR_IO, "cannot open %s", path);
        return -1;
    }
    char magic[4] = {0};
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return got == 4 && memcmp(magic, "GGUF", 4) == 0;
}

ts_status ts_model_load_with(const char *path, const ts_model_load_opts *opts, ts_model **out,
                             ts_error *err)
{
    *out = NULL;
    static const ts_model_load_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    const char *tokenizer_path = opts->tokenizer_path;
    ts_status st = TS_OK;
    int gguf = is_gguf_file(path, err, &st);
    if (gguf < 0)
        return st;
    if (gguf)
        return model_load_gguf(path, opts, out, err);
    if (!tokenizer_path)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "%s is not GGUF; a llama2.c checkpoint needs its tokenizer file",
                            path);
    return model_load_llama2c(path, tokenizer_path, out, err);
}

ts_status ts_model_load(const char *path, const char *tokenizer_path, ts_model **out,
                        ts_error *err)
{
    ts_model_load_opts opts = {.tokenizer_path = tokenizer_path};
    return ts_model_load_with(path, &opts, out, err);
}

