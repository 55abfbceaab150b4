/* tessera/server.h: the OpenAI-compatible HTTP server. It serves one or more engines,
 * routed by model name, and talks to them only through the engine API. */
#ifndef TESSERA_SERVER_H
#define TESSERA_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/engine.h"
#include "tessera/status.h"

typedef struct ts_server ts_server;

typedef struct ts_server_options {
    const char *host;          /* address to bind (default "127.0.0.1"); copied */
    int port;                  /* default 8080; 0 = any free port (see ts_server_port) */
    const char *api_keys_path; /* JSON key file; NULL = no authentication; borrowed */
    bool protect_metrics;      /* /metrics needs a key too (when keys are set) */
    bool no_ui;                /* no chat page at GET / (404 like any unknown path) */
    bool no_slots;             /* GET /slots answers 501, as llama.cpp's without --slots */
    size_t max_body;           /* request body limit in bytes (default 1 MiB) */
    const char *chat_template; /* family name forced on every model; NULL = detect; copied */
    const char *chat_template_file; /* Jinja chat template for every model, read at create;
                                * NULL = each model's own; borrowed */
    long long template_time;   /* the time templates' strftime_now shows (Unix seconds);
                                * 0 = the clock */
    int max_connections;       /* open connections, one thread each (default 256); the
                                * next 16 are answered 503 (except /health), later ones
                                * are closed unanswered */
    size_t max_buffered;       /* unread output per request before the engine cancels it
                                * (default 1 MiB; 0 = unbounded), see max_unread_bytes */
    size_t max_answer;         /* bytes a non-streamed answer may grow to before it is
                                * cancelled with a 400 (default 8 MiB; 0 = unbounded) */
    size_t max_answers_total;  /* bytes held at once over all clients: non-streamed
                                * answers, built or unread, request bodies and the work of
                                * /tokenize and /detokenize; the request that would pass it
                                * is refused or cancelled with a 503 (default 64 MiB;
                                * 0 = unbounded) */
    int read_timeout_ms;       /* a request's headers and body must be in within this
                                * time of the connection's opening (or of the previous
                                * answer's end), else the connection is closed; a whole
                                * answer must be read within as long (30000; 0 = none) */
    int max_per_address;       /* connections from one client address (128; 0 = no cap):
                                * past it answered 503 (except /health), and a new one
                                * closes that address's oldest still-reading connection */
    const char *allowed_hosts; /* Host names served besides loopback ones when bound to
                                * a loopback address (comma-separated, "*" = any; NULL =
                                * none): others get 403 (DNS rebinding); copied */
    const char *cors;          /* origins a browser page may call from (comma-separated,
                                * "*" = any; NULL = same origin only): others get 403;
                                * copied */
    int grace_ms;              /* ts_server_stop waits this long for requests (10000) */
    /* One line per request (UTC time, request id, model, method, route, status, tokens,
     * duration) and per failed request, without a newline. NULL = no request log. Called
     * from HTTP threads; must be thread-safe. */
    void (*log)(void *user, const char *line);
    void *log_user;            /* borrowed */
    bool log_json;             /* each line a JSON object instead of text (false) */
    bool rerank;               /* every model answers POST /v1/rerank, scoring as
                                * Qwen3-Reranker does, whatever its GGUF's pooling (false:
                                * only models whose GGUF names rank pooling) */
} ts_server_options;

void ts_server_options_default(ts_server_options *opts);

/* Reads the key file (a clear error when it is malformed) and prepares the server. */
ts_status ts_server_create(const ts_server_options *opts, ts_server **out, ts_error *err);

/* Serves engine (borrowed; it must outlive the server) under name (copied). The first
 * model added answers requests that name none. Before ts_server_start only. */
ts_status ts_server_add_model(ts_server *srv, const char *name, ts_engine *engine,
                              ts_error *err);

/* Binds host:port and listens now, so that a port in use is reported before models load;
 * connections wait in the backlog until ts_server_start. Optional (ts_server_start binds
 * when it was not called); once only. */
ts_status ts_server_listen(ts_server *srv, ts_error *err);

/* Binds (unless ts_server_listen did) and starts answering on the server's own threads. */
ts_status ts_server_start(ts_server *srv, ts_error *err);

/* The bound port (useful with port 0); 0 before ts_server_listen or ts_server_start. */
int ts_server_port(const ts_server *srv);

/* Stops accepting connections, lets requests in flight finish for up to grace_ms, then
 * cancels the rest, waits a few seconds at most for their answers (503 for a non-streamed
 * request that had made no token) to go out, closes every connection and joins the HTTP
 * threads. Idempotent. */
void ts_server_stop(ts_server *srv);

/* Stops if needed and frees the server. Accepts NULL. Destroy the engines first: their
 * wake-up callbacks point into the server. */
void ts_server_destroy(ts_server *srv);

#endif /* TESSERA_SERVER_H */
