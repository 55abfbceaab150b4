/* cli_loadgen.c: `tessera loadgen`: load an OpenAI-compatible server over HTTP at several
 * concurrency levels and report throughput, latency percentiles and errors. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "loadgen/loadgen.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tessera loadgen [--url http://127.0.0.1:8080] [--concurrency 1]\n"
            "                       [--requests N] [--prompt-len L] [--max-tokens M] [--stream]\n"
            "                       [--shared-prefix P] [--mix high:0.2,normal:0.6,low:0.2\n"
            "                       --api-keys FILE] [--model NAME] [--timeout S] [--json FILE]\n"
            "                       [--save-streams DIR] [--no-metrics]\n"
            "                       [--embeddings [--batch B]]\n"
            "  --url URL           server base URL, with or without /v1 (default\n"
            "                      http://127.0.0.1:8080); loopback hosts only unless\n"
            "                      --allow-remote\n"
            "  --concurrency LIST  levels, run in order; at each, N requests with at most that\n"
            "                      many in flight (closed loop; default one level of 1)\n"
            "  --requests N        requests per level (default 16)\n"
            "  --prompt-len L      words per prompt, about one token each (default 64), seeded\n"
            "  --shared-prefix P   every prompt starts with the same P words (default 0)\n"
            "  --max-tokens M      tokens to generate (default 64; the server's ignore_eos\n"
            "                      extension is sent unless --no-ignore-eos)\n"
            "  --stream            SSE with stream_options.include_usage (TTFT and ITL per chunk)\n"
            "  --chat              /v1/chat/completions instead of /v1/completions\n"
            "  --embeddings        /v1/embeddings instead: each request embeds --batch B\n"
            "                      documents (default 1) of --prompt-len words; reports\n"
            "                      documents/s and prompt tokens/s (usage.prompt_tokens)\n"
            "  --mix SPEC          priority mix: each request takes the key of a tier drawn with\n"
            "                      these weights (seeded) from --api-keys\n"
            "  --api-keys FILE     {\"KEY\": {\"tier\": \"high|normal|low\"}}; Bearer auth\n"
            "  --model NAME        the request's model field\n"
            "  --temperature T     (default 0)   --seed S (default 1)\n"
            "  --timeout S         per request (default 300)\n"
            "  --deadline S        the whole run (default 900): requests still out are aborted\n"
            "  --json FILE         also write the results as JSON\n"
            "  --save-streams DIR  keep the raw responses (headers and body) of failed and\n"
            "                      deviating requests there: 8 failed, 4 deviating per level\n"
            "  --no-metrics        do not read the server's /metrics around each level (by\n"
            "                      default its speculative-decoding counters, where it has\n"
            "                      them, give each level's draft tokens and acceptance)\n"
            "metrics per level: req/s and output tok/s (usage.completion_tokens) over the wall\n"
            "time from the first request sent to the last complete; TTFT = sent -> first content\n"
            "chunk (non-stream: the whole latency); ITL = gaps between content chunks (stream).\n"
            "Streams are checked against OpenAI's chunk format: each deviation (invalid UTF-8,\n"
            "extra or missing fields, no [DONE], no usage, ...) is counted per request and\n"
            "reported by name; only an error event inside the stream, or a stream that ends\n"
            "with no [DONE], usage or finish_reason, fails the request. Without usage, tokens\n"
            "are counted as content chunks.\n"
            "Exit status: 0 when every request succeeded, 1 when any failed, 2 on bad usage.\n");
}

static void print_pcts(const loadgen_pcts *p)
{
    if (isnan(p->p50))
        printf(" %23s", "-");
    else
        printf(" %7.1f/%7.1f/%7.1f", p->p50, p->p90, p->p99);
}

static void print_stats_row(const char *label, const loadgen_stats *s)
{
    printf("%6s%4d/%-4d %8s %11s", label, s->ok, s->sent, "", "");
    print_pcts(&s->ttft_ms);
    print_pcts(&s->itl_ms);
    print_pcts(&s->latency_ms);
    printf("\n");
}

/* "  deviations: name:requests ..." and what was noted with them, when there were any. */
/* A level's speculative decoding: its draft tokens and their acceptance, in all and per
 * draft source when the server counted them apart. */
static void print_spec(const loadgen_level *l)
{
    printf("      speculative decoding: %llu draft tokens, %llu accepted (%.1f%%)",
           (unsigned long long)l->spec_drafted, (unsigned long long)l->spec_accepted,
           100.0 * (double)l->spec_accepted / (double)l->spec_drafted);
    for (int s = 0; l->spec_by_source && s < LOADGEN_SPEC_SOURCES; s++)
        if (l->spec_source_drafted[s] > 0)
            printf("; %s %llu/%llu (%.1f%%)", loadgen_spec_source_name(s),
                   (unsigned long long)l->spec_source_accepted[s],
                   (unsigned long long)l->spec_source_drafted[s],
                   100.0 * (double)l->spec_source_accepted[s] /
                       (double)l->spec_source_drafted[s]);
    printf("\n");
}

static void print_deviations(const loadgen_level *l)
{
    bool any = false;
    for (int d = 0; d < LOADGEN_DEV_COUNT; d++) {
        if (!l->dev_count[d])
            continue;
        printf("%s %s:%d", any ? "" : "      deviations:", loadgen_dev_name((loadgen_dev)d),
               l->dev_count[d]);
        any = true;
    }
    if (any)
        printf("\n");
    for (int k = 0; k < l->n_extra; k++)
        printf("%s %s", k ? "" : "      extra fields:", l->extra[k]);
    if (l->n_extra)
        printf("\n");
    if (l->error_sample[0])
        printf("      first error event: %s\n", l->error_sample);
    if (l->all.failed_chunks)
        printf("      failed requests delivered %ld content chunks before failing\n",
               l->all.failed_chunks);
}

static void print_result(const loadgen_result *r, const loadgen_config *cfg)
{
    printf("%s %s%s, %d requests per level, prompt %d+%d words, max_tokens %d%s\n", cfg->url,
           cfg->embed ? "embeddings" : cfg->chat ? "chat" : "completions", cfg->stream ? " (stream)" : "", cfg->requests,
           cfg->shared_prefix, cfg->prompt_len, cfg->max_tokens, r->mixed ? ", mixed priorities" : "");
    printf("%5s %9s %8s %11s %23s %23s %23s  %s\n", "conc", "ok/sent", "req/s", "out tok/s",
           "TTFT ms p50/p90/p99", "ITL ms p50/p90/p99", "latency ms p50/p90/p99", "errors");
    for (int i = 0; i < r->n_levels; i++) {
        const loadgen_level *l = &r->levels[i];
        printf("%5d %4d/%-4d %8.2f %11.1f", l->concurrency, l->all.ok, l->all.sent, l->req_s,
               l->output_tok_s);
        print_pcts(&l->all.ttft_ms);
        print_pcts(&l->all.itl_ms);
        print_pcts(&l->all.latency_ms);
        printf(" ");
        for (int k = 0; k < l->n_err_kinds; k++) {
            char buf[16];
            printf(" %s:%d", loadgen_error_name(l->err_code[k], buf, sizeof buf), l->err_count[k]);
        }
        printf(l->n_err_kinds ? "\n" : " none\n");
        print_deviations(l);
        if (cfg->embed)
            printf("      embeddings: %d documents a request, %.1f documents/s, %.1f prompt "
                   "tokens/s\n", cfg->batch, l->docs_s, l->prompt_tok_s);
        if (l->spec_seen && l->spec_drafted > 0)
            print_spec(l);
        for (int c = 0; r->mixed && c < LOADGEN_CLASS_COUNT; c++)
            if (l->cls[c].sent)
                print_stats_row(loadgen_class_name((loadgen_class)c), &l->cls[c]);
    }
    if (r->deadline_hit)
        printf("deadline reached: the run was cut short\n");
}

static bool write_json(const char *path, const loadgen_result *r, const loadgen_config *cfg)
{
    cJSON *j = loadgen_result_json(r, cfg);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    FILE *f = text ? fopen(path, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0)
        ok = false;
    free(text);
    if (!ok)
        fprintf(stderr, "tessera: cannot write %s\n", path);
    return ok;
}

int cli_loadgen(int argc, char **argv)
{
    loadgen_config cfg;
    loadgen_config_default(&cfg);
    cfg.scrape_metrics = true;
    int levels[LOADGEN_MAX_LEVELS] = {1}, n_levels = 1;
    const char *mix_spec = NULL, *keys_path = NULL, *json = NULL, *v = NULL;
    float f = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--stream")) {
            cfg.stream = true;
        } else if (!strcmp(a, "--chat")) {
            cfg.chat = true;
        } else if (!strcmp(a, "--embeddings")) {
            cfg.embed = true;
        } else if (!strcmp(a, "--allow-remote")) {
            cfg.allow_remote = true;
        } else if (!strcmp(a, "--no-metrics")) {
            cfg.scrape_metrics = false;
        } else if (!strcmp(a, "--no-ignore-eos")) {
            cfg.ignore_eos = false;
        } else if (!(v = cli_value(argc, argv, &i))) {
            return 2;
        } else if (!strcmp(a, "--url")) {
            cfg.url = v;
        } else if (!strcmp(a, "--concurrency")) {
            ok = cli_int_list(a, v, 1, LOADGEN_MAX_CONCURRENCY, levels, LOADGEN_MAX_LEVELS,
                              &n_levels);
        } else if (!strcmp(a, "--requests")) {
            ok = cli_int(a, v, 1, LOADGEN_MAX_REQUESTS, &cfg.requests);
        } else if (!strcmp(a, "--prompt-len")) {
            ok = cli_int(a, v, 0, 1000000, &cfg.prompt_len);
        } else if (!strcmp(a, "--shared-prefix")) {
            ok = cli_int(a, v, 0, 1000000, &cfg.shared_prefix);
        } else if (!strcmp(a, "--max-tokens")) {
            ok = cli_int(a, v, 1, 1000000, &cfg.max_tokens);
        } else if (!strcmp(a, "--mix")) {
            mix_spec = v;
        } else if (!strcmp(a, "--api-keys")) {
            keys_path = v;
        } else if (!strcmp(a, "--batch")) {
            ok = cli_int(a, v, 1, 2048, &cfg.batch);
        } else if (!strcmp(a, "--model")) {
            cfg.model = v;
        } else if (!strcmp(a, "--json")) {
            json = v;
        } else if (!strcmp(a, "--save-streams")) {
            cfg.save_dir = v;
        } else if (!strcmp(a, "--seed")) {
            ok = cli_u64(a, v, &cfg.seed);
        } else if (!strcmp(a, "--temperature")) {
            ok = cli_float(a, v, 0, 2, &f);
            cfg.temperature = f;
        } else if (!strcmp(a, "--timeout")) {
            ok = cli_float(a, v, 0.001, 1e6, &f);
            cfg.timeout_s = f;
        } else if (!strcmp(a, "--deadline")) {
            ok = cli_float(a, v, 0.001, 1e6, &f);
            cfg.deadline_s = f;
        } else {
            fprintf(stderr, "tessera loadgen: unknown option %s\n", a);
            ok = false;
        }
        if (!ok)
            return 2;
    }
    cfg.levels = levels;
    cfg.n_levels = n_levels;
    if (cfg.save_dir && mkdir(cfg.save_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tessera loadgen: cannot create %s: %s\n", cfg.save_dir, strerror(errno));
        return 2;
    }

    ts_error err = {0};
    loadgen_mix mix;
    loadgen_keys keys = {{0}};
    if (mix_spec) {
        if (loadgen_mix_parse(&mix, mix_spec, &err) != TS_OK) {
            fprintf(stderr, "tessera: --%s\n", err.msg);
            return 2;
        }
        cfg.mix = &mix;
    }
    if (keys_path) {
        if (loadgen_keys_load(&keys, keys_path, &err) != TS_OK) {
            fprintf(stderr, "tessera: %s\n", err.msg);
            return 2;
        }
        cfg.keys = &keys;
    }
    loadgen_result res;
    ts_status st = loadgen_run(&res, &cfg, &err);
    loadgen_keys_free(&keys);
    if (st != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        return st == TS_ERR_INVALID_ARG ? 2 : 1;
    }
    print_result(&res, &cfg);
    if (json && !write_json(json, &res, &cfg))
        return 1;
    bool all_ok = !res.deadline_hit;
    for (int i = 0; i < res.n_levels; i++)
        all_ok = all_ok && res.levels[i].all.failed == 0 && res.levels[i].all.ok == cfg.requests;
    return all_ok ? 0 : 1;
}
