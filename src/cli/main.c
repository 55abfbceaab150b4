/* main.c: `tessera SUBCOMMAND ...`: finds the subcommand and runs it. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/threads.h"

static const cli_command commands[] = {
    {"generate", cli_generate, "complete prompts (one, or a file of them concurrently)"},
    {"bench", cli_bench, "engine throughput and latency at several concurrency levels"},
    {"tokenize", cli_tokenize, "print the token ids of a text"},
    {"embed", cli_embed, "print the embeddings of standard input's lines as JSON lines"},
    {"template", cli_template, "print the prompt a model's chat template makes of a chat"},
    {"serve", cli_serve, "serve models over an OpenAI-compatible HTTP API"},
    {"info", cli_info, "describe a model file: config, vocabulary, metadata, tensors"},
    {"convert", cli_convert, "write a model (GGUF or llama2.c) as an F32 GGUF file"},
    {"quantize", cli_quantize, "write an F32/F16/BF16 GGUF in a quantized type (Q4_K_M, ...)"},
    {"synth", cli_synth, "write a GGUF with random weights at a real model's shape"},
    {"loadgen", cli_loadgen, "load a server over HTTP: throughput, TTFT/ITL percentiles"},
    {"pull", cli_pull, "fetch a GGUF from a Hugging Face repository into the model directory"},
    {"version", cli_version, "print the version, commit, build and the kernels this CPU runs"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera COMMAND [options]\n\ncommands:\n");
    for (const cli_command *c = commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\n`tessera COMMAND --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
    cli_threads_init(argv); /* may re-execute the binary: before anything else */
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version"))
        return cli_version(argc - 1, argv + 1);
    for (const cli_command *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name))
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "tessera: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
