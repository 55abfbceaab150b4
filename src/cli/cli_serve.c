/* cli_serve.c: `tessera serve`: loads models, starts one engine per model and the HTTP
 * server, and shuts everything down cleanly on SIGINT or SIGTERM. */
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/config.h"
#include "cli/models.h"
#include "cli/threads.h"
#include "tessera/engine.h"
#include "tessera/model.h"
#include "tessera/server.h"

enum { MAX_MODELS = 16 };

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tessera serve [-m MODEL ...] [options]\n"
            "  -m, --model [NAME=]PATH a GGUF model (repeat to serve several); routed as NAME,\n"
            "                          else by its general.name, else its file name. PATH may\n"
            "                          be a model's name in the model directories. Default:\n"
            "                          $TESSERA_MODEL, else the first *.gguf in --model-dir,\n"
            "                          $TESSERA_MODELS, models/, else the built-in stories260K\n"
            "  --model-dir DIR         look for models here first\n"
            "  --config FILE           options from a JSON file (docs/API.md, \"Config file\");\n"
            "                          the command line adds models and overrides the rest\n"
            "  --tokenizer PATH        tokenizer.bin for llama2.c checkpoints\n"
            "  --host ADDR             address to bind (127.0.0.1)\n"
            "  --port N                port (8080; 0 = any free port)\n"
            "  --api-keys FILE         JSON {\"KEY\": {\"tier\": \"high|normal|low\", \"name\": \"...\"}}\n"
            "  --protect-metrics       /metrics needs a key too\n"
            "  --no-ui                 no chat page at http://HOST:PORT/\n"
            "  --no-slots              GET /slots answers 501 (llama.cpp's per-slot state)\n"
            "  --rerank                every model answers POST /v1/rerank (Qwen3-Reranker's\n"
            "                          yes/no scoring), not only those whose GGUF says rank\n"
            "  --chat-template NAME    force a built-in family: plain, chatml, llama2, llama3,\n"
            "                          mistral, zephyr, phi3, gemma (default: the model's own\n"
            "                          Jinja template, else the family its markers name)\n"
            "  --chat-template-file F  a Jinja chat template for every model\n"
            "  --max-body BYTES        request body limit (1048576)\n"
            "  --max-connections N     open connections, one thread each (256); 16 more\n"
            "                          are answered 503\n"
            "  --max-buffered BYTES    unread output per stream before it is cancelled\n"
            "                          (1048576; 0 = unbounded)\n"
            "  --max-answer BYTES      a non-streamed answer's size (8388608; 0 = unbounded)\n"
            "  --max-answers-total BYTES  memory held over all clients: non-streamed\n"
            "                          answers, request bodies, /tokenize's work\n"
            "                          (67108864; 0 = unbounded)\n"
            "  --allowed-hosts LIST    Host names served besides loopback ones on a loopback\n"
            "                          bind (comma-separated; * = any)\n"
            "  --cors LIST             origins browser pages may call from (comma-separated;\n"
            "                          * = any; default: same origin only)\n"
            "  --read-timeout SECONDS  a request's headers and body must arrive within this\n"
            "                          time of the connection's opening (30; 0 = none)\n"
            "  --max-per-address N     connections from one client address (128; 0 = no cap)\n"
            "  --grace SECONDS         on shutdown, wait this long for requests (10)\n"
            "  --log-format text|json  request log lines on stderr: text (default) or one JSON\n"
            "                          object per line\n"
            CLI_ENGINE_HELP "(engine options apply to each model's engine)\n" CLI_LOAD_HELP);
}

static void log_line(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

typedef struct serve_args {
    const char *models[MAX_MODELS]; /* -m as given: [NAME=]PATH */
    int n_models;
    const char *model_dir;
    const char *tokenizer;
    ts_server_options srv;
    ts_engine_options eng;
    ts_model_load_opts load;
    int grace_s;
    int read_timeout_s;
} serve_args;

/* 0: parsed; 1: --help; 2: bad usage (printed). */
static int parse_args(int argc, char **argv, serve_args *a)
{
    ts_server_options_default(&a->srv);
    ts_engine_options_default(&a->eng);
    a->grace_s = a->srv.grace_ms / 1000;
    a->read_timeout_s = a->srv.read_timeout_ms / 1000;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            return 1;
        if (!strcmp(o, "--protect-metrics")) {
            a->srv.protect_metrics = true;
            continue;
        }
        if (!strcmp(o, "--no-ui")) {
            a->srv.no_ui = true;
            continue;
        }
        if (!strcmp(o, "--no-slots")) {
            a->srv.no_slots = true;
            continue;
        }
        if (!strcmp(o, "--rerank")) {
            a->srv.rerank = true;
            continue;
        }
        bool ok = true;
        int eng;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) {
            if (a->n_models == MAX_MODELS) {
                fprintf(stderr, "tessera: at most %d models\n", MAX_MODELS);
                return 2;
            }
            ok = (v = cli_value(argc, argv, &i)) != NULL;
            a->models[a->n_models] = v;
            a->n_models += ok;
        } else if (!strcmp(o, "--model-dir")) {
            ok = (a->model_dir = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--tokenizer")) {
            ok = (a->tokenizer = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--host")) {
            ok = (a->srv.host = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--port")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_int(o, v, 0, 65535, &a->srv.port);
        } else if (!strcmp(o, "--api-keys")) {
            ok = (a->srv.api_keys_path = cli_value(argc, argv, &i)) != NULL;
        } else if ((eng = cli_load_option(argc, argv, &i, &a->load)) != 0) {
            ok = eng > 0;
        } else if ((eng = cli_engine_option(argc, argv, &i, &a->eng)) != 0) {
            ok = eng > 0;
        } else if (!strcmp(o, "--chat-template")) {
            ok = (a->srv.chat_template = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--chat-template-file")) {
            ok = (a->srv.chat_template_file = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--max-body")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_size(o, v, &a->srv.max_body);
        } else if (!strcmp(o, "--max-connections")) {
            ok = (v = cli_value(argc, argv, &i)) &&
                 cli_int(o, v, 1, 65536, &a->srv.max_connections);
        } else if (!strcmp(o, "--max-buffered")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_size(o, v, &a->srv.max_buffered);
        } else if (!strcmp(o, "--max-answer")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_size(o, v, &a->srv.max_answer);
        } else if (!strcmp(o, "--max-answers-total")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_size(o, v, &a->srv.max_answers_total);
        } else if (!strcmp(o, "--allowed-hosts")) {
            ok = (a->srv.allowed_hosts = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--cors")) {
            ok = (a->srv.cors = cli_value(argc, argv, &i)) != NULL;
        } else if (!strcmp(o, "--read-timeout")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_int(o, v, 0, 86400, &a->read_timeout_s);
        } else if (!strcmp(o, "--max-per-address")) {
            ok = (v = cli_value(argc, argv, &i)) &&
                 cli_int(o, v, 0, 65536, &a->srv.max_per_address);
        } else if (!strcmp(o, "--log-format")) {
            ok = (v = cli_value(argc, argv, &i)) && (!strcmp(v, "text") || !strcmp(v, "json"));
            if (v && !ok)
                fprintf(stderr, "tessera: --log-format wants text or json, not '%s'\n", v);
            a->srv.log_json = ok && !strcmp(v, "json");
        } else if (!strcmp(o, "--grace")) {
            ok = (v = cli_value(argc, argv, &i)) && cli_int(o, v, 0, 3600, &a->grace_s);
        } else {
            fprintf(stderr, "tessera: unknown option %s for serve\n", o);
            return 2;
        }
        if (!ok)
            return 2;
    }
    a->srv.grace_ms = a->grace_s * 1000;
    a->srv.read_timeout_ms = a->read_timeout_s * 1000;
    a->srv.log = log_line;
    a->srv.template_time = cli_template_time();
    return 0;
}

void cli_route_name(const char *model_name, const char *path, const char *const *taken,
                    int n_taken, char *out, size_t cap)
{
    snprintf(out, cap, "%s", model_name);
    for (int i = 0; i < n_taken; i++)
        if (!strcmp(taken[i], out)) {
            const char *base = strrchr(path, '/');
            base = base ? base + 1 : path;
            /* Only the extension goes: names like tinyllama-1.1b.Q8_0 have dots of their
             * own. A leading dot (".gguf") is the name, not an extension. */
            const char *dot = strrchr(base, '.');
            size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
            snprintf(out, cap, "%.*s", (int)n, base);
            break;
        }
}

bool cli_route_arg(const char *arg, char *route, size_t route_cap, const char **path)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : 0;
    route[0] = '\0';
    *path = arg;
    if (!eq || n == 0 || memchr(arg, '/', n))
        return true;
    for (size_t i = 0; i < n; i++) {
        char ch = arg[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.' || ch == ':')) {
            fprintf(stderr, "tessera serve: route name '%.*s' may use only letters, digits "
                            "and - _ . :\n", (int)n, arg);
            return false;
        }
    }
    if (n >= route_cap) {
        fprintf(stderr, "tessera serve: route name '%.*s' is longer than %zu bytes\n", (int)n,
                arg, route_cap - 1);
        return false;
    }
    memcpy(route, arg, n);
    route[n] = '\0';
    *path = eq + 1;
    return true;
}

/* Resolves every -m of a (the default model when none) into paths and the routes given
 * by NAME=; false after printing why. */
static bool resolve_models(serve_args *a, char paths[][4096], char given[][128])
{
    if (!a->n_models) {
        a->models[a->n_models++] = NULL;
        given[0][0] = '\0';
        return cli_model_path(NULL, a->model_dir, paths[0], sizeof paths[0]);
    }
    for (int i = 0; i < a->n_models; i++) {
        const char *path = NULL;
        if (!cli_route_arg(a->models[i], given[i], sizeof given[i], &path) ||
            !cli_model_path(path, a->model_dir, paths[i], sizeof paths[i]))
            return false;
        for (int j = 0; j < i && given[i][0]; j++)
            if (!strcmp(given[i], given[j])) {
                fprintf(stderr, "tessera serve: two models are routed as '%s'\n", given[i]);
                return false;
            }
    }
    return true;
}

static int serve(int argc, char **argv)
{
    serve_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_args(argc, argv, &a);
    if (rc) {
        cli_free_draft_model(&a.eng);
        usage(rc == 1 ? stdout : stderr);
        return rc == 1 ? 0 : 2;
    }
    char paths[MAX_MODELS][4096], given[MAX_MODELS][128];
    if (!resolve_models(&a, paths, given)) {
        cli_free_draft_model(&a.eng);
        return 1;
    }

    /* Block the shutdown signals in every thread started from here; main waits for them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    ts_model *models[MAX_MODELS] = {0};
    ts_engine *engines[MAX_MODELS] = {0};
    char names[MAX_MODELS][128];
    const char *routes[MAX_MODELS];
    for (int i = 0; i < MAX_MODELS; i++)
        routes[i] = names[i];
    ts_server *srv = NULL;
    ts_error err = {0};
    int status = 1;
    /* Bind before loading: a port in use is reported at once, not after a long load. */
    if (ts_server_create(&a.srv, &srv, &err) != TS_OK || ts_server_listen(srv, &err) != TS_OK)
        goto done;
    if (a.n_models > 1 && a.eng.n_threads == 0) {
        /* Each engine has its own OpenMP team. Teams adding up to more threads than
         * cores make libgomp stop spinning between parallel regions, which slows every
         * step (docs/ARCHITECTURE.md, "Threads"): split the threads one engine would
         * have (all cores, or OMP_NUM_THREADS) instead. */
        int cores = omp_get_max_threads();
        a.eng.n_threads = cores / a.n_models > 0 ? cores / a.n_models : 1;
        fprintf(stderr, "tessera serve: %d models share %d cores: %d thread%s each "
                        "(--threads to choose)\n", a.n_models, cores, a.eng.n_threads,
                a.eng.n_threads == 1 ? "" : "s");
    }
    char threads[320];
    cli_threads_describe(threads, sizeof threads,
                         a.eng.n_threads > 0 ? a.eng.n_threads : omp_get_max_threads());
    fprintf(stderr, "tessera serve: %s\n", threads);
    for (int i = 0; i < a.n_models; i++) {
        if (!(models[i] = cli_load_model(paths[i], a.tokenizer, &a.load))) {
            snprintf(err.msg, sizeof err.msg, "cannot load %s", paths[i]);
            goto done;
        }
        if (!(engines[i] = cli_make_engine(models[i], &a.eng))) {
            snprintf(err.msg, sizeof err.msg, "cannot start an engine for %s", paths[i]);
            goto done;
        }
        if (given[i][0]) {
            memcpy(names[i], given[i], sizeof names[i]);
            for (int j = 0; j < i; j++)
                if (!strcmp(names[j], names[i])) {
                    snprintf(err.msg, sizeof err.msg, "route '%s' is taken by %.100s",
                             names[i], paths[j]);
                    goto done;
                }
        } else {
            cli_route_name(ts_model_get_config(models[i])->name, paths[i], routes, i,
                           names[i], sizeof names[i]);
        }
        if (ts_server_add_model(srv, names[i], engines[i], &err) != TS_OK)
            goto done;
        ts_engine_stats st;
        ts_engine_get_stats(engines[i], &st);
        fprintf(stderr, "tessera serve: model '%s' from %s (K/V %s, %d blocks of %d tokens)\n",
                names[i], paths[i], cli_kv_type_name(ts_engine_kv_type(engines[i])),
                st.kv_blocks_total, TS_KV_BLOCK_TOKENS);
    }
    if (ts_server_start(srv, &err) != TS_OK)
        goto done;
    fprintf(stderr, "tessera serve: listening on http://%s:%d\n", a.srv.host, ts_server_port(srv));
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "tessera serve: %s, shutting down (grace %d s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", a.grace_s);
    ts_server_stop(srv);
    status = 0;
done:
    if (status)
        fprintf(stderr, "tessera serve: %s\n", err.msg[0] ? err.msg : ts_status_str(err.status));
    ts_server_stop(srv);
    for (int i = 0; i < a.n_models; i++)
        ts_engine_destroy(engines[i]);
    ts_server_destroy(srv);
    for (int i = 0; i < a.n_models; i++)
        ts_model_free(models[i]);
    cli_free_draft_model(&a.eng);
    return status;
}

int cli_serve(int argc, char **argv)
{
    cli_config args;
    ts_error err = {0};
    if (cli_config_args(&args, argc, argv, &err) != TS_OK) {
        fprintf(stderr, "tessera serve: %s\n", err.msg);
        return 2;
    }
    int rc = serve(args.argc, args.argv);
    cli_config_free(&args);
    return rc;
}
