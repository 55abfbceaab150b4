/* cli_tokenize.c: `tessera tokenize`: prints the token ids of a text or a file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera tokenize [-m MODEL] [--tokenizer TOK] [--no-bos] [--no-parse-special]\n"
                 "                        (-p TEXT | --file F)\n"
                 "  prints token ids separated by spaces; --file tokenizes the file's bytes exactly\n"
                 "  (a trailing newline included). MODEL may be a vocabulary-only GGUF. Special\n"
                 "  tokens spelled out (\"</s>\", \"<|im_start|>\") become those tokens, as in a\n"
                 "  completion prompt, unless --no-parse-special. As llama.cpp adds special\n"
                 "  tokens, BOS comes first where the vocabulary says to\n"
                 "  (tokenizer.ggml.add_bos_token), EOS last where it says to\n"
                 "  (tokenizer.ggml.add_eos_token: t5 vocabularies), and a bert vocabulary's\n"
                 "  text is [CLS] ... [SEP]; --no-bos adds none of them.\n");
}

/* Reads a whole file (bytes, any content); NULL with errno set on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    /* fread's 0 is also a read error (a directory, EIO): not the end of the file. */
    if (ferror(f)) {
        int saved = errno;
        free(buf);
        fclose(f);
        errno = saved;
        return NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

typedef struct tok_args {
    const char *text, *file;
    bool bos, parse_special;
} tok_args;

/* One of tokenize's own options (cli_spec.own). */
static int tok_option(void *ctx, const char *a, const char *v)
{
    tok_args *t = ctx;
    if (!strcmp(a, "--no-bos"))
        t->bos = false;
    else if (!strcmp(a, "--no-parse-special"))
        t->parse_special = false;
    else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
        t->text = v;
    else if (!strcmp(a, "--file"))
        t->file = v;
    else
        return 0;
    return 1;
}

int cli_tokenize(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL;
    tok_args t = {.bos = true, .parse_special = true};
    static const char *const flags[] = {"--no-bos", "--no-parse-special", NULL};
    cli_spec spec = {"tokenize", usage, flags, &model, &tokenizer, NULL, tok_option, &t, NULL};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    const char *text = t.text, *file = t.file;
    if (!text == !file) {
        fprintf(stderr, "tessera tokenize: give exactly one of -p and --file\n");
        return 2;
    }
    if (!model && !(model = cli_default_model()))
        return 1;

    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    ts_status st = tokenizer ? ts_tokenizer_load_llama2c(tokenizer, 0, &tok, &err)
                             : ts_tokenizer_load_gguf(model, &tok, &err);
    if (st != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        return 1;
    }
    size_t len = text ? strlen(text) : 0, n = 0;
    char *data = file ? slurp(file, &len) : NULL;
    int32_t *ids = NULL;
    int rc = 1;
    if (file && !data) {
        fprintf(stderr, "tessera: cannot read %s: %s\n", file, strerror(errno));
        goto out;
    }
    const char *src = file ? data : text;
    ts_tokenize_opts opts = {
        .add_special = t.bos, .add_eos = true, .parse_special = t.parse_special};
    if ((st = ts_tokenize_alloc(tok, src, len, &opts, &ids, &n)) != TS_OK) {
        fprintf(stderr, "tessera: cannot tokenize: %s\n", ts_status_str(st));
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    rc = 0;
out:
    free(ids);
    free(data);
    ts_tokenizer_free(tok);
    return rc;
}
