/* server_internal.h: the server object, per-connection state and the calls between the
 * server's files, which form layers (each calls only those below it):
 *   http.c      the daemon, the route table, bodies, auth, in-flight count, lifecycle
 *   routes.c    /health, /metrics, /v1/models, /tokenize, /detokenize
 *   complete.c  chat and text completions, and the Responses and Messages APIs (api.h)
 *   prompt.c    a completion's prompt: template, tokens
 *   reply.c     answers, errors, status mapping, find_model, wake-up cells */
#ifndef TESSERA_SERVER_INTERNAL_H
#define TESSERA_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include "common/strbuf.h"
#include "server/api.h"
#include "server/auth.h"
#include "server/guard.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "tessera/server.h"
#include "template/chat_jinja.h"
#include "template/chat_template.h"

enum {
    SRV_MAX_MODELS = 16,
    SRV_CONN_SPARE = 16,          /* connections past max_connections answered 503 */
    SRV_CONN_MEMORY = 32 * 1024,  /* MHD's per-connection buffer: request line + headers
                                   * must fit (431 otherwise) */
    SRV_MAX_HEADERS = 100,        /* header lines of a request (431 past it): MHD keeps
                                   * each in the connection's memory, which the answer
                                   * needs too */
    SRV_DRAIN_MS = 2000,          /* a finished request's last events (usage) are waited
                                   * for this long each, after cancelling it */
    SRV_SHUTDOWN_WAIT_MS = 5000,  /* after cancelling at shutdown, a request waits this
                                   * long at most for its end, and the server as long for
                                   * the answers to go out */
};

typedef struct srv_model {
    char *name;                  /* owned */
    ts_engine *engine;           /* borrowed */
    chat_template_kind template; /* detected or forced */
    chat_jinja jinja;            /* the Jinja template rendering its chats; .t NULL: the
                                  * family above does (template.c) */
    long long template_time;     /* the server's opts.template_time */
    const atomic_bool *stopping; /* borrowed: the server's; a render in flight stops on it */
    int32_t tool_marker;         /* the token of its family's tool-call marker where the
                                  * vocabulary holds it as a control token (whose text is
                                  * not printed), else -1 */
} srv_model;

/* A wake-up cell: the engine's notify callback writes its eventfd. Cells are recycled,
 * never freed before the server, so a late notify for a finished request only causes a
 * spurious wake-up of whoever holds the cell next. */
typedef struct srv_cell {
    int efd;
    struct srv_cell *next_free;
    struct srv_cell *next_all;
} srv_cell;

/* What a completion request keeps between MHD callbacks (job.h). */
typedef struct srv_job srv_job;

struct ts_server {
    ts_server_options opts;
    char *host;                   /* owned copy of opts.host */
    char *template_name;          /* owned copy of opts.chat_template */
    char *allowed_hosts, *cors;   /* owned copies of opts.allowed_hosts, opts.cors */
    char *template_src;           /* owned; opts.chat_template_file's text, or NULL */
    size_t template_len;
    auth_keys *keys;              /* owned; NULL = open */
    metrics *metrics;             /* owned */
    guard *guard;                 /* owned: read deadlines, per-address cap */
    srv_model models[SRV_MAX_MODELS];
    int n_models;
    struct MHD_Daemon *daemon;
    int listen_fd;                /* bound by ts_server_listen (listen.c) until the daemon
                                   * takes it at start; -1 otherwise */
    int listen_family;            /* its address family */
    int port;
    long long started;            /* Unix seconds */
    int stop_efd;                 /* readable once shutdown cancels what is left */
    atomic_bool stopping;         /* no new requests */
    bool stopped;
    pthread_mutex_t mu;           /* guards the fields below */
    pthread_cond_t idle;          /* signalled when in_flight drops */
    int in_flight;                /* completion requests not yet completed (http.c) */
    srv_job *jobs;                /* submitted requests, newest first (srv_job.next) */
    srv_cell *free_cells, *all_cells;
    atomic_ullong next_id;
    atomic_ullong next_request;   /* with id_seed, makes request ids (log.c) */
    uint64_t id_seed;
    atomic_int open_conns;        /* connections MHD holds open */
    atomic_size_t answer_bytes;   /* whole answers being built or waiting to be read */
};


/* Per-request state, in MHD's *req_cls; freed only by the completion callback. */
typedef struct srv_conn {
    ts_server *srv;
    bool begun;                   /* the access handler has seen it (else only the URI
                                   * log callback has: nothing to log or count) */
    const char *raw_uri;          /* MHD's, before unescaping; valid during the request */
    size_t raw_uri_len;           /* its strlen before MHD unescaped it in place */
    bool target_ok;               /* no control byte in the raw target */
    const struct http_route *entry; /* its row of http.c's route table; NULL: none */
    const char *allow;            /* the route's method (a 405's Allow header); static */
    bool in_flight;               /* counted in srv->in_flight */
    bool read_done;               /* the request is in: dispatched to its handler */
    guard_conn *guard;            /* the connection's guard entry (MHD's socket context) */
    metrics_route route;
    char method[16];              /* escaped (utf8_escape_controls), cut */
    char path[128];               /* escaped, cut */
    bool batch;                   /* /v1/batch/...: always LOW priority */
    ts_priority priority;         /* from the API key's tier */
    uint64_t cache_ns;            /* from the API key (0 without keys) */
    double t_start;               /* monotonic seconds */
    strbuf body;                  /* the accumulated upload */
    bool body_too_big;
    bool body_busy;               /* the server-wide budget could not hold the upload */
    size_t held;                  /* bytes counted in srv->answer_bytes for this request
                                   * (body, route work); given back by on_completed */
    bool close;                   /* answer with Connection: close (broken framing) */
    const char *cors_origin;      /* MHD's; set when --cors lets this request's Origin in */
    int status;                   /* HTTP status answered, 0 before */
    char error_code[32];          /* a 4xx's error code and parameter, for the log; "" */
    char error_param[64];         /* when none (safe characters only, cut; never the body) */
    char request_id[SRV_REQUEST_ID_CAP]; /* logged, and answered as X-Request-Id */
    const char *model;            /* the route that served it, for the log; borrowed */
    srv_job *job;                 /* owned; NULL unless a completion was submitted */
    int prompt_tokens;            /* tokens of a route that has no job (embeddings), for the
                                   * log and metrics */
    char ignored[OAI_IGNORED_LEN]; /* the body's unknown fields: X-Tessera-Ignored-Fields */
    api_kind api;                 /* the shape errors are answered in (/v1/messages:
                                   * Anthropic's) */
} srv_conn;

struct cJSON;

/* A route's handler: answers (or starts answering) the request on connection c. Returns
 * MHD_NO to drop a connection whose client went away. */
typedef enum MHD_Result srv_handler(struct MHD_Connection *mc, srv_conn *c);

/* ---- reply.c */

/* The header naming the request fields tessera did not know (their values ignored). */
#define SRV_HEADER_IGNORED "X-Tessera-Ignored-Fields"

/* Queues body (malloc'd; ownership passes to MHD) with a status and content type, and
 * c->ignored when set. */
enum MHD_Result srv_send(struct MHD_Connection *mc, srv_conn *c, int status,
                         const char *content_type, char *body, size_t len);

/* Adds the CORS headers to r when c's Origin is let in by --cors. */
void srv_add_cors_headers(struct MHD_Response *r, const srv_conn *c);

/* Counts n more bytes of c's work against the server-wide budget (srv->answer_bytes,
 * opts.max_answers_total). False, with e set to a 503 server_busy, when the total is
 * spent (what c held is then given back). */
bool srv_reserve(srv_conn *c, size_t n, oai_error *e);

/* Queues an OpenAI error body (adds Retry-After on 429). */
enum MHD_Result srv_send_error(struct MHD_Connection *mc, srv_conn *c, const oai_error *e);

/* Queues j (deleted here; NULL answers 500) as a JSON body. */
enum MHD_Result srv_send_json(struct MHD_Connection *mc, srv_conn *c, int status,
                              struct cJSON *j);

/* Fills e with the HTTP status and OpenAI code of engine status st (one table, in
 * reply.c) and message msg. Returns TS_ERR_INVALID_ARG, as oai_error_set. */
ts_status srv_status_error(oai_error *e, ts_status st, const char *msg);

/* The model named name, or the first one for NULL; NULL and a 404 in e when unknown. */
srv_model *srv_find_model(ts_server *srv, const char *name, oai_error *e);

/* Cells for the engine's notify callback. */
srv_cell *srv_cell_get(ts_server *srv);
void srv_cell_put(ts_server *srv, srv_cell *cell);
void srv_cell_notify(void *cell);

/* ---- routes.c: the routes that need no engine step */
srv_handler routes_health, routes_metrics, routes_models, routes_model, routes_tokenize,
    routes_detokenize;

/* ---- count_tokens.c: POST /v1/messages/count_tokens (Anthropic's shape) */
srv_handler count_tokens_route;

/* ---- llama_routes.c: llama.cpp's GET /props, and /tokenize's with_pieces answer */
srv_handler routes_props;
/* llama_slots.c: llama.cpp's GET /slots */
srv_handler routes_slots;
/* {"model", "count", "tokens": [{"id", "piece"}]} for the n ids (borrowed) of tok: the
 * piece a string, or its bytes as numbers where they are not valid UTF-8; malloc'd, *len
 * its length (about 30 bytes a token of one byte); NULL out of memory. */
char *llama_pieces_json(const ts_tokenizer *tok, const char *model, const int32_t *ids,
                        size_t n, size_t *len);

/* ---- embed_route.c: POST /v1/embeddings */
srv_handler embed_route;

/* ---- rerank_route.c: POST /v1/rerank, /v1/reranking, /rerank */
srv_handler rerank_route;

/* The path prefix of GET /v1/models/{id}. */
#define SRV_MODEL_ROUTE "/v1/models/"

/* ---- template.c */

/* Reads the Jinja template file at path into srv->template_src. */
ts_status srv_template_load(ts_server *srv, const char *path, ts_error *err);
/* Picks model m's chat template (m->engine set): a forced family, else the template file
 * or the model's own Jinja template, else the detected family. The model's own template
 * failing to load is logged and the family used; the file failing is an error. */
ts_status srv_template_setup(ts_server *srv, srv_model *m, ts_error *err);
void srv_template_free(srv_model *m);
/* Chat request r rendered by m's Jinja template (m->jinja.t set) into *text (malloc'd);
 * a template that raises, or fails on the request's values, gives 400 with its message. */
ts_status srv_template_render(const srv_model *m, const oai_request *r, char **text,
                              oai_error *e);
srv_handler routes_apply_template;

/* ---- prompt.c */

/* Request r's prompt as token ids (*ids malloc'd, n of them) for model m with tokenizer
 * tok (all borrowed); e says why not. A completion prompt's text is read as llama.cpp and
 * Hugging Face tokenizers read it, special tokens spelled out included; a chat is rendered
 * in the model's template, whose markup gives the special tokens while the messages' own
 * text stays plain text. */
ts_status prompt_tokens(const oai_request *r, const srv_model *m, const ts_tokenizer *tok,
                        int32_t **ids, size_t *n, oai_error *e);

/* ---- complete.c */

/* Run a chat or text completion for a connection whose body is complete. Queue the
 * answer (whole, or a stream fed by the engine's events). */
srv_handler complete_chat, complete_text;
/* The same for a Responses (/v1/responses) or Messages (/v1/messages) body, or
 * llama.cpp's /completion (api.h). */
srv_handler complete_responses, complete_messages, complete_llama;

/* Frees the job (releases the engine request; cancels it if still running); records
 * token counts in *prompt_tokens and *completion_tokens for the request log. */
void complete_job_free(srv_job *job, int *prompt_tokens, int *completion_tokens);

/* Shutdown: asks the engine to cancel every submitted request, those that have shown no
 * token yet first, so that none of them is admitted into a slot another one frees. */
void complete_cancel_all(ts_server *srv);

#endif /* TESSERA_SERVER_INTERNAL_H */
