/* args.c: option values and model loading for the CLI (the model search: models.c). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "common/size_parse.h"

/* strto* skip leading white space and take a '+' (and strtoull a '-', wrapping it to a
 * huge value): an option's number must start with a digit, or '-' where negatives are
 * in range ('.' too for a fraction). */
static bool starts_number(const char *s, bool negative_ok, bool fraction_ok)
{
    return (*s >= '0' && *s <= '9') || (negative_ok && *s == '-') || (fraction_ok && *s == '.');
}

bool cli_int(const char *opt, const char *s, long min, long max, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!starts_number(s, min < 0, false) || errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "tessera: %s wants an integer in %ld..%ld, not '%s'\n", opt, min, max, s);
        return false;
    }
    *out = (int)v;
    return true;
}

bool cli_float(const char *opt, const char *s, double min, double max, float *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!starts_number(s, min < 0, true) || errno || end == s || *end || !isfinite(v) ||
        v < min || v > max) {
        fprintf(stderr, "tessera: %s wants a number in %g..%g, not '%s'\n", opt, min, max, s);
        return false;
    }
    *out = (float)v;
    return true;
}

bool cli_u64(const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!starts_number(s, false, false) || errno || end == s || *end) {
        fprintf(stderr, "tessera: %s wants a non-negative integer, not '%s'\n", opt, s);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

bool cli_int_list(const char *opt, const char *s, long min, long max, int *out, int cap,
                  int *n)
{
    *n = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        char item[32];
        if (len == 0 || len >= sizeof item) {
            fprintf(stderr,
                    "tessera: %s wants integers in %ld..%ld separated by commas, not '%s'\n",
                    opt, min, max, s);
            return false;
        }
        if (*n == cap) {
            fprintf(stderr, "tessera: %s takes at most %d values\n", opt, cap);
            return false;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (!cli_int(opt, item, min, max, &out[*n]))
            return false;
        (*n)++;
        p += len;
        if (!*p)
            return true;
    }
}

bool cli_size(const char *opt, const char *s, size_t *out)
{
    ts_error err = {0};
    if (size_parse(out, s, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s: %s\n", opt, err.msg);
        return false;
    }
    return true;
}

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "tessera: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_load_option(int argc, char **argv, int *i, ts_model_load_opts *o)
{
    const char *arg = argv[*i], *v;
    if (!strcmp(arg, "--mlock"))
        o->mlock = true;
    else if (!strcmp(arg, "--hugepages"))
        o->hugepages = true;
    else if (strcmp(arg, "--pack") && strcmp(arg, "--amx")) /* --amx: the old name */
        return 0;
    else if (!(v = cli_value(argc, argv, i)))
        return -1;
    else if (!ts_pack_mode_parse(v, &o->pack)) {
        fprintf(stderr, "tessera: %s takes auto, off, all or force, not '%s'\n", arg, v);
        return -1;
    }
    return 1;
}

ts_model *cli_load_model(const char *path, const char *tokenizer_path,
                         const ts_model_load_opts *opts)
{
    ts_model *m = NULL;
    ts_error err = {0};
    ts_model_load_opts o = {0};
    if (opts)
        o = *opts;
    o.tokenizer_path = tokenizer_path;
    if (ts_model_load_with(path, &o, &m, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        return NULL;
    }
    const ts_model_config *c = ts_model_get_config(m);
    fprintf(stderr, "tessera: loaded %s (%s, dim %d, %d layers, %d heads, %d kv heads, vocab %d, context %d)\n",
            path, c->name, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
            c->context_len);
    int packed, matrices;
    uint64_t bytes;
    ts_model_packed(m, &packed, &matrices, &bytes);
    if (packed)
        fprintf(stderr, "tessera: packed %d of %d matrices (%s), %.1f MiB\n", packed, matrices,
                ts_pack_kernels(),
                (double)bytes / (1024.0 * 1024.0));
    return m;
}

ts_status cli_env_engine_options(ts_engine_options *o, ts_error *err)
{
    const char *gemm = getenv("TESSERA_GEMM");
    if (gemm && *gemm) {
        static const char *const names[] = {[TS_GEMM_AUTO] = "auto", [TS_GEMM_BLAS] = "blas",
                                            [TS_GEMM_KERNEL] = "kernel"};
        int k = 0;
        while (k <= TS_GEMM_KERNEL && strcmp(gemm, names[k]))
            k++;
        if (k > TS_GEMM_KERNEL)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "TESSERA_GEMM=%s: expected auto, blas or kernel", gemm);
        o->gemm = (ts_gemm_path)k;
    }
    const char *fault = getenv("TESSERA_FAIL_ALLOC_AT");
    if (o->fail_alloc_at == 0 && fault)
        o->fail_alloc_at = atoi(fault);
    return TS_OK;
}

ts_engine *cli_make_engine(const ts_model *m, const ts_engine_options *opts)
{
    ts_engine_options o = *opts;
    ts_engine *e = NULL;
    ts_error err = {0};
    if (cli_env_engine_options(&o, &err) == TS_OK && ts_engine_create(m, &o, &e, &err) == TS_OK)
        return e;
    fprintf(stderr, "tessera: %s\n", err.msg);
    return NULL;
}

static bool is_flag(const cli_spec *s, const char *a)
{
    for (const char *const *f = s->flags; f && *f; f++)
        if (!strcmp(a, *f))
            return true;
    return false;
}

/* -m/--model and --tokenizer, where s takes them: 1 taken, 0 not one, -1 no value. */
static int model_option(int argc, char **argv, int *i, const cli_spec *s)
{
    const char *a = argv[*i];
    const char **out = !s->model                                   ? NULL
                       : !strcmp(a, "-m") || !strcmp(a, "--model") ? s->model
                       : !strcmp(a, "--tokenizer")                 ? s->tokenizer
                                                                   : NULL;
    if (!out)
        return 0;
    return (*out = cli_value(argc, argv, i)) ? 1 : -1;
}

/* cli_parse's loop. */
static int parse_options(int argc, char **argv, const cli_spec *s)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            s->usage(stdout);
            return 0;
        }
        int taken = s->engine ? cli_engine_option(argc, argv, &i, s->engine) : 0;
        if (taken == 0)
            taken = model_option(argc, argv, &i, s);
        if (taken == 0 && s->load)
            taken = cli_load_option(argc, argv, &i, s->load);
        if (taken == 0) {
            if (!is_flag(s, a) && !(v = cli_value(argc, argv, &i)))
                return 2;
            taken = s->own ? s->own(s->ctx, a, v) : 0;
        }
        if (taken == 0) {
            fprintf(stderr, "tessera %s: unknown option %s\n", s->name, a);
            s->usage(stderr);
            return 2;
        }
        if (taken < 0)
            return 2;
    }
    return -1;
}

int cli_parse(int argc, char **argv, const cli_spec *s)
{
    int rc = parse_options(argc, argv, s);
    if (rc >= 0 && s->engine)
        cli_free_draft_model(s->engine); /* the command ends here */
    return rc;
}

static const char *const KV_TYPE_NAMES[] = {[TS_KV_AUTO] = "auto", [TS_KV_F32] = "f32",
                                             [TS_KV_F16] = "f16", [TS_KV_Q8_0] = "q8_0"};

const char *cli_kv_type_name(ts_kv_type t)
{
    return (unsigned)t <= TS_KV_Q8_0 ? KV_TYPE_NAMES[t] : "?";
}

/* --draft-model FILE: loads FILE now (a second one replaces the first) and selects
 * speculation by it, unless --spec chose otherwise before. */
static int draft_model_option(int argc, char **argv, int *i, ts_engine_options *o)
{
    const char *v = cli_value(argc, argv, i);
    if (!v)
        return -1;
    cli_free_draft_model(o);
    if (!(o->draft_model = cli_load_model(v, NULL, NULL)))
        return -1;
    if (o->spec == TS_SPEC_OFF)
        o->spec = TS_SPEC_DRAFT;
    return 1;
}

void cli_free_draft_model(ts_engine_options *o)
{
    ts_model_free((ts_model *)o->draft_model); /* cli_engine_option loaded it */
    o->draft_model = NULL;
}

int cli_engine_option(int argc, char **argv, int *i, ts_engine_options *o)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--kv-f16")) { /* the older spelling of --kv-type f16 */
        o->kv_type = TS_KV_F16;
        return 1;
    }
    if (!strcmp(a, "--no-prefix-cache")) {
        o->prefix_cache = false;
        return 1;
    }
    if (!strcmp(a, "--spec-eager")) {
        o->spec_eager = true;
        return 1;
    }
    if (!strcmp(a, "--draft-model"))
        return draft_model_option(argc, argv, i, o);
    static const char *const valued[] = {"--threads", "--kv-mem", "--max-seqs", "--max-queue",
                                         "--step-tokens", "--prefill-cap", "--aging",
                                         "--itl-target", "--prefill-min", "--kv-type",
                                         "--spec", "--spec-max", "--spec-rows",
                                         "--draft-vocab"};
    size_t k = 0;
    if (!strcmp(a, "-t")) /* llama.cpp's spelling of --threads */
        a = valued[0];
    while (k < sizeof valued / sizeof *valued && strcmp(a, valued[k]))
        k++;
    if (k == sizeof valued / sizeof *valued)
        return 0;
    const char *v = cli_value(argc, argv, i);
    if (!v)
        return -1;
    float aging = 0, itl = 0;
    bool ok = true;
    switch (k) {
    case 0: ok = cli_int(a, v, 0, 4096, &o->n_threads); break;
    case 1: ok = cli_size(a, v, &o->kv_mem_bytes); break;
    case 2: ok = cli_int(a, v, 1, 4096, &o->max_seqs); break;
    case 3: ok = cli_int(a, v, 1, 1 << 20, &o->max_queue); break;
    case 4: ok = cli_int(a, v, 1, 1 << 16, &o->step_tokens); break;
    case 5: ok = cli_int(a, v, 1, 1 << 16, &o->prefill_cap); break;
    case 6:
        ok = cli_float(a, v, 0, 1e6, &aging);
        o->aging_per_s = aging;
        break;
    case 7:
        ok = cli_float(a, v, 0, 1000, &itl);
        o->itl_target = itl;
        break;
    case 8: ok = cli_int(a, v, 0, 1 << 16, &o->prefill_min); break;
    case 9: {
        int t = TS_KV_AUTO;
        while (t <= TS_KV_Q8_0 && strcmp(v, KV_TYPE_NAMES[t]))
            t++;
        ok = t <= TS_KV_Q8_0;
        if (ok)
            o->kv_type = (ts_kv_type)t;
        else
            fprintf(stderr, "tessera: --kv-type wants auto, f32, f16 or q8_0, not '%s'\n", v);
        break;
    }
    case 10:
        ok = !strcmp(v, "ngram") || !strcmp(v, "draft") || !strcmp(v, "off");
        if (ok)
            o->spec = !strcmp(v, "ngram")   ? TS_SPEC_NGRAM
                      : !strcmp(v, "draft") ? TS_SPEC_DRAFT
                                            : TS_SPEC_OFF;
        else
            fprintf(stderr, "tessera: --spec wants ngram, draft or off, not '%s'\n", v);
        break;
    case 11: ok = cli_int(a, v, 1, 64, &o->spec_max); break;
    case 12: ok = cli_int(a, v, 0, 4096, &o->spec_rows); break;
    case 13: ok = cli_int(a, v, 0, 1 << 24, &o->spec_draft_vocab); break;
    }
    return ok ? 1 : -1;
}
