/* cli_generate.c: `tessera generate`: completes one prompt, or every line of a file
 * concurrently, through the batching engine; prints prompt + continuation. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/models.h"
#include "common/clock.h"
#include "common/strbuf.h"
#include "tessera/engine.h"

typedef struct gen_opts {
    const char *model, *model_dir, *tokenizer, *prompt, *prompts_file;
    char model_path[4096];
    int n_tokens;
    bool json, no_bos, no_parse_special;
    ts_sampling_params sampling;
    ts_engine_options engine;
    ts_model_load_opts load;
} gen_opts;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tessera generate [-m MODEL] [--tokenizer TOK] (-p PROMPT | --prompts FILE)\n"
            "                        [-n N] [--json] [sampling] [engine]\n"
            "  -m MODEL            .gguf, or llama2.c .bin with --tokenizer, or a model's name\n"
            "                      in the model directories (default: see README, \"Models\")\n"
            "  --model-dir DIR     look for models here first, then in $TESSERA_MODELS, models/\n"
            "  -p PROMPT           the prompt; its continuation is printed after it\n"
            "  --prompts FILE      one prompt per line, all run concurrently, printed in order\n"
            "                      (the waiting queue holds every line unless --max-queue)\n"
            "  -n N                tokens to generate per prompt (default 128)\n"
            "  --json              print [{\"prompt\": ..., \"text\": prompt + continuation}, ...]\n"
            "  --no-bos            do not start the prompt with BOS (by default it does where\n"
            "                      the vocabulary says to: tokenizer.ggml.add_bos_token)\n"
            "  --no-parse-special  read \"</s>\", \"<|im_start|>\"... in a prompt as plain text, not\n"
            "                      as those special tokens\n"
            "sampling (default greedy, so output is reproducible):\n"
            "  --temp T  --top-k K  --top-p P  --min-p M  --repeat-penalty R  --seed S\n"
            CLI_ENGINE_HELP CLI_LOAD_HELP);
}

/* One of generate's own options (cli_spec.own). */
static int gen_option(void *ctx, const char *a, const char *v)
{
    gen_opts *o = ctx;
    bool ok = true;
    if (!strcmp(a, "--json"))
        o->json = true;
    else if (!strcmp(a, "--no-bos"))
        o->no_bos = true;
    else if (!strcmp(a, "--no-parse-special"))
        o->no_parse_special = true;
    else if (!strcmp(a, "--model-dir"))
        o->model_dir = v;
    else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
        o->prompt = v;
    else if (!strcmp(a, "--prompts"))
        o->prompts_file = v;
    else if (!strcmp(a, "-n"))
        ok = cli_int(a, v, 1, 1 << 20, &o->n_tokens);
    else if (!strcmp(a, "--temp"))
        ok = cli_float(a, v, 0, 2, &o->sampling.temperature);
    else if (!strcmp(a, "--top-k"))
        ok = cli_int(a, v, 0, 1 << 30, &o->sampling.top_k);
    else if (!strcmp(a, "--top-p"))
        ok = cli_float(a, v, 1e-6, 1, &o->sampling.top_p);
    else if (!strcmp(a, "--min-p"))
        ok = cli_float(a, v, 0, 1, &o->sampling.min_p);
    else if (!strcmp(a, "--repeat-penalty"))
        ok = cli_float(a, v, 1e-3, 10, &o->sampling.repetition_penalty);
    else if (!strcmp(a, "--seed")) {
        ok = cli_u64(a, v, &o->sampling.seed);
        o->sampling.has_seed = true;
    } else
        return 0;
    return ok ? 1 : -1;
}

static int parse(int argc, char **argv, gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_tokens = 128;
    o->sampling = ts_sampling_params_default();
    o->sampling.temperature = 0.0f;
    ts_engine_options_default(&o->engine);
    o->engine.max_queue = 0; /* not given: cli_generate sizes it to the prompts */
    static const char *const flags[] = {"--json", "--no-bos", "--no-parse-special", NULL};
    cli_spec spec = {"generate", usage, flags, &o->model, &o->tokenizer, &o->engine,
                     gen_option, o, &o->load};
    int rc = cli_parse(argc, argv, &spec);
    if (rc >= 0)
        return rc;
    if (!o->prompt == !o->prompts_file) {
        fprintf(stderr, "tessera generate: give exactly one of -p and --prompts\n");
        return 2;
    }
    if (!cli_model_path(o->model, o->model_dir, o->model_path, sizeof o->model_path))
        return 1;
    o->model = o->model_path;
    return -1;
}

/* Splits the file into lines (without their line endings); returns the count or -1. */
static int read_lines(const char *path, char ***out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tessera: cannot open %s\n", path);
        return -1;
    }
    char **lines = NULL, *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int n = 0;
    bool failed = false;
    while (!failed && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        char **grown = realloc(lines, (size_t)(n + 1) * sizeof *lines);
        if (grown)
            lines = grown;
        if (!grown || !(lines[n] = strdup(line))) {
            fprintf(stderr, "tessera: out of memory reading %s\n", path);
            failed = true;
        } else {
            n++;
        }
    }
    /* getline's -1 is also a read error (a directory, EIO): not an empty rest of file. */
    if (!failed && ferror(f)) {
        fprintf(stderr, "tessera: cannot read %s: %s\n", path, strerror(errno));
        failed = true;
    }
    if (failed) {
        for (int i = 0; i < n; i++)
            free(lines[i]);
        free(lines);
        lines = NULL;
        n = -1;
    }
    free(line);
    fclose(f);
    *out = lines;
    return n;
}

/* Text of one finished request, and its token count. */
typedef struct completion {
    ts_request *req;
    strbuf text;
    int tokens;
    bool failed;
} completion;

static ts_status submit(ts_engine *e, const ts_tokenizer *tok, const char *prompt,
                        const gen_opts *o, ts_request **out)
{
    ts_error err = {0};
    size_t n = 0;
    int32_t *ids = NULL;
    ts_tokenize_opts opts = {.add_special = !o->no_bos, .parse_special = !o->no_parse_special};
    ts_status st = ts_tokenize_alloc(tok, prompt, strlen(prompt), &opts, &ids, &n);
    if (st == TS_OK) {
        ts_request_params p;
        ts_request_params_default(&p);
        p.prompt = ids;
        p.n_prompt = n;
        p.max_tokens = o->n_tokens;
        p.sampling = o->sampling;
        st = ts_engine_submit(e, &p, out, &err);
    }
    if (st != TS_OK)
        fprintf(stderr, "tessera: %s\n", err.msg[0] ? err.msg : ts_status_str(st));
    free(ids);
    return st;
}

/* Reads c's events to the end; echo prints text as it comes. */
static void collect(completion *c, bool echo)
{
    ts_event ev;
    while (ts_request_next_event(c->req, &ev, -1) == TS_OK) {
        if (ev.kind == TS_EVENT_ERROR) {
            fprintf(stderr, "tessera: %s\n", ev.message);
            c->failed = true;
        } else {
            c->tokens += ev.kind == TS_EVENT_TOKEN;
            if (echo) {
                fwrite(ev.text, 1, ev.text_len, stdout);
                fflush(stdout);
            }
            if (!strbuf_add(&c->text, ev.text, ev.text_len))
                c->failed = true;
        }
        ts_event_clear(&ev);
    }
}

static int print_json(char **prompts, const completion *c, int n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) {
        cJSON *item = cJSON_CreateObject();
        size_t plen = strlen(prompts[i]);
        char *text = malloc(plen + c[i].text.len + 1);
        if (!item || !text) {
            cJSON_Delete(item);
            free(text);
            cJSON_Delete(arr);
            return 1;
        }
        memcpy(text, prompts[i], plen);
        memcpy(text + plen, c[i].text.s ? c[i].text.s : "", c[i].text.len);
        text[plen + c[i].text.len] = '\0';
        cJSON_AddStringToObject(item, "prompt", prompts[i]);
        cJSON_AddStringToObject(item, "text", text);
        cJSON_AddItemToArray(arr, item);
        free(text);
    }
    char *s = arr ? cJSON_Print(arr) : NULL;
    if (s)
        printf("%s\n", s);
    cJSON_free(s);
    cJSON_Delete(arr);
    return s ? 0 : 1;
}

int cli_generate(int argc, char **argv)
{
    gen_opts o;
    int rc = parse(argc, argv, &o);
    char **prompts = NULL;
    int n_prompts = 1;
    if (rc < 0 && o.prompts_file)
        rc = (n_prompts = read_lines(o.prompts_file, &prompts)) < 0 ? 1 : -1;
    else if (rc < 0 && (!(prompts = malloc(sizeof *prompts)) || !(prompts[0] = strdup(o.prompt))))
        rc = 1;
    if (rc >= 0) {
        free(prompts);
        cli_free_draft_model(&o.engine);
        return rc;
    }
    /* Every prompt is submitted before any result is read, so the waiting queue must hold
     * them all; a --max-queue the user gave is kept, and refuses the lines past it. */
    if (!o.engine.max_queue) {
        ts_engine_options d;
        ts_engine_options_default(&d);
        o.engine.max_queue = n_prompts > d.max_queue ? n_prompts : d.max_queue;
    }
    completion *c = calloc((size_t)(n_prompts ? n_prompts : 1), sizeof *c);
    ts_model *m = c ? cli_load_model(o.model, o.tokenizer, &o.load) : NULL;
    ts_engine *e = m ? cli_make_engine(m, &o.engine) : NULL;
    rc = 1;
    if (!e)
        goto out;
    double t0 = clock_now_s();
    for (int i = 0; i < n_prompts; i++)
        if (submit(e, ts_model_get_tokenizer(m), prompts[i], &o, &c[i].req) != TS_OK)
            goto out;
    bool stream = !o.json && n_prompts == 1;
    int total = 0;
    rc = 0;
    for (int i = 0; i < n_prompts; i++) {
        if (stream) {
            fputs(prompts[i], stdout);
            fflush(stdout);
        }
        collect(&c[i], stream);
        if (!o.json && !stream)
            printf("%s%s\n", prompts[i], c[i].text.s ? c[i].text.s : "");
        else if (stream)
            putchar('\n');
        total += c[i].tokens;
        rc |= c[i].failed;
    }
    if (o.json && print_json(prompts, c, n_prompts) != 0)
        rc = 1;
    double dt = clock_now_s() - t0;
    fprintf(stderr, "tessera: %d tokens in %.2f s (%.1f tok/s)\n", total, dt,
            dt > 0 ? total / dt : 0.0);
out:
    for (int i = 0; c && i < n_prompts; i++) {
        ts_request_release(c[i].req);
        strbuf_free(&c[i].text);
    }
    ts_engine_destroy(e);
    ts_model_free(m);
    cli_free_draft_model(&o.engine);
    for (int i = 0; prompts && i < n_prompts; i++)
        free(prompts[i]);
    free(prompts);
    free(c);
    return rc;
}
