/* cli_synth.c: `tessera synth`: a GGUF model with random weights at a real model's shape
 * and a vocabulary borrowed from another GGUF, for benchmarks. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/models.h"
#include "model/model_gguf.h"
#include "model/synth.h"
#include "quant/quantize.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera synth --shape SHAPE [--type TYPE] [--vocab FILE.gguf]\n"
                 "                     [--seed S] -o OUT.gguf\n"
                 "  SHAPE:");
    for (int i = 0; model_synth_shape_name(i); i++)
        fprintf(out, " %s", model_synth_shape_name(i));
    fprintf(out, "\n  TYPE:");
    for (int i = 0; quant_ftype_name(i); i++)
        fprintf(out, " %s", quant_ftype_name(i));
    fprintf(out, "\n"
                 "  --type     the file's type, as `tessera quantize` writes it: each matrix\n"
                 "             gets llama.cpp's type for it (default F32; norms stay F32)\n"
                 "  --vocab    GGUF whose tokenizer.ggml.* vocabulary is copied (default: the\n"
                 "             built-in stories260K.gguf, 512 tokens); one smaller than the\n"
                 "             shape's is padded with <unused_N> tokens, a larger one refused\n"
                 "  --seed     random seed (default 1); the same arguments give the same bytes\n"
                 "  weights are normal with std %g, norm weights 1.\n", (double)MODEL_SYNTH_STD);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The vocabulary of the GGUF at path into v; false (with a message) on failure. */
static bool read_vocab(tokenizer_vocab *v, const char *path, bool is_default)
{
    gguf_file *f = NULL;
    ts_error err = {0};
    ts_status st = gguf_open(path, &f, &err);
    if (st == TS_OK)
        st = vocab_read_gguf(v, f, &err);
    gguf_close(f);
    if (st != TS_OK)
        fprintf(stderr, "tessera: vocabulary: %s%s\n", err.msg,
                is_default ? " (the default; name a GGUF with --vocab)" : "");
    return st == TS_OK;
}

typedef struct synth_args {
    const char *shape, *vocab, *out, *type;
    uint64_t seed;
} synth_args;

/* One of synth's options (cli_spec.own); each takes a value. */
static int synth_option(void *ctx, const char *a, const char *v)
{
    synth_args *o = ctx;
    if (!strcmp(a, "--shape"))
        o->shape = v;
    else if (!strcmp(a, "--type"))
        o->type = v;
    else if (!strcmp(a, "--vocab"))
        o->vocab = v;
    else if (!strcmp(a, "--seed"))
        return cli_u64(a, v, &o->seed) ? 1 : -1;
    else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
        o->out = v;
    else
        return 0;
    return 1;
}

int cli_synth(int argc, char **argv)
{
    synth_args o = {.vocab = NULL, .type = "f32", .seed = 1};
    char builtin[4096];
    cli_spec spec = {"synth", usage, NULL, NULL, NULL, NULL, synth_option, &o};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    const char *shape = o.shape, *vocab = o.vocab, *out = o.out, *type = o.type;
    uint64_t seed = o.seed;
    ts_model_config cfg;
    if (!shape || !out) {
        fprintf(stderr, "tessera synth: give --shape and -o\n");
        usage(stderr);
        return 2;
    }
    if (!model_synth_shape(&cfg, shape)) {
        fprintf(stderr, "tessera synth: unknown shape '%s'\n", shape);
        usage(stderr);
        return 2;
    }
    quant_ftype ftype;
    if (!quant_ftype_parse(&ftype, type)) { /* a usage error here, before reading anything */
        fprintf(stderr, "tessera synth: unknown --type '%s'\n", type);
        usage(stderr);
        return 2;
    }
    bool is_default = !vocab;
    if (is_default && !cli_builtin_model(builtin, sizeof builtin)) {
        fprintf(stderr, "tessera synth: the built-in model is not installed; name a "
                        "vocabulary with --vocab FILE.gguf\n");
        return 1;
    }
    if (is_default)
        vocab = builtin;
    tokenizer_vocab v;
    if (!read_vocab(&v, vocab, is_default))
        return 1;
    double t0 = seconds();
    ts_error err = {0};
    int rc = 0;
    if (model_synth_write(out, &cfg, type, &v, seed, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        rc = 1;
    } else {
        struct stat st;
        fprintf(stderr, "tessera: wrote %s (%s, %s, %lld bytes) in %.1f s\n", out, shape, type,
                stat(out, &st) == 0 ? (long long)st.st_size : -1LL, seconds() - t0);
    }
    vocab_clear(&v);
    return rc;
}
