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
                 "                     [--seed S] [--tiny] [--peaked] [--pooling KIND]\n"
                 "                     [--distinct-rows N] -o OUT.gguf\n"
                 "       tessera synth --list\n"
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
                 "  --tiny     the shape shrunk to a few KiB with its family's features (2 KV\n"
                 "             heads of 16, dim 64, vocabulary 512, a window of 8), for checks\n"
                 "  --peaked   a trained model's scales (matrices 1/sqrt(inputs), output\n"
                 "             14/sqrt(dim)): logits spread widely, greedy text has clear\n"
                 "             margins (files to compare with another implementation)\n"
                 "  --pooling  none, mean, cls, last or rank: the file's ARCH.pooling_type (an\n"
                 "             embedding model); default the shape's: last for\n"
                 "             qwen3-embedding-0.6b, none (a generative model) for the others\n"
                 "  --distinct-rows N  each quantized layer matrix holds N distinct rows (drawn\n"
                 "             as usual), every other row a copy of one of them: the same\n"
                 "             speed to run, a large file written in seconds instead of\n"
                 "             minutes (files for benchmarks; the embedding, output, norms\n"
                 "             and routers stay fully drawn)\n"
                 "  --list     print each shape's family and hyper-parameters, and exit\n"
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
    const char *shape, *vocab, *out, *type, *pooling;
    uint64_t seed;
    uint32_t distinct_rows;
    bool tiny, peaked, list;
} synth_args;

/* One of synth's options (cli_spec.own); each but --tiny, --peaked and --list takes a
 * value. */
static int synth_option(void *ctx, const char *a, const char *v)
{
    synth_args *o = ctx;
    if (!strcmp(a, "--tiny"))
        o->tiny = true;
    else if (!strcmp(a, "--peaked"))
        o->peaked = true;
    else if (!strcmp(a, "--list"))
        o->list = true;
    else if (!strcmp(a, "--shape"))
        o->shape = v;
    else if (!strcmp(a, "--type"))
        o->type = v;
    else if (!strcmp(a, "--vocab"))
        o->vocab = v;
    else if (!strcmp(a, "--pooling"))
        o->pooling = v;
    else if (!strcmp(a, "--seed"))
        return cli_u64(a, v, &o->seed) ? 1 : -1;
    else if (!strcmp(a, "--distinct-rows")) {
        uint64_t n;
        if (!cli_u64(a, v, &n) || n == 0 || n > 1u << 20) {
            fprintf(stderr, "tessera synth: --distinct-rows takes 1 to %u\n", 1u << 20);
            return -1;
        }
        o->distinct_rows = (uint32_t)n;
    }
    else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
        o->out = v;
    else
        return 0;
    return 1;
}

/* Weights in c's matrices, the embedding and (untied) output included. */
static double params(const ts_model_config *c)
{
    double dim = c->dim, q = (double)c->n_heads * c->head_dim;
    double kv = (double)c->n_kv_heads * c->head_dim;
    double experts = c->n_experts > 0 ? c->n_experts : 1; /* and a mixture's router */
    double layer = dim * (q + 2 * kv) + q * dim + experts * 3 * dim * c->hidden_dim +
                   (c->n_experts > 0 ? dim * c->n_experts : 0) +
                   (c->shared_ffn_dim > 0 ? dim * (3.0 * c->shared_ffn_dim + 1) : 0);
    return (double)c->vocab_size * dim * (c->tied_output ? 1 : 2) + c->n_layers * layer;
}

/* The features beyond Llama's that c's file carries, space-separated, into buf; "-" for
 * none. */
static const char *features(char *buf, size_t cap, const ts_model_config *c)
{
    size_t n = 0;
    buf[0] = '\0';
#define FEATURE(...)                                                \
    do {                                                            \
        if (n < cap)                                                \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);   \
    } while (0)
    if (c->tied_output)
        FEATURE(" tied");
    if (c->qkv_fused)
        FEATURE(" fused-qkv");
    if (c->ffn_fused)
        FEATURE(" fused-gate-up");
    if (c->qkv_bias)
        FEATURE(" qkv-bias");
    if (c->qk_norm)
        FEATURE(" qk-norm");
    if (c->post_norms)
        FEATURE(" post-norms");
    if (c->embd_scaled)
        FEATURE(" embd-scaled");
    if (c->ffn_act == TS_FFN_GELU_TANH)
        FEATURE(" geglu");
    if (c->encoder)
        FEATURE(c->pos_embd ? " encoder gelu" : " encoder");
    if (c->rope_neox)
        FEATURE(" rope-neox");
    if (c->rope_factors)
        FEATURE(" rope-llama3");
    if (c->rope_scale != 1.0f)
        FEATURE(" rope-linear:%g", (double)c->rope_scale);
    if (c->swa_window)
        FEATURE(" window:%d/%d", c->swa_window, c->swa_pattern);
    if (c->rope_freq_base_swa > 0.0f)
        FEATURE(" rope-base-window:%g", (double)c->rope_freq_base_swa);
    if (c->n_experts > 0)
        FEATURE(" experts:%d/%d%s", c->n_experts, c->n_experts_used,
                c->experts_unnormed ? "-unnormed" : "");
    if (c->shared_ffn_dim > 0)
        FEATURE(" shared-expert:%d", c->shared_ffn_dim);
    if (c->attn_softcap > 0.0f || c->final_softcap > 0.0f)
        FEATURE(" softcap:%g/%g", (double)c->attn_softcap, (double)c->final_softcap);
    if (c->pooling != TS_POOLING_NONE)
        FEATURE(" pooling:%s", c->pooling == TS_POOLING_MEAN   ? "mean"
                               : c->pooling == TS_POOLING_CLS  ? "cls"
                               : c->pooling == TS_POOLING_RANK ? "rank"
                                                               : "last");
#undef FEATURE
    return buf[0] ? buf + 1 : "-";
}

static void list_shapes(FILE *out)
{
    fprintf(out, "%-17s %-7s %7s %5s %5s %6s %6s %4s %6s %7s %7s %9s %6s  %s\n", "shape",
            "arch", "params", "dim", "ffn", "layers", "heads", "kv", "head", "vocab", "context",
            "rope", "eps", "features");
    for (int i = 0; model_synth_shape_name(i); i++) {
        ts_model_config c;
        char feat[256];
        model_synth_shape(&c, model_synth_shape_name(i));
        fprintf(out, "%-17s %-7s %6.2fB %5d %5d %6d %6d %4d %6d %7d %7d %9g %6g  %s\n",
                model_synth_shape_name(i), c.arch, params(&c) * 1e-9, c.dim, c.hidden_dim,
                c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.context_len,
                (double)c.rope_freq_base, (double)c.rms_eps, features(feat, sizeof feat, &c));
    }
}

int cli_synth(int argc, char **argv)
{
    synth_args o = {.vocab = NULL, .type = "f32", .seed = 1};
    char builtin[4096];
    static const char *const flags[] = {"--tiny", "--peaked", "--list", NULL};
    cli_spec spec = {"synth", usage, flags, NULL, NULL, NULL, synth_option, &o, NULL};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    if (o.list) {
        list_shapes(stdout);
        return 0;
    }
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
    if (o.tiny)
        model_synth_shrink(&cfg);
    if (o.pooling) {
        static const char *const kinds[] = {"none", "mean", "cls", "last", "rank"};
        int k = 0;
        while (k < 5 && strcmp(o.pooling, kinds[k]))
            k++;
        if (k == 5) {
            fprintf(stderr, "tessera synth: unknown --pooling '%s' (none, mean, cls, last, "
                            "rank)\n", o.pooling);
            return 2;
        }
        cfg.pooling = (ts_pooling)k;
        cfg.cls_out = cfg.encoder && cfg.pooling == TS_POOLING_RANK; /* the head synth writes */
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
    model_synth_opts opts = {.peaked = o.peaked, .distinct_rows = o.distinct_rows};
    if (model_synth_write_with(out, &cfg, type, &v, seed, &opts, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        rc = 1;
    } else {
        struct stat st;
        fprintf(stderr, "tessera: wrote %s (%s%s, %s, %lld bytes) in %.1f s\n", out, shape,
                o.tiny ? " shrunk" : "", type,
                stat(out, &st) == 0 ? (long long)st.st_size : -1LL, seconds() - t0);
    }
    vocab_clear(&v);
    return rc;
}
