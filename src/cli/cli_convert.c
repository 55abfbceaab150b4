/* cli_convert.c: `tessera convert`: a model (GGUF, or llama2.c with its tokenizer) written
 * out as an F32 GGUF file, through a temporary name so a failure leaves no half file. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera convert -m MODEL [--tokenizer TOK] -o OUT.gguf\n"
                 "  writes MODEL (.gguf, or llama2.c .bin with --tokenizer) as GGUF v3 with F32\n"
                 "  tensors; quantised inputs are written dequantised. OUT must not be an input.\n");
}

/* True when both paths name one existing file. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* -o/--output, convert's own option (cli_spec.own; ctx: the path). */
static int output_option(void *ctx, const char *a, const char *v)
{
    if (strcmp(a, "-o") && strcmp(a, "--output"))
        return 0;
    *(const char **)ctx = v;
    return 1;
}

int cli_convert(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL, *out = NULL;
    cli_spec spec = {"convert", usage, NULL, &model, &tokenizer, NULL, output_option, &out, NULL};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    if (!model || !out) {
        fprintf(stderr, "tessera convert: give -m MODEL and -o OUT\n");
        usage(stderr);
        return 2;
    }
    if (same_file(model, out) || same_file(tokenizer, out)) {
        fprintf(stderr, "tessera: refusing to overwrite the input %s\n", out);
        return 1;
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid()) >= (int)sizeof tmp) {
        fprintf(stderr, "tessera: output path too long\n");
        return 1;
    }
    ts_model *m = cli_load_model(model, tokenizer, NULL);
    if (!m)
        return 1;
    ts_error err = {0};
    int rc = 1;
    if (ts_model_save_gguf(m, tmp, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
    } else if (rename(tmp, out) != 0) {
        fprintf(stderr, "tessera: cannot rename %s to %s\n", tmp, out);
    } else {
        struct stat st;
        fprintf(stderr, "tessera: wrote %s (%lld bytes)\n", out,
                stat(out, &st) == 0 ? (long long)st.st_size : -1LL);
        rc = 0;
    }
    if (rc != 0)
        remove(tmp);
    ts_model_free(m);
    return rc;
}
