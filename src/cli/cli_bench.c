/* cli_bench.c: `tessera bench`: engine throughput and latency at several concurrency
 * levels, the effect of a cached prefix, and decode speed against memory bandwidth. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench.h"
#include "common/membw.h"
#include "cli/cli.h"
#include "cli/table.h"

enum { MAX_LEVELS = 32 };

typedef struct bench_opts {
    const char *model, *tokenizer, *json, *step_log;
    bool edit;          /* --workload edit */
    double edit_script; /* --edit-script R: the answer follows the document with edits at
                         * rate R (bench_edit_script); < 0: not scripted */
    bool engine_levels, pp_tg; /* --schedule: the engine's own, llama-batched-bench's */
    int levels[MAX_LEVELS];
    bench_config cfg;
    size_t bw_bytes;
    ts_engine_options engine;
    ts_model_load_opts load;
    bool embed, levels_given; /* --embed; --concurrency was given */
} bench_opts;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tessera bench [-m MODEL] [--concurrency 1,2,4,8,16,32,64] [-n 128]\n"
            "                     [--prompt-len 128] [--shared-prefix N] [--rounds R] [--json FILE]\n"
            "                     [--workload random|edit] [engine]\n"
            "  -m MODEL            .gguf, or llama2.c .bin with --tokenizer (default: see README)\n"
            "  --concurrency LIST  levels: at each, that many requests run at once (a level of 1,\n"
            "                      the baseline, is added first when missing)\n"
            "  -n N                tokens each request generates (EOS ignored, greedy)\n"
            "  --prompt-len N      random prompt tokens per request, each prompt different\n"
            "  --workload W        random (default) or edit: every prompt holds a document and\n"
            "                      asks for a copy, so the answer repeats it (--prompt-len is\n"
            "                      the document's; try with --spec ngram and --spec off)\n"
            "  --shared-prefix N   also time to first token of N random tokens + a suffix, cold,\n"
            "                      then again with the same N tokens cached and another suffix\n"
            "  --prefix-suffix N   suffix tokens of that test (default 16)\n"
            "  --seed S            prompts' random seed (default 1)\n"
            "  --rounds R          run the levels R times in turn (1, 16, 64, 1, 16, 64, ...) and\n"
            "                      report each metric's median, speedup as the median of every\n"
            "                      round's own ratio with their range (default 1; for shared,\n"
            "                      noisy machines)\n"
            "  --bw-mem SIZE       buffer of the memory-bandwidth read test (default 1G; 0 = skip)\n"
            "  --schedule S        engine (default): requests through the engine's scheduler;\n"
            "                      pp-tg: llama-batched-bench's, every prompt prefilled, then\n"
            "                      all streams decoded together, on the forward pass (S_PP,\n"
            "                      S_TG, S as the peer reports them); both\n"
            "  --json FILE         also write the results as JSON\n"
            "  --embed             embedding throughput instead (a model with a pooling): each\n"
            "                      level is a batch of that many --prompt-len documents embedded\n"
            "                      together (default levels 1,8,64); documents/s and tokens/s\n"
            "  --edit-script R     a measuring aid for --workload edit on random weights: the\n"
            "                      answer is scripted, the document's tokens each replaced by\n"
            "                      a random token with probability R (seeded; 0.05: a copy\n"
            "                      with small edits), so prompt lookup drafts as it would for\n"
            "                      a model that copies; every step still runs, only the token\n"
            "                      each request emits is the script's. Compare --spec ngram\n"
            "                      with --spec off at the same R; the text is not the model's\n"
            "  --spec-force-accept P  a measuring aid: each draft is accepted with probability\n"
            "                      P once the one before it was, whatever the target drew (its\n"
            "                      token is replaced), to time speculation at a chosen\n"
            "                      acceptance on random weights; the text is not the model's\n"
            "  --step-log FILE     a line per engine step: decode rows, prompt rows, ms, the\n"
            "                      cost model's estimate of it (ms), the batch being filled,\n"
            "                      the estimate of its decode step (ms), the mixed steps' scale\n"
            CLI_ENGINE_HELP CLI_LOAD_HELP
            "  (bench's default --kv-mem: enough for the largest level without preemption)\n"
            "metrics (per level; times on CLOCK_MONOTONIC as each event arrives):\n"
            "  decode tok/s   TOKEN events while every request of the level is decoding (from\n"
            "                 the last first token to the first last token) / that time: the\n"
            "                 aggregate steady-state decode throughput\n"
            "  speedup        decode tok/s / decode tok/s at concurrency 1\n"
            "  prefill tok/s  prompt tokens of the level / (last first token - first submit)\n"
            "  e2e tok/s      all generated tokens / (last token - first submit)\n"
            "  TTFT           submit -> first TOKEN event, p50/p99 over the level's requests\n"
            "  ITL            gaps between consecutive TOKEN events of a request, p50/p99\n"
            "  weights/BW     weight bytes per token x single-request decode tok/s, against a\n"
            "                 parallel read of a --bw-mem buffer\n"
            "On a machine shared with other work, OMP_WAIT_POLICY=passive keeps OpenMP threads\n"
            "from spinning against it (8x slower GEMMs when the cores are oversubscribed).\n");
}

/* One of bench's own options (cli_spec.own); each takes a value. */
static int bench_option(void *ctx, const char *a, const char *v)
{
    bench_opts *o = ctx;
    bool ok = true;
    if (!strcmp(a, "--concurrency")) {
        ok = cli_int_list(a, v, 1, 4096, o->levels, MAX_LEVELS, &o->cfg.n_levels);
        o->levels_given = true;
    } else if (!strcmp(a, "--embed"))
        o->embed = true;
    else if (!strcmp(a, "-n"))
        ok = cli_int(a, v, 1, 1 << 20, &o->cfg.n_tokens);
    else if (!strcmp(a, "--prompt-len"))
        ok = cli_int(a, v, 1, 1 << 20, &o->cfg.prompt_len);
    else if (!strcmp(a, "--shared-prefix"))
        ok = cli_int(a, v, 0, 1 << 20, &o->cfg.shared_prefix);
    else if (!strcmp(a, "--prefix-suffix"))
        ok = cli_int(a, v, 1, 1 << 20, &o->cfg.prefix_suffix);
    else if (!strcmp(a, "--rounds"))
        ok = cli_int(a, v, 1, BENCH_MAX_ROUNDS, &o->cfg.rounds);
    else if (!strcmp(a, "--seed"))
        ok = cli_u64(a, v, &o->cfg.seed);
    else if (!strcmp(a, "--bw-mem"))
        ok = cli_size(a, v, &o->bw_bytes);
    else if (!strcmp(a, "--workload")) {
        ok = !strcmp(v, "edit") || !strcmp(v, "random");
        o->edit = !strcmp(v, "edit");
        if (!ok)
            fprintf(stderr, "tessera bench: --workload wants random or edit, not '%s'\n", v);
    } else if (!strcmp(a, "--json"))
        o->json = v;
    else if (!strcmp(a, "--schedule")) {
        ok = !strcmp(v, "engine") || !strcmp(v, "pp-tg") || !strcmp(v, "both");
        o->engine_levels = strcmp(v, "pp-tg") != 0;
        o->pp_tg = strcmp(v, "engine") != 0;
        if (!ok)
            fprintf(stderr, "tessera: --schedule wants engine, pp-tg or both, not '%s'\n", v);
    }
    else if (!strcmp(a, "--step-log"))
        o->step_log = v;
    else if (!strcmp(a, "--edit-script")) {
        float r = 0;
        ok = cli_float(a, v, 0, 1, &r);
        o->edit_script = r;
    } else if (!strcmp(a, "--spec-force-accept")) {
        float p = 0;
        ok = cli_float(a, v, 0, 1, &p);
        o->engine.spec_force_accept = p;
    } else
        return 0;
    return ok ? 1 : -1;
}

static int parse(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    bench_config_default(&o->cfg);
    static const int defaults[] = {1, 2, 4, 8, 16, 32, 64};
    memcpy(o->levels, defaults, sizeof defaults);
    o->cfg.n_levels = (int)(sizeof defaults / sizeof defaults[0]);
    o->bw_bytes = (size_t)1 << 30;
    o->edit_script = -1;
    o->engine_levels = true;
    ts_engine_options_default(&o->engine);
    static const char *const flags[] = {"--embed", NULL};
    cli_spec spec = {"bench", usage, flags, &o->model, &o->tokenizer, &o->engine,
                     bench_option, o, &o->load};
    int rc = cli_parse(argc, argv, &spec);
    if (rc >= 0)
        return rc;
    if (o->embed && !o->levels_given) { /* batches of embedding documents */
        static const int embed_levels[] = {1, 8, 64};
        memcpy(o->levels, embed_levels, sizeof embed_levels);
        o->cfg.n_levels = 3;
    }
    o->cfg.levels = o->levels;
    if (o->edit_script >= 0 && !o->edit) {
        fprintf(stderr, "tessera bench: --edit-script needs --workload edit\n");
        return 2;
    }
    if (!o->model && !(o->model = cli_default_model()))
        return 1;
    return -1;
}

/* A level's line of the experts its decode steps read in a layer, and the rows each (the
 * heading before the first line printed: *header, cleared); nothing for a level whose
 * steps ran no mixture layer. */
static void print_experts(bool *header, int experts, int streams, uint64_t layers,
                          uint64_t read, uint64_t pairs)
{
    if (layers == 0)
        return;
    if (*header)
        printf("experts a decode step reads in a layer, of %d, and rows each:\n", experts);
    *header = false;
    double per_layer, rows_each;
    bench_expert_rates(layers, read, pairs, &per_layer, &rows_each);
    printf("  %4d streams: %.1f experts, %.2f rows each\n", streams, per_layer, rows_each);
}

/* The engine's timing of the levels' decode-only steps, or of their steps with prompt rows
 * (with the rows per step of those that also decoded: decode rows + prompt rows). */
static void print_profiles(const bench_result *r, bool mixed)
{
    const char *heads[TS_PHASE_COUNT + 5] = {"conc", "steps"};
    int n = 2;
    if (mixed) {
        printf("\nsteps with prompt rows (engine timing, ms per step; mixed: those that also "
               "decoded,\ntheir decode + prompt rows per step):\n");
        heads[n++] = "mixed";
        heads[n++] = "rows/mixed";
    } else {
        printf("\ndecode steps (engine timing, ms per step):\n");
        heads[n++] = "rows/step";
    }
    for (int p = 0; p < TS_PHASE_COUNT; p++)
        heads[n++] = ts_step_phase_name((ts_step_phase)p);
    heads[n++] = "total";
    cli_table t;
    cli_table_init(&t, n, heads);
    for (int i = 0; i < r->n_levels; i++) {
        const ts_step_profile *d = mixed ? &r->levels[i].prompt : &r->levels[i].decode;
        double steps = d->steps ? (double)d->steps : 1.0, total = 0.0;
        double n_mixed = d->mixed_steps ? (double)d->mixed_steps : 1.0;
        cli_table_cell(&t, "%d", r->levels[i].concurrency);
        cli_table_cell(&t, "%llu", (unsigned long long)d->steps);
        if (mixed) {
            cli_table_cell(&t, "%llu", (unsigned long long)d->mixed_steps);
            cli_table_cell(&t, "%.1f+%.1f", (double)d->decode_rows / n_mixed,
                           (double)(d->mixed_rows - d->decode_rows) / n_mixed);
        } else {
            cli_table_cell(&t, "%.1f", (double)d->rows / steps);
        }
        for (int p = 0; p < TS_PHASE_COUNT; p++) {
            cli_table_cell(&t, "%.3f", 1e3 * d->seconds[p] / steps);
            total += d->seconds[p];
        }
        cli_table_cell(&t, "%.3f", 1e3 * total / steps);
    }
    cli_table_print(stdout, &t, "");
}

/* Speculative decoding's drafts per level and draft source, when it drafted at all. */
static void print_spec(const bench_result *r)
{
    uint64_t drafted = 0;
    for (int i = 0; i < r->n_levels; i++)
        drafted += r->levels[i].spec_drafted;
    if (drafted == 0)
        return;
    static const char *const heads[] = {"conc", "source", "drafted", "accepted", "acceptance",
                                        "accepted/token", "draft ms/token"};
    printf("\nspeculative decoding (draft tokens verified; accepted/token: the share of "
           "generated tokens\nthat were accepted drafts; draft ms/token: the draft model's "
           "step time per generated token):\n");
    cli_table t;
    cli_table_init(&t, 7, heads);
    for (int i = 0; i < r->n_levels; i++) {
        const bench_level *l = &r->levels[i];
        for (int k = 0; k < TS_SPEC_SOURCE_COUNT; k++) {
            const ts_spec_source_stats *src = &l->spec_source[k];
            if (src->drafted == 0)
                continue;
            cli_table_cell(&t, "%d", l->concurrency);
            cli_table_cell(&t, "%s", ts_spec_source_name((ts_spec_source)k));
            cli_table_cell(&t, "%llu", (unsigned long long)src->drafted);
            cli_table_cell(&t, "%llu", (unsigned long long)src->accepted);
            cli_table_cell(&t, "%.1f%%", 100.0 * (double)src->accepted / (double)src->drafted);
            cli_table_cell(&t, "%.2f", l->generated ? (double)src->accepted /
                                                          (double)l->generated : 0.0);
            if (k == TS_SPEC_SOURCE_DRAFT_MODEL)
                cli_table_cell(&t, "%.3f", l->generated ? 1e3 * l->spec_draft_s /
                                                              (double)l->generated : 0.0);
            else
                cli_table_cell(&t, "-");
        }
    }
    cli_table_print(stdout, &t, "");
}

static void print_report(const bench_result *r, const bench_opts *o, const ts_model *m,
                         const ts_engine *e, double bw, int threads)
{
    const ts_model_config *c = ts_model_get_config(m);
    printf("model %s: dim %d, %d layers, %d heads, ffn %d, vocab %d; %d thread%s; K/V %s; "
           "prompt %d%s, n %d; speculation %s\n\n",
           o->model, c->dim, c->n_layers, c->n_heads, c->hidden_dim, c->vocab_size, threads,
           threads == 1 ? "" : "s", cli_kv_type_name(ts_engine_kv_type(e)), o->cfg.prompt_len,
           o->edit ? " (editing workload)" : "", o->cfg.n_tokens,
           o->engine.spec == TS_SPEC_NGRAM   ? "ngram"
           : o->engine.spec == TS_SPEC_DRAFT ? "draft model"
                                             : "off");
    if (o->edit_script >= 0)
        printf("the answer is scripted: the document's tokens, each replaced by a random token "
               "with probability %.2f\n(a measure of prompt lookup on a copying answer, not of "
               "the model's text)\n\n", o->edit_script);
    if (o->engine.spec_force_accept > 0)
        printf("drafts accepted with probability %.2f each, whatever the target drew (a measure "
               "of the mechanism's cost, not of the models)\n\n",
               o->engine.spec_force_accept);
    bool ranges = o->cfg.rounds > 1;
    if (ranges)
        printf("median of %d rounds; speedup range: the rounds' lowest and highest ratio\n\n",
               o->cfg.rounds);
    static const char *const heads[] = {"conc", "decode tok/s", "speedup", "range",
                                        "prefill tok/s", "e2e tok/s", "TTFT p50/p99 ms",
                                        "ITL p50/p99 ms", "note"};
    static const char *const heads_1[] = {"conc", "decode tok/s", "speedup", "prefill tok/s",
                                          "e2e tok/s", "TTFT p50/p99 ms", "ITL p50/p99 ms",
                                          "note"};
    cli_table t;
    cli_table_init(&t, ranges ? 9 : 8, ranges ? heads : heads_1);
    bool fallback = false, noisy = false, superlinear = false;
    int cuts = 0, threads_min = 0;
    for (int i = 0; i < r->n_levels; i++) {
        const bench_level *l = &r->levels[i];
        bool above = l->speedup > 1.05 * l->concurrency; /* more than linear: suspicious */
        cli_table_cell(&t, "%d", l->concurrency);
        cli_table_cell(&t, "%.1f", l->decode_tok_s);
        cli_table_cell(&t, "%.2fx", l->speedup);
        if (ranges)
            cli_table_cell(&t, "%.2f-%.2f", l->speedup_min, l->speedup_max);
        cli_table_cell(&t, "%.1f", l->prefill_tok_s);
        cli_table_cell(&t, "%.1f", l->e2e_tok_s);
        cli_table_cell(&t, "%.1f/%.1f", l->ttft_p50_ms, l->ttft_p99_ms);
        cli_table_cell(&t, "%.2f/%.2f", l->itl_p50_ms, l->itl_p99_ms);
        cli_table_cell(&t, "%s%s%s%s", l->all_decoding ? "" : "*", l->noisy ? "!" : "",
                       above ? "^" : "", l->thread_cuts ? "~" : "");
        if (l->thread_cuts && (!cuts || l->threads_min < threads_min))
            threads_min = l->threads_min;
        cuts += l->thread_cuts;
        fallback |= !l->all_decoding;
        noisy |= l->noisy;
        superlinear |= above;
    }
    cli_table_print(stdout, &t, "");
    if (fallback)
        printf("* in some round no moment had every request of the level decoding (the first "
               "finished before\n  the last prompt was done): tokens after each first token / "
               "whole span, prefill steps\n  included; raise -n to measure steady decoding\n");
    if (noisy)
        printf("! a phase of this level's decode steps took more than 2x longer in one round "
               "than in another:\n  the machine was busy; its figures are unreliable\n");
    if (cuts)
        printf("~ other processes kept some of the engine's threads from a core: it ran its "
               "steps on fewer\n  (%d time%s, down to %d): the machine was shared; these "
               "figures are not its own\n", cuts, cuts == 1 ? "" : "s", threads_min);
    if (superlinear)
        printf("^ the speedup exceeds the concurrency, which batching cannot give: the "
               "baseline or this level\n  met a noisy spell (more --rounds tell)\n");
    print_spec(r);
    print_profiles(r, false);
    print_profiles(r, true);
    double wbytes = bench_weight_bytes(m), single = 0.0;
    for (int i = 0; i < r->n_levels && single == 0.0; i++)
        if (r->levels[i].concurrency == 1)
            single = r->levels[i].decode_tok_s;
    int experts = ts_model_get_config(m)->n_experts;
    bool shared = ts_model_get_config(m)->shared_ffn_dim > 0;
    printf("\nweights read per decode step: %.1f MB%s\n", wbytes / 1e6,
           experts == 0 ? ""
           : shared   ? " (one token's: the router, its experts and the shared expert)"
                      : " (one token's: the router and its experts)");
    bool header = true;
    for (int i = 0; experts > 0 && i < r->n_levels; i++) {
        const ts_step_profile *d = &r->levels[i].decode;
        print_experts(&header, experts, r->levels[i].concurrency, d->moe_layers,
                      d->experts_read, d->expert_pairs);
    }
    if (bw > 0)
        printf("memory bandwidth (parallel read of %.0f MiB, best of 3): %.2f GB/s\n"
               "single-request decode streams weights at %.2f GB/s = %.0f%% of it "
               "(bandwidth bound: %.1f tok/s)\n",
               (double)o->bw_bytes / (1 << 20), bw / 1e9, wbytes * single / 1e9,
               100.0 * wbytes * single / bw, bw / wbytes);
    if (r->has_prefix)
        printf("prefix %d + suffix %d tokens: TTFT cold %.1f ms, cached %.1f ms (%d tokens from "
               "the cache): %.1fx faster\n",
               o->cfg.shared_prefix, o->cfg.prefix_suffix, r->ttft_cold_ms, r->ttft_cached_ms,
               r->cached_tokens, r->ttft_cached_ms > 0 ? r->ttft_cold_ms / r->ttft_cached_ms : 0.0);
}

/* llama-batched-bench's schedule at every level (the levels given, without an added 1),
 * printed as the peer prints it; pp (n_levels) gets the results. */
static int run_pp_tg(bench_pptg *pp, const bench_opts *o, const ts_model *m)
{
    printf("\nllama-batched-bench's schedule (every prompt prefilled, then all streams decode "
           "together;\nforward pass only, no sampling, as the peer): PP %d, TG %d\n",
           o->cfg.prompt_len, o->cfg.n_tokens);
    static const char *const heads[] = {"B", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s",
                                        "S t/s"};
    cli_table t;
    cli_table_init(&t, 6, heads);
    for (int i = 0; i < o->cfg.n_levels; i++) {
        bench_pptg_config c = {o->levels[i], o->cfg.prompt_len, o->cfg.n_tokens, o->cfg.seed};
        ts_error err = {0};
        if (bench_pptg_run(&pp[i], m, &o->engine, &c, &err) != TS_OK) {
            fprintf(stderr, "tessera: %s\n", err.msg);
            return 1;
        }
        cli_table_cell(&t, "%d", pp[i].n_seqs);
        cli_table_cell(&t, "%.3f", pp[i].t_pp);
        cli_table_cell(&t, "%.2f", pp[i].s_pp);
        cli_table_cell(&t, "%.3f", pp[i].t_tg);
        cli_table_cell(&t, "%.2f", pp[i].s_tg);
        cli_table_cell(&t, "%.2f", pp[i].s);
    }
    cli_table_print(stdout, &t, "");
    int experts = ts_model_get_config(m)->n_experts;
    bool header = true;
    for (int i = 0; experts > 0 && i < o->cfg.n_levels; i++)
        print_experts(&header, experts, pp[i].n_seqs, pp[i].moe_layers, pp[i].experts_read,
                      pp[i].expert_pairs);
    return 0;
}

static cJSON *pp_tg_json(const bench_pptg *pp, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *l = cJSON_CreateObject();
        if (!l || !cJSON_AddItemToArray(a, l)) {
            cJSON_Delete(l);
            break;
        }
        cJSON_AddNumberToObject(l, "concurrency", pp[i].n_seqs);
        cJSON_AddNumberToObject(l, "t_pp_s", pp[i].t_pp);
        cJSON_AddNumberToObject(l, "s_pp_tok_s", pp[i].s_pp);
        cJSON_AddNumberToObject(l, "t_tg_s", pp[i].t_tg);
        cJSON_AddNumberToObject(l, "s_tg_tok_s", pp[i].s_tg);
        cJSON_AddNumberToObject(l, "s_tok_s", pp[i].s);
        if (pp[i].moe_layers > 0) {
            double per_layer, rows_each;
            bench_expert_rates(pp[i].moe_layers, pp[i].experts_read, pp[i].expert_pairs,
                               &per_layer, &rows_each);
            cJSON_AddNumberToObject(l, "experts_per_layer", per_layer);
            cJSON_AddNumberToObject(l, "rows_per_expert", rows_each);
        }
    }
    return a;
}

static int write_json(const bench_result *r, const bench_opts *o, const ts_model *m,
                      const ts_engine *e, double bw, int threads, const bench_pptg *pp)
{
    cJSON *root = bench_result_json(r, &o->cfg, o->model, threads);
    if (root && pp)
        cJSON_AddItemToObject(root, "pp_tg", pp_tg_json(pp, o->cfg.n_levels));
    if (root)
        cJSON_AddStringToObject(root, "kv_type",
                                cli_kv_type_name(e ? ts_engine_kv_type(e) : o->engine.kv_type));
    if (root && o->edit_script >= 0) /* the text was scripted (bench_edit_script) */
        cJSON_AddNumberToObject(root, "edit_script", o->edit_script);
    if (root && bw > 0) {
        cJSON_AddNumberToObject(root, "bandwidth_gb_s", bw / 1e9);
        cJSON_AddNumberToObject(root, "weight_bytes", bench_weight_bytes(m));
    }
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    FILE *f = s ? fopen(o->json, "wb") : NULL;
    bool ok = f && fputs(s, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0)
        ok = false;
    cJSON_free(s);
    if (!ok)
        fprintf(stderr, "tessera: cannot write %s\n", o->json);
    return ok ? 0 : 1;
}

int cli_bench(int argc, char **argv)
{
    bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) {
        cli_free_draft_model(&o.engine);
        return rc;
    }
    ts_model *m = cli_load_model(o.model, o.tokenizer, &o.load);
    if (!m) {
        cli_free_draft_model(&o.engine);
        return 1;
    }
    const ts_model_config *c = ts_model_get_config(m);
    int threads = o.engine.n_threads > 0 ? o.engine.n_threads : omp_get_max_threads();
    double bw = 0.0;
    if (o.bw_bytes > 0 && !o.embed) {
        omp_set_num_threads(threads);
        if ((bw = membw_read(o.bw_bytes, 3)) <= 0)
            fprintf(stderr, "tessera: cannot allocate %zu bytes for the bandwidth test\n",
                    o.bw_bytes);
    }
    ts_error err = {0};
    bench_result r = {0};
    bench_pptg *pp = NULL;
    rc = 1;
    ts_engine *e = NULL;
    int32_t *edit = NULL, *script = NULL;
    if (o.edit) {
        if (bench_edit_prompt(m, &edit, &o.cfg.prompt_len, &err) != TS_OK ||
            (o.edit_script >= 0 &&
             bench_edit_script(m, o.edit_script, o.cfg.seed, &script,
                               &o.engine.n_spec_script, &err) != TS_OK)) {
            fprintf(stderr, "tessera: %s\n", err.msg);
            goto out;
        }
        o.cfg.prompt = edit;
        o.engine.spec_script = script;
    }
    bench_engine_options(&o.engine, c, &o.cfg);
    if (o.step_log) {
        if (!(o.engine.step_log = fopen(o.step_log, "w"))) {
            fprintf(stderr, "tessera: cannot write %s\n", o.step_log);
            goto out;
        }
        fprintf(o.engine.step_log, "# %s\n", TS_STEP_LOG_COLUMNS);
    }
    if (o.embed) {
        if (!(e = cli_make_engine(m, &o.engine)))
            goto out;
        rc = bench_embed(e, &o.cfg);
        goto out;
    }
    if (o.engine_levels) { /* pp-tg alone needs no engine (nor its KV pool) */
        if (!(e = cli_make_engine(m, &o.engine)))
            goto out;
        if (bench_run(&r, e, &o.cfg, &err) != TS_OK) {
            fprintf(stderr, "tessera: %s\n", err.msg);
            goto out;
        }
        print_report(&r, &o, m, e, bw, threads);
    }
    if (o.pp_tg && (!(pp = calloc((size_t)o.cfg.n_levels, sizeof *pp)) || run_pp_tg(pp, &o, m)))
        goto out;
    rc = o.json ? write_json(&r, &o, m, e, bw, threads, pp) : 0;
out:
    free(edit);
    free(pp);
    bench_result_free(&r);
    ts_engine_destroy(e);
    free(script); /* the engine borrowed it */
    if (o.engine.step_log && fclose(o.engine.step_log) != 0) {
        fprintf(stderr, "tessera: cannot write %s\n", o.step_log);
        rc = 1;
    }
    ts_model_free(m);
    cli_free_draft_model(&o.engine);
    return rc;
}
