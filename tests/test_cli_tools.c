/* test_cli_tools.c: `tessera info`, `convert`, `synth`, `generate` and `bench` run as the
 * user runs them (the built binary through popen), and the files they write loaded back
 * through the library; the option-value parsers they share and serve's route names
 * called directly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant.h"
#include "tokenizer/vocab.h"
#include "util.h"

#define STORIES_GGUF "models/stories260K/stories260K.gguf"
#define STORIES_BIN "models/stories260K/stories260K.bin"
#define STORIES_TOK "models/stories260K/tok512.bin"

/* Runs `tessera ARGS REDIRECT`; returns its exit status and, when out is not NULL, what
 * it wrote to the pipe (malloc'd). */
static int run_tessera(char **out, const char *redirect, const char *fmt, va_list ap)
{
    char args[8192], cmd[9000];
    vsnprintf(args, sizeof args, fmt, ap);
    snprintf(cmd, sizeof cmd, "%s/tessera %s %s", TS_BUILD_DIR, args, redirect);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 65536;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
        got = fread(buf + len, 1, cap - len, p);
        len += got;
    } while (got > 0);
    buf[len] = '\0';
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `tessera ARGS` (stderr discarded); returns its exit status and, when out is not
 * NULL, its stdout (malloc'd). */
static int tessera(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = run_tessera(out, "2>/dev/null", fmt, ap);
    va_end(ap);
    return st;
}

/* As tessera, but *err gets its stderr (malloc'd) and its stdout is discarded. */
static int tessera_stderr(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *log = NULL;
    int st = run_tessera(&log, "2>&1 >/dev/null", fmt, ap);
    va_end(ap);
    *err = log;
    return st;
}

/* A copy of tu_shared(rel): tu_shared's buffer is reused by the next call. */
static char *shared(const char *rel)
{
    char *p = strdup(tu_shared(rel));
    assert_non_null(p);
    return p;
}

/* The integer after "  key " at the start of a line of info's output; -1 if absent. */
static long field(const char *out, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n  %s ", key);
    const char *p = strstr(out, pat);
    return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* ---- info ---- */

/* A family's features and a mixture's experts, on ../shared's archref models. */
static void test_info_family_features(void **state)
{
    (void)state;
    char path[4096], *out = NULL;
    snprintf(path, sizeof path, "%s/archref/models/gemma2-f32.gguf", TS_BUILD_DIR);
    assert_int_equal(tessera(&out, "info -m %s", path), 0);
    assert_non_null(strstr(out, "architecture: gemma2"));
    assert_non_null(strstr(out, "features         post-norms embedding-scale geglu "
                                "soft-caps=5/30 sliding-window=64/pattern-2\n"));
    free(out);
    snprintf(path, sizeof path, "%s/archref/models/qwen3moe-f32.gguf", TS_BUILD_DIR);
    assert_int_equal(tessera(&out, "info -m %s", path), 0);
    assert_non_null(strstr(out, "features         qk-norm experts=8/used-2\n"));
    assert_int_equal(field(out, "hidden_dim"), 64); /* each expert's */
    free(out);
}

static void test_info_gguf_model(void **state)
{
    (void)state;
    char *m = shared(STORIES_GGUF), *out = NULL;
    assert_int_equal(tessera(&out, "info -m %s", m), 0);
    assert_non_null(strstr(out, "format: GGUF v3"));
    assert_non_null(strstr(out, "architecture: llama"));
    assert_int_equal(field(out, "n_layers"), 5);
    assert_int_equal(field(out, "dim"), 64);
    assert_int_equal(field(out, "n_kv_heads"), 4);
    assert_int_equal(field(out, "hidden_dim"), 172);
    assert_int_equal(field(out, "vocab_size"), 512);
    assert_non_null(strstr(out, "tied_output      false"));
    assert_non_null(strstr(out, "rope_scale       1\n"));
    assert_non_null(strstr(out, "rope_factors     false"));
    assert_non_null(strstr(out, "features         none (Llama's layers)"));
    assert_non_null(strstr(out, "kind             llama"));
    assert_non_null(strstr(out, "bos              1 \"<s>\""));
    assert_non_null(strstr(out, "add_space_prefix true"));
    assert_non_null(strstr(out, "chat template: none"));
    /* 2 * 512 * 64 + 64 + 5 * (2*64 + 128*64 + 64*64 + 3*172*64) */
    assert_non_null(strstr(out, "parameters: 292800 "));
    /* the matrices as mapped: 292800 less the 704 norm weights, 4 bytes each */
    assert_non_null(strstr(out, "weight matrices as loaded: 1.1 MiB, 32.00 bits per weight"));
    assert_non_null(strstr(out, "tokenizer.ggml.tokens = string[512]"));
    assert_non_null(strstr(out, "llama.block_count = 5"));
    assert_non_null(strstr(out, "tensors (48):"));
    assert_non_null(strstr(out, "blk.4.ffn_down.weight"));
    assert_non_null(strstr(out, "[172, 64]"));
    free(out);
    free(m);
}

/* A llama.cpp Q4_K_M file (Q4_K with Q6_K in output, some attn_v and ffn_down): every
 * tensor line shows its type and bits per weight, and the total is the tensors' bytes as
 * the type table sizes them. */
static void test_info_quantized(void **state)
{
    (void)state;
    const char *m = TS_BUILD_DIR "/stories260K-k/stories260K-k-Q4_K_M.gguf";
    char *out = NULL;
    assert_int_equal(tessera(&out, "info -m %s", m), 0);
    assert_non_null(strstr(out, "\n  blk.0.attn_q.weight          Q4_K    4.50 bpw  [256, 256]  "
                                "36864 bytes\n"));
    assert_non_null(strstr(out, "\n  output.weight                Q6_K    6.56 bpw  [256, 512]  "
                                "107520 bytes\n"));
    assert_non_null(strstr(out, "\n  output_norm.weight           F32    32.00 bpw  [256]  "
                                "1024 bytes\n"));
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(m, &f, NULL), TS_OK);
    uint64_t bytes = 0, elems = 0;
    int n_q6 = 0, lines_q6 = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        bytes += qtype_row_bytes(t->type, (int64_t)t->ne[0]) * (t->n_elems / t->ne[0]);
        elems += t->n_elems;
        n_q6 += t->type == QT_Q6_K;
    }
    gguf_close(f);
    for (const char *p = out; (p = strstr(p, " Q6_K    6.56 bpw  [")); p++)
        lines_q6++;
    assert_true(n_q6 > 1);
    assert_int_equal(lines_q6, n_q6);
    char want[64];
    snprintf(want, sizeof want, "\ntensor bytes: %llu (", (unsigned long long)bytes);
    const char *total = strstr(out, want);
    assert_non_null(total);
    const char *avg = strstr(total, "), ");
    assert_non_null(avg);
    double bpw = strtod(avg + 3, NULL);
    assert_true(fabs(bpw - 8.0 * (double)bytes / (double)elems) < 0.01);
    assert_true(bpw > 4.5 && bpw < 5.5);
    free(out);
}

static void test_info_llama2c(void **state)
{
    (void)state;
    char *m = shared(STORIES_BIN), *t = shared(STORIES_TOK), *out = NULL;
    assert_int_equal(tessera(&out, "info -m %s --tokenizer %s", m, t), 0);
    assert_non_null(strstr(out, "format: llama2.c checkpoint"));
    assert_int_equal(field(out, "n_layers"), 5);
    assert_int_equal(field(out, "context_len"), 512);
    assert_non_null(strstr(out, "tied_output      true"));
    assert_non_null(strstr(out, "parameters: 260032 "));
    assert_int_equal(field(out, "size"), 512);
    assert_null(strstr(out, "metadata"));
    free(out);
    /* Without its tokenizer a checkpoint cannot load. */
    assert_int_equal(tessera(NULL, "info -m %s", m), 1);
    free(t);
    free(m);
}

static void test_info_vocab_only(void **state)
{
    (void)state;
    char *spm = shared("vocab/ggml-vocab-llama-spm.gguf"), *bpe = shared("vocab/ggml-vocab-gpt-2.gguf");
    char *out = NULL;
    assert_int_equal(tessera(&out, "info -m %s", spm), 0);
    assert_non_null(strstr(out, "vocabulary-only"));
    assert_int_equal(field(out, "size"), 32000);
    assert_non_null(strstr(out, "tensors (0):"));
    assert_null(strstr(out, "n_layers"));
    free(out);
    assert_int_equal(tessera(&out, "info -m %s", bpe), 0);
    assert_non_null(strstr(out, "gpt2 (byte-level BPE)"));
    assert_int_equal(field(out, "size"), 50257);
    assert_int_equal(field(out, "merges"), 50000);
    assert_non_null(strstr(out, "tokenizer.ggml.merges = string[50000]"));
    free(out);
    free(bpe);
    free(spm);
}

static void test_info_errors(void **state)
{
    (void)state;
    assert_int_equal(tessera(NULL, "info -m /nonexistent/model.gguf"), 1);
    assert_int_equal(tessera(NULL, "info --bogus x"), 2);
    assert_int_equal(tessera(NULL, "info -m"), 2);
    char *out = NULL;
    assert_int_equal(tessera(&out, "info --help"), 0);
    assert_non_null(strstr(out, "usage: tessera info"));
    free(out);
    /* A truncated GGUF is refused with an error, not a crash. */
    const char *cut = tu_tmp_path("cut.gguf");
    char *src = shared(STORIES_GGUF);
    size_t len = 0;
    char *bytes = tu_read_file(src, &len);
    assert_non_null(bytes);
    FILE *f = fopen(cut, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, 3000, f), 3000);
    fclose(f);
    assert_int_equal(tessera(NULL, "info -m %s", cut), 1);
    remove(cut);
    free(bytes);
    free(src);
}

/* ---- option values ---- */

/* strtol and strtoull skip white space and take '+', and strtoull wraps "-1": an option's
 * number must start with a digit, or '-' where the range has negatives. */
static void test_number_options(void **state)
{
    (void)state;
    int i = 0;
    uint64_t u = 0;
    float f = 0;
    assert_true(cli_int("--port", "80", 1, 65535, &i));
    assert_int_equal(i, 80);
    assert_false(cli_int("--port", " 80", 1, 65535, &i));
    assert_false(cli_int("--port", "+80", 1, 65535, &i));
    assert_false(cli_int("--port", "80 ", 1, 65535, &i));
    assert_false(cli_int("--port", "", 1, 65535, &i));
    assert_true(cli_int("--x", "-3", -5, 5, &i));
    assert_int_equal(i, -3);
    assert_false(cli_int("--x", " -3", -5, 5, &i));
    assert_false(cli_int("--x", "-3", 0, 5, &i)); /* out of range either way */
    assert_true(cli_u64("--seed", "18446744073709551615", &u));
    assert_true(u == UINT64_MAX);
    assert_false(cli_u64("--seed", " -1", &u));
    assert_false(cli_u64("--seed", "-1", &u));
    assert_false(cli_u64("--seed", "+1", &u));
    assert_false(cli_u64("--seed", "\t1", &u));
    assert_true(cli_float("--temp", ".5", 0, 2, &f));
    assert_float_equal(f, 0.5, 0);
    assert_false(cli_float("--temp", " 0.5", 0, 2, &f));
    assert_false(cli_float("--temp", "+0.5", 0, 2, &f));
    assert_true(cli_float("--x", "-0.5", -1, 1, &f));
    assert_float_equal(f, -0.5, 0);

    int levels[4] = {0}, n = -1;
    assert_true(cli_int_list("--concurrency", "1,4,16", 1, 64, levels, 4, &n));
    assert_int_equal(n, 3);
    assert_int_equal(levels[2], 16);
    static const char *const bad[] = {"", ",", "1,,2", "1,", ",1", "1, 2", "1,+2", "1,2,3,4,5",
                                      "1,65", "1,0"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        if (cli_int_list("--concurrency", bad[k], 1, 64, levels, 4, &n))
            fail_msg("'%s' was accepted", bad[k]);

    /* The commands refuse them before loading anything. */
    char *model = shared(STORIES_GGUF);
    assert_int_equal(tessera(NULL, "generate -m %s -p x -n 1 --seed ' -1'", model), 2);
    assert_int_equal(tessera(NULL, "bench -m %s --concurrency 1,,2", model), 2);
    assert_int_equal(tessera(NULL, "loadgen --concurrency 1,"), 2);
    free(model);
}

/* ---- serve's model routes ---- */

/* general.name routes a model; one whose name a model before it took is routed by its
 * file's base name less only the extension, and the collision is with the routes
 * assigned, not only with the names the models carry. */
static void test_route_names(void **state)
{
    (void)state;
    char out[128];
    cli_route_name("llama", "models/tinyllama-1.1b.Q8_0.gguf", NULL, 0, out, sizeof out);
    assert_string_equal(out, "llama");
    const char *taken[] = {"llama", "stories.v2"};
    cli_route_name("llama", "models/tinyllama-1.1b.Q8_0.gguf", taken, 1, out, sizeof out);
    assert_string_equal(out, "tinyllama-1.1b.Q8_0"); /* was tinyllama-1 */
    cli_route_name("llama", "stories.v2.gguf", taken, 1, out, sizeof out);
    assert_string_equal(out, "stories.v2");
    cli_route_name("llama", "dir.d/noext", taken, 1, out, sizeof out);
    assert_string_equal(out, "noext");
    cli_route_name("llama", "dir/.gguf", taken, 1, out, sizeof out);
    assert_string_equal(out, ".gguf");
    /* A model whose general.name is a route an earlier file name took. */
    cli_route_name("stories.v2", "b/other.gguf", taken, 2, out, sizeof out);
    assert_string_equal(out, "other");
}

/* ---- convert ---- */

static ts_model *load(const char *path, const char *tok)
{
    ts_model *m = NULL;
    ts_error err = {0};
    ts_status st = ts_model_load(path, tok, &m, &err);
    if (st != TS_OK)
        fail_msg("loading %s: %s", path, err.msg);
    return m;
}

static void assert_same_config(const ts_model_config *a, const ts_model_config *b)
{
    assert_string_equal(a->arch, b->arch);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->dim, b->dim);
    assert_int_equal(a->hidden_dim, b->hidden_dim);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->n_heads, b->n_heads);
    assert_int_equal(a->n_kv_heads, b->n_kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->context_len, b->context_len);
    assert_true(a->rope_freq_base == b->rope_freq_base);
    assert_true(a->rope_scale == b->rope_scale);
    assert_true(a->rms_eps == b->rms_eps);
    assert_int_equal(a->rope_neox, b->rope_neox);
    assert_int_equal(a->rope_factors, b->rope_factors);
    assert_int_equal(a->tied_output, b->tied_output);
}

static void assert_same_floats(const float *a, const float *b, size_t n)
{
    assert_int_equal(memcmp(a, b, n * sizeof(float)), 0);
}

static void assert_same_weights(const ts_model *a, const ts_model *b)
{
    const ts_model_config *c = &a->cfg;
    size_t dim = (size_t)c->dim, L = (size_t)c->n_layers;
    tu_assert_same_matrix(&a->w.tok_embd, &b->w.tok_embd);
    tu_assert_same_matrix(&a->w.output, &b->w.output);
    assert_same_floats(a->w.rms_final, b->w.rms_final, dim);
    assert_same_floats(a->w.rms_att, b->w.rms_att, L * dim);
    assert_same_floats(a->w.rms_ffn, b->w.rms_ffn, L * dim);
    for (size_t l = 0; l < L; l++) {
        const model_layer *x = &a->w.layers[l], *y = &b->w.layers[l];
        tu_assert_same_matrix(&x->wq, &y->wq);
        tu_assert_same_matrix(&x->wk, &y->wk);
        tu_assert_same_matrix(&x->wv, &y->wv);
        tu_assert_same_matrix(&x->wo, &y->wo);
        tu_assert_same_matrix(&x->w1, &y->w1);
        tu_assert_same_matrix(&x->w3, &y->w3);
        tu_assert_same_matrix(&x->w2, &y->w2);
    }
    assert_same_floats(a->w.rope_freq, b->w.rope_freq, (size_t)c->head_dim / 2);
}

static void assert_same_vocab(const ts_tokenizer *ta, const ts_tokenizer *tb)
{
    tu_assert_same_vocab(tokenizer_get_vocab(ta), tokenizer_get_vocab(tb));
    static const char *const texts[] = {"Once upon a time", " Lily's mom said, \"no!\"",
                                        "héllo 🦙 wörld\n\ttabs", ""};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        int32_t ia[256], ib[256];
        size_t na = 0, nb = 0;
        assert_int_equal(ts_tokenize(ta, texts[k], strlen(texts[k]), true, ia, 256, &na), TS_OK);
        assert_int_equal(ts_tokenize(tb, texts[k], strlen(texts[k]), true, ib, 256, &nb), TS_OK);
        assert_int_equal(na, nb);
        assert_true(na <= 256);
        assert_memory_equal(ia, ib, na * sizeof *ia);
    }
}

/* `tessera generate` of the reference prompt NN must print NN.out byte for byte. */
static void assert_greedy_reference(const char *model, const char *nn)
{
    char rel[128];
    snprintf(rel, sizeof rel, "reference/stories260K-greedy/%s.prompt", nn);
    char *prompt = tu_read_file(tu_shared(rel), NULL);
    snprintf(rel, sizeof rel, "reference/stories260K-greedy/%s.out", nn);
    size_t want_len = 0;
    char *want = tu_read_file(tu_shared(rel), &want_len);
    assert_non_null(prompt);
    assert_non_null(want);
    ts_model *m = load(model, NULL);
    size_t n = 0;
    assert_int_equal(ts_tokenize(ts_model_get_tokenizer(m), prompt, strlen(prompt), true, NULL,
                                 0, &n), TS_OK);
    ts_model_free(m);
    /* 200 positions counting BOS and the prompt, plus the token sampled at the last one. */
    char *out = NULL;
    assert_int_equal(tessera(&out, "generate -m %s -p '%s' -n %d", model, prompt, 201 - (int)n), 0);
    assert_int_equal(strlen(out), want_len);
    assert_string_equal(out, want);
    free(out);
    free(want);
    free(prompt);
}

static void test_convert_llama2c_round_trip(void **state)
{
    (void)state;
    char *bin = shared(STORIES_BIN), *tok = shared(STORIES_TOK);
    char *out = strdup(tu_tmp_path("converted.gguf"));
    assert_int_equal(tessera(NULL, "convert -m %s --tokenizer %s -o %s", bin, tok, out), 0);
    ts_model *a = load(bin, tok), *b = load(out, NULL);
    assert_same_config(&a->cfg, &b->cfg);
    assert_same_weights(a, b);
    assert_same_vocab(ts_model_get_tokenizer(a), ts_model_get_tokenizer(b));
    ts_model_free(a);
    ts_model_free(b);
    assert_greedy_reference(out, "01");
    assert_greedy_reference(out, "02");
    remove(out);
    free(out);
    free(tok);
    free(bin);
}

static void test_convert_gguf_to_gguf(void **state)
{
    (void)state;
    char *src = shared(STORIES_GGUF), *out = strdup(tu_tmp_path("again.gguf"));
    assert_int_equal(tessera(NULL, "convert -m %s -o %s", src, out), 0);
    ts_model *a = load(src, NULL), *b = load(out, NULL);
    assert_same_config(&a->cfg, &b->cfg);
    assert_false(b->cfg.tied_output); /* the separate output.weight survives */
    assert_same_weights(a, b);
    assert_same_vocab(ts_model_get_tokenizer(a), ts_model_get_tokenizer(b));
    ts_model_free(a);
    ts_model_free(b);
    /* And once more from the copy: a fixed point. */
    char *out2 = strdup(tu_tmp_path("again2.gguf"));
    assert_int_equal(tessera(NULL, "convert -m %s -o %s", out, out2), 0);
    size_t l1 = 0, l2 = 0;
    char *b1 = tu_read_file(out, &l1), *b2 = tu_read_file(out2, &l2);
    assert_non_null(b1);
    assert_non_null(b2);
    assert_int_equal(l1, l2);
    assert_memory_equal(b1, b2, l1);
    free(b1);
    free(b2);
    remove(out2);
    remove(out);
    free(out2);
    free(out);
    free(src);
}

static void test_convert_refuses_and_leaves_no_file(void **state)
{
    (void)state;
    char *src = shared(STORIES_GGUF), *copy = strdup(tu_tmp_path("input.gguf"));
    assert_int_equal(tessera(NULL, "convert -m %s -o %s", src, copy), 0);
    size_t before = 0, after = 0;
    char *b0 = tu_read_file(copy, &before);
    /* The same file under another spelling is still the input. */
    char *dotted = malloc(strlen(copy) + 16);
    assert_non_null(dotted);
    char *slash = strrchr(copy, '/');
    sprintf(dotted, "%.*s/./%s", (int)(slash - copy), copy, slash + 1);
    assert_int_equal(tessera(NULL, "convert -m %s -o %s", copy, dotted), 1);
    char *b1 = tu_read_file(copy, &after);
    assert_int_equal(before, after);
    assert_memory_equal(b0, b1, before);
    /* Nor the tokenizer of a checkpoint. */
    char *bin = shared(STORIES_BIN), *tok = strdup(tu_tmp_path("tok.bin"));
    size_t tlen = 0;
    char *tbytes = tu_read_file(tu_shared(STORIES_TOK), &tlen);
    FILE *f = fopen(tok, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(tbytes, 1, tlen, f), tlen);
    fclose(f);
    assert_int_equal(tessera(NULL, "convert -m %s --tokenizer %s -o %s", bin, tok, tok), 1);
    /* Failures leave nothing behind: a missing input, an unwritable folder. */
    const char *none = tu_tmp_path("never.gguf");
    assert_int_equal(tessera(NULL, "convert -m /nonexistent.gguf -o %s", none), 1);
    assert_false(file_exists(none));
    assert_int_equal(tessera(NULL, "convert -m %s -o /nonexistent-dir/x.gguf", src), 1);
    assert_int_equal(tessera(NULL, "convert -m %s", src), 2);
    remove(tok);
    remove(copy);
    free(tbytes);
    free(tok);
    free(bin);
    free(b0);
    free(b1);
    free(dotted);
    free(copy);
    free(src);
}

/* ---- quantize ---- */

/* Where tests/CMakeLists.txt extracts ../shared/models/stories260K-k.tar.xz. */
#define K_DIR TS_BUILD_DIR "/stories260K-k"

/* Fails unless every tensor of the GGUF at path has the type the same-named tensor has in
 * the GGUF at like. */
static void assert_types_like(const char *path, const char *like)
{
    gguf_file *a = NULL, *b = NULL;
    ts_error err = {0};
    if (gguf_open(path, &a, &err) != TS_OK || gguf_open(like, &b, &err) != TS_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)b->tensors[i].name.len, b->tensors[i].name.ptr);
        const gguf_tensor *t = gguf_find_tensor(a, name);
        assert_non_null(t);
        if (t->type != b->tensors[i].type)
            fail_msg("%s: %s is %s, %s in %s", path, name, qtype_name(t->type),
                     qtype_name(b->tensors[i].type), like);
    }
    gguf_close(a);
    gguf_close(b);
}

/* Fails unless the GGUF at path has tensor a of type ta and b of type tb. */
static void assert_types_like_names(const char *path, const char *a, const char *ta,
                                    const char *b, const char *tb)
{
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f, NULL), TS_OK);
    assert_string_equal(qtype_name(gguf_find_tensor(f, a)->type), ta);
    assert_string_equal(qtype_name(gguf_find_tensor(f, b)->type), tb);
    gguf_close(f);
}

static void test_quantize_cli(void **state)
{
    (void)state;
    char *out = strdup(tu_tmp_path("q4km.gguf")), *err = NULL, *text = NULL;
    assert_int_equal(tessera_stderr(&err, "quantize --progress %s/stories260K-k-f32.gguf %s q4_k_m",
                                    K_DIR, out), 0);
    /* one progress line per tensor, with its index, name and type */
    assert_non_null(strstr(err, "/  48] output.weight"));
    assert_non_null(strstr(err, "blk.2.ffn_down.weight            Q6_K"));
    assert_non_null(strstr(err, "[  48/  48]"));
    free(err);
    assert_types_like(out, K_DIR "/stories260K-k-Q4_K_M.gguf");
    assert_int_equal(tessera(&text, "info -m %s", out), 0);
    assert_non_null(strstr(text, "general.file_type = 15"));
    free(text);
    /* no --progress and stderr not a terminal: one line at the end */
    assert_int_equal(tessera_stderr(&err, "quantize %s/stories260K-k-f32.gguf %s IQ4_XS", K_DIR,
                                    out), 0);
    assert_null(strstr(err, "output.weight"));
    assert_non_null(strstr(err, "wrote"));
    free(err);
    assert_types_like(out, K_DIR "/stories260K-k-IQ4_XS.gguf");
    remove(out);
    /* a quantized input is refused naming a tensor and its type; nothing is written */
    assert_int_equal(tessera_stderr(&err, "quantize %s/stories260K-k-Q4_0.gguf %s Q8_0", K_DIR,
                                    out), 1);
    assert_non_null(strstr(err, "has type Q"));
    assert_non_null(strstr(err, ".weight"));
    free(err);
    assert_false(file_exists(out));
    /* usage errors */
    assert_int_equal(tessera(NULL, "quantize %s/stories260K-k-f32.gguf %s Q4_K_X", K_DIR, out), 2);
    assert_int_equal(tessera(NULL, "quantize %s/stories260K-k-f32.gguf %s", K_DIR, out), 2);
    assert_int_equal(tessera(NULL, "quantize --bogus a b Q4_0"), 2);
    assert_int_equal(tessera(NULL, "quantize %s/stories260K-k-f32.gguf %s/stories260K-k-f32.gguf "
                                   "Q4_0", K_DIR, K_DIR), 1);
    assert_int_equal(tessera(&text, "quantize --help"), 0);
    assert_non_null(strstr(text, "Q4_K_M"));
    free(text);
    free(out);
}

/* ---- synth ---- */

static void test_synth_cli(void **state)
{
    (void)state;
    char *vocab = shared(STORIES_GGUF), *out = strdup(tu_tmp_path("tiny.gguf"));
    char *text = NULL;
    assert_int_equal(tessera(NULL, "synth --shape test-tiny --type q8_0 --vocab %s --seed 7 -o %s",
                             vocab, out), 0);
    assert_int_equal(tessera(&text, "info -m %s", out), 0);
    assert_non_null(strstr(text, "name: synth-test-tiny"));
    assert_int_equal(field(text, "n_layers"), 2);
    assert_int_equal(field(text, "dim"), 64);
    assert_non_null(strstr(text, "general.file_type = 7"));
    assert_non_null(strstr(text, "blk.0.attn_q.weight          Q8_0"));
    assert_non_null(strstr(text, "blk.0.attn_norm.weight       F32"));
    assert_non_null(strstr(text, "8.50 bits per weight")); /* run as Q8_0: 34 bytes per 32 */
    free(text);
    assert_int_equal(tessera(&text, "generate -m %s -p 'Once upon a time' -n 8 --hugepages", out),
                     0);
    assert_true(strncmp(text, "Once upon a time", 16) == 0);
    free(text);
    remove(out);
    /* --type takes the ftype names of quantize: K types fall back at dim 64 */
    assert_int_equal(tessera(NULL, "synth --shape test-tiny --type Q4_K_M --vocab %s -o %s",
                             vocab, out), 0);
    assert_types_like_names(out, "blk.0.attn_q.weight", "Q5_0", "output.weight", "Q8_0");
    remove(out);
    /* Usage errors, and a vocabulary larger than the shape: refused, no file. */
    assert_int_equal(tessera(NULL, "synth --shape nope -o %s", out), 2);
    assert_int_equal(tessera(NULL, "synth --shape test-tiny --type q4_2 -o %s", out), 2);
    assert_int_equal(tessera(NULL, "synth --shape test-tiny"), 2);
    char *big = shared("vocab/ggml-vocab-llama-spm.gguf");
    assert_int_equal(tessera(NULL, "synth --shape test-tiny --vocab %s -o %s", big, out), 1);
    assert_false(file_exists(out));
    assert_int_equal(tessera(&text, "synth --help"), 0);
    assert_non_null(strstr(text, "tinyllama-1.1b"));
    assert_null(strstr(text, "test-tiny"));
    free(text);
    free(big);
    free(out);
    free(vocab);
}

/* `generate --prompts FILE`: every line runs concurrently and comes back in input order,
 * each as prompt + continuation; the greedy text is a prefix of the reference output. */
static void test_generate_prompts_file_and_json(void **state)
{
    (void)state;
    char *model = shared(STORIES_GGUF);
    char *ref[2];
    const char *names[2] = {"01", "02"};
    const char *prompts[3] = {"Once upon a time", "Lily and Tom went to the beach", "Once upon a time"};
    for (int i = 0; i < 2; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "reference/stories260K-greedy/%s.out", names[i]);
        ref[i] = tu_read_file(tu_shared(rel), NULL);
        assert_non_null(ref[i]);
    }
    const char *path = tu_tmp_path("prompts.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n%s\r\n%s", prompts[0], prompts[1], prompts[2]); /* CRLF, no final newline */
    fclose(f);

    char *out = NULL;
    assert_int_equal(tessera(&out, "generate -m %s --prompts %s -n 40 --json", model, path), 0);
    cJSON *arr = cJSON_Parse(out);
    assert_non_null(arr);
    assert_int_equal(cJSON_GetArraySize(arr), 3);
    for (int i = 0; i < 3; i++) {
        cJSON *item = cJSON_GetArrayItem(arr, i);
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(item, "prompt"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(item, "text"));
        assert_non_null(prompt);
        assert_non_null(text);
        assert_string_equal(prompt, prompts[i]);
        const char *expected = ref[i == 1];
        assert_true(strlen(text) > strlen(prompt) + 20);
        assert_memory_equal(text, expected, strlen(text)); /* a prefix of the reference */
    }
    cJSON_Delete(arr);
    free(out);

    /* plain: one completion per line-group, in order, each ending in a newline */
    assert_int_equal(tessera(&out, "generate -m %s --prompts %s -n 40", model, path), 0);
    assert_true(strncmp(out, prompts[0], strlen(prompts[0])) == 0);
    char *second = strstr(out, prompts[1]);
    assert_non_null(second);
    assert_non_null(strstr(second, prompts[2]));
    free(out);

    assert_int_equal(tessera(NULL, "generate -m %s --prompts %s/no-such-file -n 4", model, path), 1);
    assert_int_equal(tessera(NULL, "generate -m %s -p x --prompts %s", model, path), 2);
    free(ref[0]);
    free(ref[1]);
    free(model);
}

/* A prompts file longer than the engine's default waiting queue (1024) still runs every
 * line: generate submits them all before reading any, so it sizes the queue to the file. */
static void test_generate_more_prompts_than_queue(void **state)
{
    (void)state;
    char *model = shared(STORIES_GGUF), *out = NULL;
    const char *path = tu_tmp_path("many-prompts.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 1100; i++)
        fprintf(f, "Once upon a time %d\n", i);
    fclose(f);
    assert_int_equal(tessera(&out, "generate -m %s --prompts %s -n 1 --json", model, path), 0);
    cJSON *arr = cJSON_Parse(out);
    assert_non_null(arr);
    assert_int_equal(cJSON_GetArraySize(arr), 1100);
    cJSON *last = cJSON_GetArrayItem(arr, 1099);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(last, "prompt")),
                        "Once upon a time 1099");
    cJSON_Delete(arr);
    free(out);
    remove(path);
    free(model);
}

/* A file that cannot be read (here a directory: fopen succeeds, reading fails) is an
 * error naming it, not an empty file: generate printed [] and tokenize a lone BOS. */
static void test_read_error_is_not_empty_input(void **state)
{
    (void)state;
    char *model = shared(STORIES_GGUF), *err = NULL;
    assert_int_equal(tessera_stderr(&err, "generate -m %s --prompts %s -n 1 --json", model,
                                    TS_BUILD_DIR), 1);
    assert_non_null(strstr(err, "cannot read " TS_BUILD_DIR));
    free(err);
    assert_int_equal(tessera_stderr(&err, "tokenize -m %s --file %s", model, TS_BUILD_DIR), 1);
    assert_non_null(strstr(err, "cannot read " TS_BUILD_DIR));
    free(err);
    free(model);
}

/* A spelled-out "</s>" is the EOS token (id 2) by default, as in a completion prompt, and
 * plain text with --no-parse-special. */
static void test_tokenize_special_tokens(void **state)
{
    (void)state;
    char *model = shared(STORIES_GGUF), *out = NULL;
    assert_int_equal(tessera(&out, "tokenize -m %s -p 'Hi</s>there'", model), 0);
    assert_string_equal(out, "1 320 417 2 383\n");
    free(out);
    assert_int_equal(tessera(&out, "tokenize -m %s --no-parse-special -p 'Hi</s>there'", model),
                     0);
    assert_null(strstr(out, " 2 "));
    assert_true(strncmp(out, "1 320 417 ", 10) == 0);
    assert_true(strlen(out) > strlen("1 320 417 2 383\n"));
    free(out);
    free(model);
}

/* `bench --rounds`: the report says how many rounds its medians come from and prints
 * each level's range of speedups; the JSON it writes carries the rounds; bad counts are
 * refused before anything runs. */
static void test_bench_rounds(void **state)
{
    (void)state;
    char *model = shared(STORIES_GGUF);
    const char *json = tu_tmp_path("bench.json");
    char *out = NULL;
    assert_int_equal(tessera(&out, "bench -m %s --concurrency 2 -n 4 --prompt-len 8 --rounds 2 "
                                   "--bw-mem 0 --json %s", model, json), 0);
    const char *table = strstr(out, "median of 2 rounds");
    assert_non_null(table);
    /* The baseline against itself. Columns are as wide as their widest cell, so the row is
     * read field by field: a noisy round's "0.95-10.20" at concurrency 2 widens the range. */
    const char *row = strstr(table, "\n   1 ");
    assert_non_null(row);
    char speedup[16], range[16];
    assert_int_equal(sscanf(row, " 1 %*f %15s %15s", speedup, range), 2);
    assert_string_equal(speedup, "1.00x");
    assert_string_equal(range, "1.00-1.00");
    assert_null(strstr(out, " \n"));                  /* no trailing spaces */
    char *text = tu_read_file(json, NULL);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    assert_int_equal(cJSON_GetObjectItem(root, "rounds")->valueint, 2);
    const cJSON *levels = cJSON_GetObjectItem(root, "levels");
    assert_int_equal(cJSON_GetArraySize(levels), 2); /* the baseline, then 2 */
    const cJSON *one_range = cJSON_GetObjectItem(cJSON_GetArrayItem(levels, 0), "speedup_range");
    assert_true(cJSON_GetArrayItem(one_range, 0)->valuedouble == 1.0);
    assert_true(cJSON_GetArrayItem(one_range, 1)->valuedouble == 1.0);
    const cJSON *two = cJSON_GetArrayItem(levels, 1);
    assert_int_equal(cJSON_GetObjectItem(two, "generated")->valueint, 2 * 2 * 4);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(two, "speedup_range")), 2);
    /* an all-f32 model keeps K/V in f32 by default; --kv-type chooses */
    assert_string_equal(cJSON_GetObjectItem(root, "kv_type")->valuestring, "f32");
    cJSON_Delete(root);
    assert_non_null(strstr(out, "; K/V f32;"));
    free(out);
    assert_int_equal(tessera(&out, "bench -m %s --concurrency 1 -n 2 --prompt-len 4 --bw-mem 0 "
                                   "--kv-type f16", model), 0);
    assert_non_null(strstr(out, "; K/V f16;"));
    free(out);
    /* K/V in q8_0, and llama-batched-bench's schedule beside the engine's levels */
    assert_int_equal(tessera(&out, "bench -m %s --concurrency 2 -n 2 --prompt-len 4 --bw-mem 0 "
                                   "--kv-type q8_0 --schedule both", model), 0);
    assert_non_null(strstr(out, "; K/V q8_0;"));
    assert_non_null(strstr(out, "S_PP t/s"));
    assert_non_null(strstr(out, "S_TG t/s"));
    free(out);
    assert_int_equal(tessera(NULL, "bench -m %s --schedule sometimes", model), 2);

    assert_int_equal(tessera(NULL, "bench -m %s --rounds 0", model), 2);
    assert_int_equal(tessera(NULL, "bench -m %s --rounds 65", model), 2);
    assert_int_equal(tessera(NULL, "bench -m %s --kv-type f8", model), 2);
    free(model);
}

/* `tessera template` prints what the Jinja template makes of a messages file, exactly
 * (granite's strftime_now showing $SOURCE_DATE_EPOCH's date), forces a family with
 * --chat-template, and reports what a template raises. */
static void test_template_command(void **state)
{
    (void)state;
    const char *msgs = tu_tmp_path("template-msgs.json");
    FILE *f = fopen(msgs, "w");
    assert_non_null(f);
    fputs("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]", f);
    fclose(f);
    char *model = shared(STORIES_GGUF), *granite = shared("chat-templates/ibm-granite-granite-3.3-2B-Instruct.jinja");
    char *gemma = shared("chat-templates/google-gemma-2-2b-it.jinja"), *out = NULL, *err = NULL;
    setenv("SOURCE_DATE_EPOCH", "1795564800", 1);
    assert_int_equal(tessera(&out, "template -m %s --messages %s --chat-template-file %s", model, msgs, granite), 0);
    assert_string_equal(out, "<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n"
                             "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
                             "<|start_of_role|>assistant<|end_of_role|>");
    free(out);
    fputs("[{\"role\": \"user\", \"content\": \"Hi\"}]", (f = fopen(msgs, "w")));
    fclose(f);
    assert_int_equal(tessera(&out, "template -m %s --messages %s --chat-template-file %s", model, msgs, granite), 0);
    assert_non_null(strstr(out, "Today's Date: November 25, 2026."));
    free(out);
    unsetenv("SOURCE_DATE_EPOCH");
    assert_int_equal(tessera(&out, "template -m %s --messages %s --chat-template chatml", model, msgs), 0);
    assert_string_equal(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    fputs("[{\"role\": \"system\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": \"Hi\"}]",
          (f = fopen(msgs, "w")));
    fclose(f);
    assert_int_equal(tessera_stderr(&err, "template -m %s --messages %s --chat-template-file %s", model, msgs, gemma), 1);
    assert_non_null(strstr(err, "System role not supported"));
    free(err);
    free(model);
    free(granite);
    free(gemma);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info_gguf_model),
        cmocka_unit_test(test_info_family_features),
        cmocka_unit_test(test_info_quantized),
        cmocka_unit_test(test_info_llama2c),
        cmocka_unit_test(test_info_vocab_only),
        cmocka_unit_test(test_info_errors),
        cmocka_unit_test(test_number_options),
        cmocka_unit_test(test_route_names),
        cmocka_unit_test(test_convert_llama2c_round_trip),
        cmocka_unit_test(test_convert_gguf_to_gguf),
        cmocka_unit_test(test_convert_refuses_and_leaves_no_file),
        cmocka_unit_test(test_quantize_cli),
        cmocka_unit_test(test_synth_cli),
        cmocka_unit_test(test_generate_prompts_file_and_json),
        cmocka_unit_test(test_generate_more_prompts_than_queue),
        cmocka_unit_test(test_tokenize_special_tokens),
        cmocka_unit_test(test_template_command),
        cmocka_unit_test(test_read_error_is_not_empty_input),
        cmocka_unit_test(test_bench_rounds),
    };
    return cmocka_run_group_tests_name("cli_tools", tests, NULL, NULL);
}
