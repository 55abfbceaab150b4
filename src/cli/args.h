/* args.h: option parsing and model loading shared by the subcommands. Each parser prints
 * "tessera: ..." naming the option on a bad value and returns false. */
#ifndef TESSERA_CLI_ARGS_H
#define TESSERA_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/model.h"

bool cli_int(const char *opt, const char *s, long min, long max, int *out);
bool cli_float(const char *opt, const char *s, double min, double max, float *out);
bool cli_u64(const char *opt, const char *s, uint64_t *out);
/* "512M", "2G", "1.5G", plain bytes. */
bool cli_size(const char *opt, const char *s, size_t *out);

/* The value after option argv[*i]; advances *i. NULL (with a message) when missing. */
const char *cli_value(int argc, char **argv, int *i);

/* The model to use when none is named: $TESSERA_MODEL, else the first models/NAME.gguf in
 * the current directory, else ../shared/models/stories260K/stories260K.gguf. Returns a
 * static buffer. */
const char *cli_default_model(void);

/* Loads path (and tokenizer, for llama2.c checkpoints) and logs one line to stderr; on
 * failure prints the error and returns NULL. */
ts_model *cli_load_model(const char *path, const char *tokenizer_path);

#endif
