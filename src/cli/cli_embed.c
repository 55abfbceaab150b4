/* cli_embed.c: `tessera embed`: one JSON line of embedding per line of standard input,
 * the lines submitted a batch at a time so they share the engine's steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "server/embeddings.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera embed [-m MODEL] [--batch N] [--truncate] [engine options]\n"
                 "  reads texts from standard input, one a line, and prints one JSON line for\n"
                 "  each, in order: {\"index\": I, \"tokens\": N, \"embedding\": [...]} (the\n"
                 "  model's pooling, unit L2 norm), or {\"index\": I, \"error\": \"...\"} for an\n"
                 "  empty line or one over the context (the exit status is then 1).\n"
                 "  The model must name a pooling (ARCH.pooling_type: mean, cls or last).\n"
                 "  --batch N     lines submitted together (default 64)\n"
                 "  --truncate    keep an over-long line's first context-length tokens\n\n"
                 CLI_ENGINE_HELP CLI_LOAD_HELP);
}

typedef struct embed_args {
    int batch;
    bool truncate;
} embed_args;

static int embed_option(void *ctx, const char *a, const char *v)
{
    embed_args *o = ctx;
    if (!strcmp(a, "--truncate"))
        o->truncate = true;
    else if (!strcmp(a, "--batch"))
        return cli_int(a, v, 1, 4096, &o->batch) ? 1 : -1;
    else
        return 0;
    return 1;
}

/* One line's work: its request (NULL when it failed before submitting) and its error. */
typedef struct embed_line {
    ts_request *req;
    int tokens;
    char error[256];
} embed_line;

/* Tokenizes and submits line (len bytes, no newline); a line that cannot run gets its
 * error instead. */
static void submit_line(ts_engine *e, const char *line, size_t len, bool truncate,
                        embed_line *out)
{
    const ts_model *m = ts_engine_get_model(e);
    int ctx = ts_model_get_config(m)->context_len;
    int32_t *ids = NULL;
    size_t n = 0;
    memset(out, 0, sizeof *out);
    ts_status st = len ? embed_tokenize(ts_model_get_tokenizer(m), line, len, &ids, &n)
                       : TS_ERR_INVALID_ARG;
    if (st != TS_OK || n == 0) {
        snprintf(out->error, sizeof out->error, "%s", len ? ts_status_str(st) : "empty line");
    } else if (n > (size_t)ctx && !truncate) {
        snprintf(out->error, sizeof out->error,
                 "%zu tokens, over the model's limit of %d tokens (--truncate keeps the first)",
                 n, ctx);
    } else {
        ts_request_params p;
        ts_request_params_default(&p);
        p.prompt = ids;
        p.n_prompt = n > (size_t)ctx ? (size_t)ctx : n;
        p.embed = true;
        ts_error err = {0};
        if (ts_engine_submit(e, &p, &out->req, &err) != TS_OK)
            snprintf(out->error, sizeof out->error, "%s", err.msg);
        out->tokens = (int)p.n_prompt;
    }
    free(ids);
}

/* Waits for the line's vector and prints its JSON line; false when it failed. */
static bool print_line(embed_line *l, long index)
{
    ts_event ev = {0};
    float *vec = NULL;
    int dim = 0;
    while (l->req && ts_request_next_event(l->req, &ev, -1) == TS_OK) {
        if (ev.kind == TS_EVENT_ERROR && !l->error[0])
            snprintf(l->error, sizeof l->error, "%s", ev.message);
        if (ev.kind == TS_EVENT_DONE && ev.embedding) {
            free(vec);
            vec = ev.embedding;
            dim = ev.n_embedding;
            ev.embedding = NULL;
        }
        ts_event_clear(&ev);
    }
    ts_request_release(l->req);
    l->req = NULL;
    if (!vec && !l->error[0])
        snprintf(l->error, sizeof l->error, "no embedding came");
    if (l->error[0]) {
        free(vec);
        printf("{\"index\":%ld,\"error\":\"", index);
        for (const char *c = l->error; *c; c++) /* messages are ASCII: escape what JSON needs */
            printf((*c == '"' || *c == '\\') ? "\\%c" : (*c < 0x20 ? " " : "%c"), *c);
        printf("\"}\n");
        return false;
    }
    printf("{\"index\":%ld,\"tokens\":%d,\"embedding\":[", index, l->tokens);
    for (int d = 0; d < dim; d++)
        printf(d ? ",%.9g" : "%.9g", (double)vec[d]);
    printf("]}\n");
    free(vec);
    return true;
}

int cli_embed(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL;
    ts_engine_options eo;
    ts_engine_options_default(&eo);
    ts_model_load_opts load = {0};
    embed_args o = {.batch = 64};
    static const char *const flags[] = {"--truncate", NULL};
    cli_spec spec = {"embed", usage, flags, &model, &tokenizer, &eo, embed_option, &o, &load};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    if (eo.max_queue < o.batch)
        eo.max_queue = o.batch;
    ts_model *m = cli_load_model(model, tokenizer, &load);
    ts_engine *e = m ? cli_make_engine(m, &eo) : NULL;
    embed_line *lines = e ? calloc((size_t)o.batch, sizeof *lines) : NULL;
    if (!lines) {
        ts_engine_destroy(e);
        ts_model_free(m);
        cli_free_draft_model(&eo);
        return 1;
    }
    int rc = 0;
    bool pools = ts_model_get_config(m)->pooling != TS_POOLING_NONE;
    if (!pools)
        fprintf(stderr, "tessera embed: the model names no pooling (%s.pooling_type): it "
                        "makes no embeddings\n", ts_model_get_config(m)->arch);
    char *line = NULL;
    size_t cap = 0;
    long index = 0;
    while (pools) {
        int n = 0;
        ssize_t len;
        while (n < o.batch && (len = getline(&line, &cap, stdin)) >= 0) {
            if (len > 0 && line[len - 1] == '\n')
                line[--len] = '\0';
            if (len > 0 && line[len - 1] == '\r')
                line[--len] = '\0';
            submit_line(e, line, (size_t)len, o.truncate, &lines[n++]);
        }
        for (int i = 0; i < n; i++)
            if (!print_line(&lines[i], index++))
                rc = 1;
        fflush(stdout);
        if (n < o.batch)
            break;
    }
    free(line);
    free(lines);
    rc |= !pools;
    ts_engine_destroy(e);
    ts_model_free(m);
    cli_free_draft_model(&eo);
    return rc;
}
