/* cli_convert.c: `tessera convert`: a model (GGUF, or llama2.c with its tokenizer) written
 * out as an F32 GGUF file, through a temporary name so a failure leaves no half file. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "model/hf_convert.h"
#include "quant/quantize.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera convert -m MODEL [--tokenizer TOK] [--type TYPE] -o OUT.gguf\n"
                 "  writes MODEL (.gguf, or llama2.c .bin with --tokenizer) as GGUF v3 with F32\n"
                 "  tensors; quantised inputs are written dequantised. OUT must not be an input.\n"
                 "  MODEL may be a Hugging Face Llama directory (config.json, *.safetensors,\n"
                 "  tokenizer.json): its tensors are written as --type: f32 (default), f16,\n"
                 "  bf16 (norms stay f32), or any type tessera quantize writes (Q8_0, Q4_K_M...).\n");
}

/* True when both paths name one existing file. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* convert's own options (cli_spec.own; ctx: [0] the output path, [1] the --type). */
static int output_option(void *ctx, const char *a, const char *v)
{
    const char **o = ctx;
    if (!strcmp(a, "-o") || !strcmp(a, "--output"))
        o[0] = v;
    else if (!strcmp(a, "--type"))
        o[1] = v;
    else
        return 0;
    return 1;
}

/* A Hugging Face directory to quantization ft: an F32 GGUF beside tmp first, quantized
 * from there as `tessera quantize` does, then renamed to out. */
static int convert_quantized(const char *dir, const char *tmp, const char *out,
                             quant_ftype ft)
{
    char f32[4200];
    snprintf(f32, sizeof f32, "%s.f32", tmp);
    ts_error err = {0};
    gguf_file *in = NULL;
    int rc = 1;
    if (model_hf_convert(dir, f32, GGUF_TENSOR_F32, &err) != TS_OK ||
        gguf_open(f32, &in, &err) != TS_OK ||
        quant_gguf_write(tmp, in, ft, NULL, NULL, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
    } else if (rename(tmp, out) != 0) {
        fprintf(stderr, "tessera: cannot rename %s to %s\n", tmp, out);
    } else {
        struct stat st;
        fprintf(stderr, "tessera: wrote %s (%lld bytes)\n", out,
                stat(out, &st) == 0 ? (long long)st.st_size : -1LL);
        rc = 0;
    }
    gguf_close(in);
    remove(f32);
    if (rc != 0)
        remove(tmp);
    return rc;
}

int cli_convert(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL, *own[2] = {NULL, "f32"};
    cli_spec spec = {"convert", usage, NULL, &model, &tokenizer, NULL, output_option, own};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    const char *out = own[0], *type = own[1];
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
    uint32_t ttype = !strcmp(type, "f32") ? GGUF_TENSOR_F32 : !strcmp(type, "f16") ? GGUF_TENSOR_F16
                     : !strcmp(type, "bf16") ? GGUF_TENSOR_BF16 : UINT32_MAX;
    bool hf = model_hf_is_dir(model);
    quant_ftype ft = QUANT_FTYPE_F32;
    bool quantize = hf && ttype == UINT32_MAX && quant_ftype_parse(&ft, type);
    if ((ttype == UINT32_MAX && !quantize) || (!hf && ttype != GGUF_TENSOR_F32)) {
        fprintf(stderr, "tessera convert: --type wants f32%s, not '%s'\n",
                hf ? ", f16, bf16 or a type tessera quantize writes"
                   : " (others: Hugging Face directories)", type);
        return 2;
    }
    if (quantize)
        return convert_quantized(model, tmp, out, ft);
    ts_model *m = hf ? NULL : cli_load_model(model, tokenizer);
    if (!hf && !m)
        return 1;
    ts_error err = {0};
    int rc = 1;
    if (hf ? model_hf_convert(model, tmp, ttype, &err) != TS_OK
           : ts_model_save_gguf(m, tmp, &err) != TS_OK) {
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
