/* cli.h: the subcommands of the tessera binary. Each returns the process exit status. */
#ifndef TESSERA_CLI_H
#define TESSERA_CLI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
    const char *summary;
} cli_command;

int cli_bench(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_embed(int argc, char **argv);
int cli_template(int argc, char **argv);

/* The time chat templates' strftime_now shows: $SOURCE_DATE_EPOCH (reproducible output,
 * as in reproducible builds) when set, else 0 (the clock). */
long long cli_template_time(void);
int cli_serve(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_convert(int argc, char **argv);
int cli_synth(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_loadgen(int argc, char **argv);
int cli_pull(int argc, char **argv);
int cli_version(int argc, char **argv);

/* serve's route for a model: its general.name, or, when one of the n_taken routes already
 * assigned has that name, the file's base name without its last extension (route
 * "tinyllama-1.1b.Q8_0" for models/tinyllama-1.1b.Q8_0.gguf). Writes out (cap bytes). */
void cli_route_name(const char *model_name, const char *path, const char *const *taken,
                    int n_taken, char *out, size_t cap);

/* serve's -m [NAME=]PATH: when arg starts with a name (letters, digits, - _ . :) and '=',
 * writes the name to route and points *path past the '='; otherwise route is "" and *path
 * is arg ("dir/a=b.gguf" is a path). False, after printing why, for a bad name. */
bool cli_route_arg(const char *arg, char *route, size_t route_cap, const char **path);

#endif
