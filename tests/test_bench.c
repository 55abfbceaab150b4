/* test_bench.c: the benchmark's percentile helper, sizing, combining rounds, a tiny
 * two-round run on stories260K whose JSON must have the documented shape with positive
 * numbers, and llama-batched-bench's schedule (S_PP, S_TG, S) on it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "common/membw.h"
#include "model/synth.h"
#include "tessera/model.h"
#include "tokenizer/vocab.h"
#include "util.h"

static void test_percentile_interpolates_between_ranks(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    assert_float_equal(bench_percentile(v, 5, 50), 3.0, 1e-12);
    assert_float_equal(v[0], 1.0, 0); /* sorted in place */
    assert_float_equal(v[4], 5.0, 0);
    assert_float_equal(bench_percentile(v, 5, 0), 1.0, 1e-12);
    assert_float_equal(bench_percentile(v, 5, 100), 5.0, 1e-12);
    assert_float_equal(bench_percentile(v, 5, 25), 2.0, 1e-12);
    assert_float_equal(bench_percentile(v, 5, 90), 4.6, 1e-12);
    double w[] = {4, 3, 2, 1};
    assert_float_equal(bench_percentile(w, 4, 50), 2.5, 1e-12);
    assert_float_equal(bench_percentile(w, 4, 99), 3.97, 1e-12);
    /* out of range p clamps; one value; none */
    assert_float_equal(bench_percentile(w, 4, -5), 1.0, 1e-12);
    assert_float_equal(bench_percentile(w, 4, 250), 4.0, 1e-12);
    double one = 7.5;
    assert_float_equal(bench_percentile(&one, 1, 99), 7.5, 0);
    assert_float_equal(bench_percentile(NULL, 0, 50), 0.0, 0);
}

static void test_rounds_combine_to_medians_and_totals(void **state)
{
    (void)state;
    /* three rounds of one level, given out of order, each field's median first, its
     * mean and its last round elsewhere: medians, not means or the last */
    bench_level r[3] = {
        {.concurrency = 16, .decode_tok_s = 300, .prefill_tok_s = 20, .e2e_tok_s = 6,
         .all_decoding = true, .ttft_p50_ms = 8, .ttft_p99_ms = 80, .itl_p50_ms = 2,
         .itl_p99_ms = 20, .speedup = 6.0, .wall_s = 1.0, .generated = 100,
         .threads_min = 16, .decode = {.steps = 10, .rows = 160, .seconds = {[TS_PHASE_GEMM] = 0.5}}},
        {.concurrency = 16, .decode_tok_s = 100, .prefill_tok_s = 10, .e2e_tok_s = 5,
         .all_decoding = true, .ttft_p50_ms = 7, .ttft_p99_ms = 70, .itl_p50_ms = 1,
         .itl_p99_ms = 10, .speedup = 2.0, .wall_s = 2.0, .generated = 100,
         .thread_cuts = 2, .threads_min = 13, .decode = {.steps = 11, .rows = 150, .seconds = {[TS_PHASE_GEMM] = 0.25}}},
        {.concurrency = 16, .decode_tok_s = 900, .prefill_tok_s = 90, .e2e_tok_s = 19,
         .all_decoding = false, .ttft_p50_ms = 29, .ttft_p99_ms = 290, .itl_p50_ms = 9,
         .itl_p99_ms = 90, .speedup = 7.0, .wall_s = 4.0, .generated = 100,
         .thread_cuts = 1, .threads_min = 15, .decode = {.steps = 12, .rows = 170, .seconds = {[TS_PHASE_GEMM] = 0.125}}},
    };
    bench_level c;
    bench_level_combine(&c, r, 3);
    assert_int_equal(c.concurrency, 16);
    assert_float_equal(c.decode_tok_s, 300, 0);
    assert_float_equal(c.prefill_tok_s, 20, 0);
    assert_float_equal(c.e2e_tok_s, 6, 0);
    assert_float_equal(c.ttft_p50_ms, 8, 0);
    assert_float_equal(c.ttft_p99_ms, 80, 0);
    assert_float_equal(c.itl_p50_ms, 2, 0);
    assert_float_equal(c.itl_p99_ms, 20, 0);
    /* the median of the rounds' own ratios (6), not the ratio of median rates */
    assert_float_equal(c.speedup, 6.0, 0);
    assert_float_equal(c.speedup_min, 2.0, 0);
    assert_float_equal(c.speedup_max, 7.0, 0);
    assert_false(c.all_decoding); /* one round without a window marks the level */
    assert_true(c.noisy);         /* gemm took 0.05, 0.023 and 0.010 s per step */
    assert_float_equal(c.wall_s, 7.0, 0);
    assert_int_equal(c.generated, 300);
    assert_int_equal(c.thread_cuts, 3); /* cuts add up; the fewest threads of any round */
    assert_int_equal(c.threads_min, 13);
    assert_int_equal(c.decode.steps, 33);
    assert_int_equal(c.decode.rows, 480);
    assert_float_equal(c.decode.seconds[TS_PHASE_GEMM], 0.875, 0);
    assert_float_equal(r[0].decode_tok_s, 300, 0); /* the rounds are left as they were */

    /* one round is itself, its range a point */
    bench_level_combine(&c, &r[1], 1);
    assert_float_equal(c.decode_tok_s, 100, 0);
    assert_float_equal(c.speedup_min, 2.0, 0);
    assert_float_equal(c.speedup_max, 2.0, 0);
    assert_true(c.all_decoding);
}

static void test_weight_bytes_and_bandwidth(void **state)
{
    (void)state;
    /* stories260K (F32): per layer qkv 128x64, wo 64x64, w13 344x64, w2 64x172, two norms
     * of 64; then the 512x64 output and the final norm. */
    ts_model *m = NULL;
    assert_int_equal(ts_model_load(tu_shared("models/stories260K/stories260K.gguf"), NULL, &m,
                                   NULL), TS_OK);
    double per_layer = 128 * 64 + 64 * 64 + 344 * 64 + 64 * 172 + 2 * 64;
    assert_float_equal(bench_weight_bytes(m), (5 * per_layer + 512 * 64 + 64) * 4, 0);
    ts_model_free(m);
    /* The same shapes in Q8_0 (34 bytes per 32 weights), norms still f32: test-tiny, dim 64,
     * ffn 128, 2 layers, 4 heads, 2 kv heads, vocab 512, untied. */
    gguf_file *f = NULL;
    tokenizer_vocab v;
    assert_int_equal(gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &f, NULL), TS_OK);
    assert_int_equal(vocab_read_gguf(&v, f, NULL), TS_OK);
    gguf_close(f);
    ts_model_config c;
    assert_true(model_synth_shape(&c, "test-tiny"));
    const char *path = tu_tmp_path("bench-q8.gguf");
    assert_int_equal(model_synth_write(path, &c, "Q8_0", &v, 3, NULL), TS_OK);
    vocab_clear(&v);
    assert_int_equal(ts_model_load(path, NULL, &m, NULL), TS_OK);
    double weights = 2 * (128 * 64 + 64 * 64 + 256 * 64 + 64 * 128) + 512 * 64;
    assert_float_equal(bench_weight_bytes(m), weights / 32 * 34 + (2 * 2 * 64 + 64) * 4, 0);
    ts_model_free(m);
    remove(path);
    assert_true(membw_read((size_t)1 << 20, 2) > 0);
    assert_float_equal(membw_read(0, 1), 0.0, 0);
}

static void test_engine_options_fit_the_largest_level(void **state)
{
    (void)state;
    static const int levels[] = {1, 48, 4};
    bench_config cfg;
    bench_config_default(&cfg);
    cfg.levels = levels;
    cfg.n_levels = 3;
    cfg.shared_prefix = 1024;
    ts_model_config c = {.dim = 64};
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.max_seqs = 8;
    bench_engine_options(&o, &c, &cfg);
    assert_int_equal(o.max_seqs, 48);
    /* 48 requests of 256 tokens (8 blocks, + 1) and two of 1024 + 16 + 4 (33, + 1) */
    assert_true(o.kv_blocks >= 48 * 9 + 2 * 34);
    ts_engine_options_default(&o);
    o.kv_mem_bytes = 1 << 20;
    bench_engine_options(&o, &c, &cfg);
    assert_int_equal(o.kv_blocks, 0);
    assert_int_equal(o.max_seqs, 64);
    /* an encoder keeps no K/V: no pool of the levels' contexts, the engine's own one block */
    ts_engine_options_default(&o);
    c.encoder = true;
    bench_engine_options(&o, &c, &cfg);
    assert_int_equal(o.kv_blocks, 0);
    assert_int_equal(o.kv_mem_bytes, 0);
}

/* An engine of one thread on the model at path (stories260K when NULL), sized for cfg. */
static ts_engine *engine_on(const char *path, ts_model **m, const bench_config *cfg)
{
    if (!path)
        path = tu_shared("models/stories260K/stories260K.gguf");
    assert_int_equal(ts_model_load(path, NULL, m, NULL), TS_OK);
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.n_threads = 1;
    bench_engine_options(&o, ts_model_get_config(*m), cfg);
    ts_engine *e = NULL;
    assert_int_equal(ts_engine_create(*m, &o, &e, NULL), TS_OK);
    return e;
}

static ts_engine *tiny_engine(ts_model **m, const bench_config *cfg)
{
    return engine_on(NULL, m, cfg);
}

/* A mixture of experts (../shared's qwen3moe archref model: 8 experts, 2 used, 2 layers):
 * the bytes one token reads are the router and two experts' worth, and the decode steps
 * count the experts they read: two a layer for one stream, more for four, never over 8. */
static void test_moe_bytes_and_experts_read(void **state)
{
    (void)state;
    static const int levels[] = {1, 4};
    bench_config cfg;
    bench_config_default(&cfg);
    cfg.levels = levels;
    cfg.n_levels = 2;
    cfg.n_tokens = 12;
    cfg.prompt_len = 8;
    char path[4096];
    snprintf(path, sizeof path, "%s/archref/models/qwen3moe-f32.gguf", TS_BUILD_DIR);
    ts_model *m = NULL;
    ts_engine *e = engine_on(path, &m, &cfg);
    /* per layer: q 128x64, k and v 64x64, o 64x128, router 8x64, two experts of 3 x 64x64,
     * two norms of 64; then the 4096x64 output and the final norm (F32 throughout) */
    double per_layer = 128 * 64 + 2 * 64 * 64 + 64 * 128 + 8 * 64 + 2 * 3 * 64 * 64 + 2 * 64;
    assert_float_equal(bench_weight_bytes(m), (2 * per_layer + 4096 * 64 + 64) * 4, 0);
    bench_result r;
    ts_error err = {0};
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_OK);
    for (int i = 0; i < r.n_levels; i++) {
        const ts_step_profile *d = &r.levels[i].decode;
        assert_true(d->moe_layers > 0);
        assert_int_equal(d->moe_layers, 2 * d->steps);
        double per_layer_read = (double)d->experts_read / (double)d->moe_layers;
        assert_int_equal(d->expert_pairs, 2 * (uint64_t)d->rows * 2);
        if (r.levels[i].concurrency == 1)
            assert_float_equal(per_layer_read, 2.0, 0);
        else
            assert_true(per_layer_read >= 2.0 && per_layer_read <= 8.0);
    }
    bench_result_free(&r);
    ts_engine_destroy(e);
    ts_model_free(m);
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(n);
    assert_true(cJSON_IsNumber(n));
    return n->valuedouble;
}

/* The editing workload: a prompt of a document and a cue to copy it; with prompt lookup
 * on, the level counts drafts the model accepted, and the JSON carries them. */
static void test_edit_workload_speculates(void **state)
{
    (void)state;
    static const int levels[] = {1};
    bench_config cfg;
    bench_config_default(&cfg);
    cfg.levels = levels;
    cfg.n_tokens = 128;
    ts_model *m = NULL;
    assert_int_equal(ts_model_load(tu_shared("models/stories260K/stories260K.gguf"), NULL, &m,
                                   NULL), TS_OK);
    int32_t *prompt = NULL;
    ts_error err = {0};
    assert_int_equal(bench_edit_prompt(m, &prompt, &cfg.prompt_len, &err), TS_OK);
    assert_true(cfg.prompt_len > 500);
    assert_int_equal(prompt[0], ts_tokenizer_bos(ts_model_get_tokenizer(m)));
    cfg.prompt = prompt;
    for (int spec = 0; spec < 2; spec++) {
        ts_engine_options o;
        ts_engine_options_default(&o);
        o.n_threads = 1;
        o.spec = spec ? TS_SPEC_NGRAM : TS_SPEC_OFF;
        o.spec_eager = true; /* drafts whatever this machine's step times say */
        bench_engine_options(&o, ts_model_get_config(m), &cfg);
        ts_engine *e = NULL;
        assert_int_equal(ts_engine_create(m, &o, &e, NULL), TS_OK);
        bench_result r;
        assert_int_equal(bench_run(&r, e, &cfg, &err), TS_OK);
        const bench_level *l = &r.levels[0];
        assert_int_equal(l->generated, 128);
        const ts_spec_source_stats *ng = &l->spec_source[TS_SPEC_SOURCE_NGRAM];
        if (spec) {
            assert_true(l->spec_accepted > 10 && l->spec_drafted >= l->spec_accepted);
            /* fewer decode steps than tokens: accepted drafts took no step of their own */
            assert_true(l->decode.steps + l->spec_accepted <= 128);
            /* all of them prompt lookup's */
            assert_int_equal(ng->drafted, l->spec_drafted);
            assert_int_equal(ng->accepted, l->spec_accepted);
        } else {
            assert_int_equal(l->spec_drafted, 0);
            assert_int_equal(ng->drafted, 0);
        }
        assert_int_equal(l->spec_source[TS_SPEC_SOURCE_DRAFT_MODEL].drafted, 0);
        assert_true(l->spec_draft_s == 0);
        cJSON *root = bench_result_json(&r, &cfg, "stories260K", 1);
        const cJSON *lv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "levels"), 0);
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(lv, "spec");
        assert_true(cJSON_IsObject(sp));
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(sp, "sources");
        assert_true(cJSON_IsObject(by));
        const cJSON *by_ng = cJSON_GetObjectItemCaseSensitive(by, "ngram");
        assert_true(spec ? cJSON_IsObject(by_ng) : by_ng == NULL);
        if (spec)
            assert_float_equal(number(by_ng, "accepted"), (double)ng->accepted, 0);
        assert_null(cJSON_GetObjectItemCaseSensitive(by, "draft_model"));
        assert_float_equal(number(sp, "drafted"), (double)l->spec_drafted, 0);
        assert_float_equal(number(sp, "accepted"), (double)l->spec_accepted, 0);
        assert_float_equal(number(sp, "acceptance"),
                           l->spec_drafted ? (double)l->spec_accepted / (double)l->spec_drafted
                                           : 0.0, 1e-12);
        cJSON_Delete(root);
        bench_result_free(&r);
        ts_engine_destroy(e);
    }
    free(prompt);
    ts_model_free(m);
}

/* The scripted answer of the editing workload: the document's tokens with edits at the
 * rate asked, the same for a seed; on the engine, prompt lookup drafts it and the target's
 * emitted text follows it. */
static void test_edit_script(void **state)
{
    (void)state;
    ts_model *m = NULL;
    assert_int_equal(ts_model_load(tu_shared("models/stories260K/stories260K.gguf"), NULL, &m,
                                   NULL), TS_OK);
    int32_t *copy = NULL, *edited = NULL, *again = NULL, *other = NULL, *noise = NULL;
    int n = 0, n2 = 0;
    ts_error err = {0};
    assert_int_equal(bench_edit_script(m, 0, 1, &copy, &n, &err), TS_OK);
    assert_true(n > 300);
    assert_int_equal(bench_edit_script(m, 0.05, 1, &edited, &n2, &err), TS_OK);
    assert_int_equal(n2, n);
    assert_int_equal(bench_edit_script(m, 0.05, 1, &again, &n2, &err), TS_OK);
    assert_memory_equal(again, edited, (size_t)n * sizeof *again);
    assert_int_equal(bench_edit_script(m, 0.05, 2, &other, &n2, &err), TS_OK);
    assert_memory_not_equal(other, edited, (size_t)n * sizeof *other);
    assert_int_equal(bench_edit_script(m, 1, 1, &noise, &n2, &err), TS_OK);
    int edits = 0, changed = 0;
    for (int i = 0; i < n; i++) {
        edits += edited[i] != copy[i];
        changed += noise[i] != copy[i];
        assert_true(noise[i] >= 0 && noise[i] < ts_model_get_config(m)->vocab_size);
    }
    assert_true(edits >= n / 100 && edits <= n / 8); /* about 5% */
    assert_true(changed >= n * 9 / 10);
    int32_t *refused = NULL;
    assert_int_equal(bench_edit_script(m, 1.5, 1, &refused, &n2, &err), TS_ERR_INVALID_ARG);
    assert_null(refused);

    /* the R = 0 script through prompt lookup on the editing prompt */
    static const int levels[] = {1};
    bench_config cfg;
    bench_config_default(&cfg);
    cfg.levels = levels;
    cfg.n_tokens = 96;
    int32_t *prompt = NULL;
    assert_int_equal(bench_edit_prompt(m, &prompt, &cfg.prompt_len, &err), TS_OK);
    cfg.prompt = prompt;
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.n_threads = 1;
    o.spec = TS_SPEC_NGRAM;
    o.spec_eager = true;
    o.spec_script = copy;
    o.n_spec_script = n;
    bench_engine_options(&o, ts_model_get_config(m), &cfg);
    ts_engine *e = NULL;
    assert_int_equal(ts_engine_create(m, &o, &e, NULL), TS_OK);
    bench_result r;
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_OK);
    const ts_spec_source_stats *ng = &r.levels[0].spec_source[TS_SPEC_SOURCE_NGRAM];
    print_message("scripted copy: drafted %llu, accepted %llu\n",
                  (unsigned long long)ng->drafted, (unsigned long long)ng->accepted);
    assert_true(ng->accepted >= 48); /* half the answer came from the prompt */
    bench_result_free(&r);
    ts_engine_destroy(e);
    free(prompt);
    free(copy);
    free(edited);
    free(again);
    free(other);
    free(noise);
    ts_model_free(m);
}

/* The JSON document in file path, or NULL. */
static cJSON *read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return cJSON_Parse(buf);
}

/* `tessera bench --workload edit --edit-script R`: the scripted copy is drafted by prompt
 * lookup and the JSON says the text was scripted; the script without the editing
 * workload is refused. */
static void test_edit_script_command(void **state)
{
    (void)state;
    char json[] = "/tmp/tessera_bench_edit_XXXXXX";
    int fd = mkstemp(json);
    assert_true(fd >= 0);
    close(fd);
    char *argv[] = {"bench", "-m", (char *)tu_shared("models/stories260K/stories260K.gguf"),
                    "--workload", "edit", "--edit-script", "0", "--spec", "ngram",
                    "--spec-eager", "--concurrency", "1", "-n", "48", "--bw-mem", "0",
                    "--threads", "1", "--json", json};
    assert_int_equal(cli_bench((int)(sizeof argv / sizeof *argv), argv), 0);
    cJSON *root = read_json(json);
    assert_non_null(root);
    assert_float_equal(number(root, "edit_script"), 0, 0);
    const cJSON *lv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "levels"), 0);
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(lv, "spec");
    const cJSON *ng = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(sp, "sources"), "ngram");
    assert_true(cJSON_IsObject(ng));
    assert_true(number(ng, "accepted") >= 20);
    cJSON_Delete(root);
    unlink(json);
    char *bad[] = {"bench", "--edit-script", "0.05", "--concurrency", "1"};
    assert_int_equal(cli_bench(5, bad), 2);
}

static void test_tiny_run_has_the_json_shape(void **state)
{
    (void)state;
    static const int levels[] = {1, 2};
    bench_config cfg;
    bench_config_default(&cfg);
    cfg.levels = levels;
    cfg.n_levels = 2;
    cfg.n_tokens = 8;
    cfg.prompt_len = 16;
    cfg.shared_prefix = 64;
    cfg.prefix_suffix = 4;
    cfg.rounds = 2;
    ts_model *m = NULL;
    ts_engine *e = tiny_engine(&m, &cfg);
    bench_result r;
    ts_error err = {0};
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_OK);
    assert_int_equal(r.n_levels, 2);

    cJSON *root = bench_result_json(&r, &cfg, "stories260K", 1);
    assert_non_null(root);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    assert_non_null(text);
    cJSON *back = cJSON_Parse(text); /* what --json writes must parse */
    cJSON_free(text);
    assert_non_null(back);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(back, "model");
    assert_true(cJSON_IsString(model));
    assert_string_equal(model->valuestring, "stories260K");
    assert_float_equal(number(back, "threads"), 1, 0);
    assert_float_equal(number(back, "rounds"), 2, 0);
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(back, "levels");
    assert_true(cJSON_IsArray(lv));
    assert_int_equal(cJSON_GetArraySize(lv), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *l = cJSON_GetArrayItem(lv, i);
        assert_float_equal(number(l, "concurrency"), levels[i], 0);
        assert_true(number(l, "decode_tok_s") > 0);
        assert_true(number(l, "prefill_tok_s") > 0);
        double speedup = number(l, "speedup");
        assert_true(speedup > 0);
        const cJSON *range = cJSON_GetObjectItemCaseSensitive(l, "speedup_range");
        assert_true(cJSON_IsArray(range));
        assert_int_equal(cJSON_GetArraySize(range), 2);
        double lo = cJSON_GetArrayItem(range, 0)->valuedouble;
        double hi = cJSON_GetArrayItem(range, 1)->valuedouble;
        assert_true(lo <= speedup && speedup <= hi); /* the median of two lies between */
        if (levels[i] == 1) { /* every round's baseline is itself */
            assert_float_equal(lo, 1.0, 1e-12);
            assert_float_equal(hi, 1.0, 1e-12);
        }
        assert_float_equal(number(l, "generated"), 2 * levels[i] * 8, 0); /* both rounds */
        /* one thread here: nothing to cut, and the steps ran on it */
        assert_float_equal(number(l, "thread_cuts"), 0, 0);
        assert_float_equal(number(l, "threads_min"), 1, 0);
        const cJSON *all = cJSON_GetObjectItemCaseSensitive(l, "all_decoding");
        assert_true(cJSON_IsBool(all));
        if (levels[i] == 1) /* one request decodes alone from its first token to its last */
            assert_true(cJSON_IsTrue(all));
        /* after the prompt's step, one decode-only step per further token: 7 alone, in
         * each of the two rounds; two requests admitted in different steps decode apart
         * for a while */
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(l, "decode_steps");
        assert_true(cJSON_IsObject(d));
        if (levels[i] == 1) {
            assert_float_equal(number(d, "steps"), 2 * 7, 0);
            assert_float_equal(number(d, "rows_per_step"), 1.0, 0);
        } else {
            assert_in_range((long)number(d, "steps"), 2 * 6, 2 * 14);
            assert_true(number(d, "rows_per_step") >= 1.0 && number(d, "rows_per_step") <= 2.0);
        }
        /* decode-only steps are never mixed: their "mixed" is all zeros (it once divided
         * their decode rows among no steps, and underflowed) */
        const cJSON *dm = cJSON_GetObjectItemCaseSensitive(d, "mixed");
        assert_true(cJSON_IsObject(dm));
        assert_float_equal(number(dm, "steps"), 0, 0);
        assert_float_equal(number(dm, "decode_rows_per_step"), 0, 0);
        assert_float_equal(number(dm, "prompt_rows_per_step"), 0, 0);
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(d, "ms_per_step");
        assert_int_equal(cJSON_GetArraySize(ms), TS_PHASE_COUNT);
        for (int p = 0; p < TS_PHASE_COUNT; p++)
            assert_true(number(ms, ts_step_phase_name((ts_step_phase)p)) >= 0);
        assert_true(number(ms, "gemm") > 0 && number(ms, "lm_head") > 0);
        const char *pairs[] = {"ttft_ms", "itl_ms"};
        for (int k = 0; k < 2; k++) {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(l, pairs[k]);
            assert_true(cJSON_IsObject(p));
            assert_true(number(p, "p50") > 0);
            assert_true(number(p, "p99") >= number(p, "p50"));
        }
    }
    assert_float_equal(number(cJSON_GetArrayItem(lv, 0), "speedup"), 1.0, 1e-12);
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(back, "prefix");
    assert_true(cJSON_IsObject(prefix));
    assert_true(number(prefix, "ttft_cold_ms") > 0);
    assert_true(number(prefix, "ttft_cached_ms") > 0);
    assert_float_equal(number(prefix, "cached_tokens"), 64, 0); /* two full blocks */
    cJSON_Delete(back);
    bench_result_free(&r);
    ts_engine_destroy(e);
    ts_model_free(m);
}

static void test_baseline_is_added_and_bad_configs_refused(void **state)
{
    (void)state;
    static const int levels[] = {2};
    bench_config cfg;
    bench_config_default(&cfg);
    cfg.levels = levels;
    cfg.n_levels = 1;
    cfg.n_tokens = 4;
    cfg.prompt_len = 8;
    ts_model *m = NULL;
    ts_engine *e = tiny_engine(&m, &cfg);
    bench_result r;
    ts_error err = {0};
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_OK);
    assert_int_equal(r.n_levels, 2);
    assert_int_equal(r.levels[0].concurrency, 1);
    assert_int_equal(r.levels[1].concurrency, 2);
    assert_false(r.has_prefix);
    cJSON *root = bench_result_json(&r, &cfg, "m", 1);
    assert_null(cJSON_GetObjectItemCaseSensitive(root, "prefix"));
    cJSON_Delete(root);
    bench_result_free(&r);

    cfg.n_tokens = 0;
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_ERR_INVALID_ARG);
    assert_null(r.levels);
    cfg.n_tokens = 4;
    int bad_rounds[] = {0, BENCH_MAX_ROUNDS + 1};
    for (int i = 0; i < 2; i++) {
        cfg.rounds = bad_rounds[i];
        assert_int_equal(bench_run(&r, e, &cfg, &err), TS_ERR_INVALID_ARG);
        assert_non_null(strstr(err.msg, "rounds"));
        assert_null(r.levels);
    }
    cfg.rounds = 1;
    static const int zero[] = {0};
    cfg.levels = zero;
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "concurrency 0"));
    /* a request the engine refuses (prompt over the context) fails the run cleanly */
    cfg.levels = levels;
    cfg.prompt_len = 4096;
    assert_int_equal(bench_run(&r, e, &cfg, &err), TS_ERR_TOO_LONG);
    assert_null(r.levels);
    bench_result_free(&r);
    ts_engine_destroy(e);
    ts_model_free(m);
}

static void test_phase_variation(void **state)
{
    (void)state;
    /* per step: gemm 1.0 ms / 1.9 ms, attention 0.5 ms both, lm_head 0.01 ms / 0.1 ms */
    bench_level r[2] = {
        {.decode = {.steps = 10, .seconds = {[TS_PHASE_GEMM] = 0.010,
                                             [TS_PHASE_ATTENTION] = 0.005,
                                             [TS_PHASE_LM_HEAD] = 0.0001}}},
        {.decode = {.steps = 20, .seconds = {[TS_PHASE_GEMM] = 0.038,
                                             [TS_PHASE_ATTENTION] = 0.010,
                                             [TS_PHASE_LM_HEAD] = 0.002}}},
    };
    /* lm_head varied 10x but is under 5% of the step: not a sign of a busy machine */
    assert_false(bench_phases_vary(r, 2));
    r[1].decode.seconds[TS_PHASE_GEMM] = 0.041; /* 2.05 ms per step: over twice 1.0 */
    assert_true(bench_phases_vary(r, 2));
    assert_false(bench_phases_vary(r, 1)); /* one round cannot vary */
    r[1].decode.steps = 0;                 /* a round without decode steps says nothing */
    assert_false(bench_phases_vary(r, 2));
    bench_level idle[2] = {{.concurrency = 1}, {.concurrency = 1}};
    assert_false(bench_phases_vary(idle, 2));
}

/* llama-batched-bench's schedule: its three rates are the tokens over their own times,
 * for every KV type, prompts packed across prefill steps; a context overflow and no
 * streams are refused. */
static void test_pp_tg_schedule(void **state)
{
    (void)state;
    ts_model *m = NULL;
    assert_int_equal(ts_model_load(tu_shared("models/stories260K/stories260K.gguf"), NULL, &m,
                                   NULL), TS_OK);
    ts_engine_options o;
    ts_engine_options_default(&o);
    o.step_tokens = 32; /* 3 prompts of 40: four prefill steps, two of them shared */
    static const ts_kv_type types[] = {TS_KV_AUTO, TS_KV_F16, TS_KV_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        o.kv_type = types[i];
        bench_pptg_config c = {.n_seqs = 3, .prompt_len = 40, .n_tokens = 8, .seed = 1};
        bench_pptg r;
        ts_error err = {0};
        assert_int_equal(bench_pptg_run(&r, m, &o, &c, &err), TS_OK);
        assert_int_equal(r.n_seqs, 3);
        assert_true(r.t_pp > 0 && r.t_tg > 0);
        assert_float_equal(r.s_pp, 3 * 40 / r.t_pp, 1e-9 * r.s_pp);
        assert_float_equal(r.s_tg, 3 * 8 / r.t_tg, 1e-9 * r.s_tg);
        assert_float_equal(r.s, 3 * 48 / (r.t_pp + r.t_tg), 1e-9 * r.s);
        assert_int_equal(r.moe_layers, 0); /* a dense model */
        assert_int_equal(r.experts_read, 0);
    }
    bench_pptg r;
    bench_pptg_config big = {.n_seqs = 2, .prompt_len = 2000, .n_tokens = 100, .seed = 1};
    assert_int_equal(bench_pptg_run(&r, m, &o, &big, NULL), TS_ERR_INVALID_ARG);
    bench_pptg_config none = {.n_seqs = 0, .prompt_len = 4, .n_tokens = 4, .seed = 1};
    assert_int_equal(bench_pptg_run(&r, m, &o, &none, NULL), TS_ERR_INVALID_ARG);
    ts_model_free(m);
}

/* The schedule on a mixture (the qwen3moe archref model: 8 experts, 2 used, 2 layers)
 * counts its decode steps' experts: every layer of every step, two pairs a row, and six
 * streams of random tokens spread over more experts than one row's two. */
static void test_pp_tg_counts_experts(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/archref/models/qwen3moe-f32.gguf", TS_BUILD_DIR);
    ts_model *m = NULL;
    assert_int_equal(ts_model_load(path, NULL, &m, NULL), TS_OK);
    ts_engine_options o;
    ts_engine_options_default(&o);
    bench_pptg_config c = {.n_seqs = 6, .prompt_len = 8, .n_tokens = 10, .seed = 1};
    bench_pptg r;
    ts_error err = {0};
    assert_int_equal(bench_pptg_run(&r, m, &o, &c, &err), TS_OK);
    assert_int_equal(r.moe_layers, 2 * 10);
    assert_int_equal(r.expert_pairs, 6 * 2 * r.moe_layers);
    double per_layer = (double)r.experts_read / (double)r.moe_layers;
    assert_true(per_layer > 2.0 && per_layer <= 8.0);
    ts_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile_interpolates_between_ranks),
        cmocka_unit_test(test_rounds_combine_to_medians_and_totals),
        cmocka_unit_test(test_phase_variation),
        cmocka_unit_test(test_weight_bytes_and_bandwidth),
        cmocka_unit_test(test_engine_options_fit_the_largest_level),
        cmocka_unit_test(test_tiny_run_has_the_json_shape),
        cmocka_unit_test(test_edit_workload_speculates),
        cmocka_unit_test(test_edit_script),
        cmocka_unit_test(test_edit_script_command),
        cmocka_unit_test(test_moe_bytes_and_experts_read),
        cmocka_unit_test(test_pp_tg_counts_experts),
        cmocka_unit_test(test_baseline_is_added_and_bad_configs_refused),
        cmocka_unit_test(test_pp_tg_schedule),
    };
    return cmocka_run_group_tests_name("bench", tests, NULL, NULL);
}
