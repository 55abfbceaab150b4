/* config.h: `tessera serve --config FILE`: a JSON file of serve's options, turned into the
 * same arguments the command line takes so that one parser checks both. */
#ifndef TESSERA_CLI_CONFIG_H
#define TESSERA_CLI_CONFIG_H

#include "tessera/status.h"

/* The arguments a config file stands for, argv[0] being "serve". */
typedef struct cli_config {
    char **argv; /* owned, argc strings, each owned */
    int argc;
} cli_config;

/* Reads the JSON at path (borrowed) into out (overwritten; free with cli_config_free):
 *   {"host": "127.0.0.1", "port": 8080,
 *    "models": ["a.gguf", {"name": "tiny", "path": "models/t.gguf"}, "NAME"],
 *    "model_dir": DIR, "tokenizer": PATH, "chat_template": NAME,
 *    "api_keys": PATH, "protect_metrics": true, "log_format": "text" | "json",
 *    "limits": {"max_body": SIZE, "max_connections": N, "max_buffered": SIZE, "grace": S},
 *    "engine": {"threads": N, "kv_mem": SIZE, "kv_type": "auto" | "f32" | "f16" | "q8_0",
 *               "kv_f16": true (= "kv_type": "f16"), "max_seqs": N,
 *               "max_queue": N, "step_tokens": N, "prefill_cap": N, "aging": R,
 *               "prefix_cache": false}}
 * Every key is optional; an unknown key, a value of the wrong JSON type or a file over
 * 1 MiB is refused naming it (values themselves are checked by serve's parser). Relative
 * paths are read from the file's directory; a model given as a bare name (no '/') is
 * looked up in the model directories as on the command line. Keys stay in their own file
 * (api_keys), so the config can be readable by more people than the secrets. */
ts_status cli_config_load(cli_config *out, const char *path, ts_error *err);

/* serve's whole argument vector into out: the arguments of the file named by --config in
 * argv (argv[0] first), if any, then the rest of argv less --config FILE, so that the
 * command line adds models to the file's and overrides its other values. Refuses a
 * second --config. */
ts_status cli_config_args(cli_config *out, int argc, char **argv, ts_error *err);

/* Accepts a zeroed or half-built config. */
void cli_config_free(cli_config *c);

#endif
