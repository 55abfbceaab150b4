/* cli_quantize.c: `tessera quantize IN.gguf OUT.gguf TYPE`: an F32, F16 or BF16 GGUF model
 * written in one of llama.cpp's ftypes, through a temporary name so a failure leaves no
 * half file. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "quant.h"
#include "quant/quantize.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera quantize [--progress] IN.gguf OUT.gguf TYPE\n"
                 "  writes IN (F32, F16 or BF16 tensors) with its matrices quantized; the\n"
                 "  tensors get the types llama.cpp's quantizer gives them for TYPE (the LM\n"
                 "  head, attn_v and ffn_down often get more bits; norms stay F32) and all\n"
                 "  metadata is copied.\n"
                 "  TYPE:");
    for (int i = 0; quant_ftype_name(i); i++)
        fprintf(out, " %s", quant_ftype_name(i));
    fprintf(out, "\n"
                 "  --progress  print each tensor as it is written (the default when stderr\n"
                 "              is a terminal)\n");
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static void show_progress(void *user, uint64_t i, uint64_t n, const char *name, uint32_t type)
{
    (void)user;
    fprintf(stderr, "[%4llu/%4llu] %-32s %s\n", (unsigned long long)i + 1,
            (unsigned long long)n, name, qtype_name(type));
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_quantize(int argc, char **argv)
{
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    bool progress = isatty(STDERR_FILENO);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--progress")) {
            progress = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tessera quantize: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "tessera quantize: too many arguments\n");
            usage(stderr);
            return 2;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "tessera quantize: give IN.gguf OUT.gguf TYPE\n");
        usage(stderr);
        return 2;
    }
    const char *in_path = pos[0], *out = pos[1];
    quant_ftype ft;
    if (!quant_ftype_parse(&ft, pos[2])) {
        fprintf(stderr, "tessera quantize: unknown TYPE '%s'\n", pos[2]);
        usage(stderr);
        return 2;
    }
    if (same_file(in_path, out)) {
        fprintf(stderr, "tessera: refusing to overwrite the input %s\n", out);
        return 1;
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid()) >= (int)sizeof tmp) {
        fprintf(stderr, "tessera: output path too long\n");
        return 1;
    }
    gguf_file *in = NULL;
    ts_error err = {0};
    if (gguf_open(in_path, &in, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        return 1;
    }
    double t0 = seconds();
    int rc = 1;
    if (quant_gguf_write(tmp, in, ft, progress ? show_progress : NULL, NULL, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
    } else if (rename(tmp, out) != 0) {
        fprintf(stderr, "tessera: cannot rename %s to %s\n", tmp, out);
    } else {
        struct stat st;
        fprintf(stderr, "tessera: wrote %s (%s, %lld bytes, from %zu) in %.1f s\n", out,
                pos[2], stat(out, &st) == 0 ? (long long)st.st_size : -1LL, in->size,
                seconds() - t0);
        rc = 0;
    }
    if (rc != 0)
        remove(tmp);
    gguf_close(in);
    return rc;
}
