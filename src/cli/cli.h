/* cli.h: the subcommands of the tessera binary. Each returns the process exit status. */
#ifndef TESSERA_CLI_H
#define TESSERA_CLI_H

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
    const char *summary;
} cli_command;

int cli_bench(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_convert(int argc, char **argv);
int cli_synth(int argc, char **argv);
int cli_loadgen(int argc, char **argv);

#endif
