/* models.h: where the CLI finds model files: -m PATH or NAME, the model directories, and
 * the built-in default model installed with the binary. */
#ifndef TESSERA_CLI_MODELS_H
#define TESSERA_CLI_MODELS_H

#include <stdbool.h>
#include <stddef.h>

/* The model directories, in the order they are searched: model_dir (--model-dir, may be
 * NULL), each directory of $TESSERA_MODELS (colon-separated), then models/ in the current
 * directory. */

/* Writes to out (cap bytes) the model file that arg names:
 *   arg a file that exists          -> arg itself;
 *   arg a bare name (no '/')        -> NAME or NAME.gguf in the first model directory
 *                                      holding one;
 *   arg NULL (no -m given)          -> $TESSERA_MODEL if set, else the first *.gguf (in
 *                                      name order) of the first model directory holding
 *                                      one, else the built-in default (stories260K.gguf
 *                                      in PREFIX/share/tessera/models beside the binary,
 *                                      then the configured install prefix, then the
 *                                      source tree's models/default/).
 * On failure prints every place it looked to stderr and returns false. Borrowed strings;
 * reads the environment; not thread-safe against setenv. */
bool cli_model_path(const char *arg, const char *model_dir, char *out, size_t cap);

/* The built-in default model (the last step above) into out; false when none of its
 * places holds it. */
bool cli_builtin_model(char *out, size_t cap);

#endif
