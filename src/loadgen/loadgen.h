/* loadgen.h: the HTTP load generator behind `tessera loadgen`: URL and loopback checks,
 * an incremental SSE parser, percentiles, the priority mix, and the closed-loop run that
 * keeps C requests in flight against an OpenAI-compatible server through libcurl.
 *
 * Metrics of one concurrency level (N requests, at most C in flight; times are
 * CLOCK_MONOTONIC taken in the transfer's write callback as bytes arrive):
 *   TTFT       request handed to libcurl -> first chunk carrying content (stream), or
 *              the whole request's latency (non-stream).
 *   ITL        gap between consecutive content chunks of one request (stream only),
 *              pooled over the requests of the level (or of one priority class).
 *   latency    request handed to libcurl -> transfer complete.
 *   wall       first request sent -> last request complete.
 *   req/s      successful requests / wall;  output tok/s: usage.completion_tokens of the
 *              successful requests / wall.
 */
#ifndef TESSERA_LOADGEN_H
#define TESSERA_LOADGEN_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "tessera/status.h"

enum {
    LOADGEN_MAX_LEVELS = 16,
    LOADGEN_MAX_CONCURRENCY = 1024,
    LOADGEN_MAX_REQUESTS = 1000000,
    LOADGEN_MAX_ERROR_KINDS = 32,
    LOADGEN_MAX_NOTES = 8,
    LOADGEN_MAX_SAVED = 12,   /* raw responses saved per level: 8 failed, 4 deviating */
};

/* ---- URL ------------------------------------------------------------------------- */

typedef struct loadgen_url {
    char scheme[8];  /* "http" or "https" */
    char host[256];  /* IPv6 literals without their brackets */
    int port;        /* 1..65535; 80/443 when the URL names none */
    char path[512];  /* base path without a trailing '/' or "/v1", "" for the root */
} loadgen_url;

/* Parses scheme://host[:port][/path]. A path ending in /v1 (an OpenAI client's base URL)
 * loses it, as the routes loadgen formats all start with /v1. Refuses user info ('@'),
 * queries, fragments, other schemes, empty hosts and bad ports, naming what was wrong.
 * url: borrowed. */
ts_status loadgen_url_parse(loadgen_url *out, const char *url, ts_error *err);

/* True for "localhost", 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104 literals. Other names
 * are not resolved: they count as remote. */
bool loadgen_url_is_loopback(const loadgen_url *u);

/* scheme://host:port<path><route> into out (cap bytes); TS_ERR_TOO_LONG when it does not
 * fit. route: borrowed, starts with '/'. */
ts_status loadgen_url_format(char *out, const loadgen_url *u, const char *route, size_t cap,
                             ts_error *err);

/* ---- Server-sent events --------------------------------------------------------- */

/* Called once per event with its data lines joined by '\n' (NUL-terminated, len bytes,
 * valid until the next feed). Returns false to stop parsing (feed then returns
 * TS_ERR_CANCELLED). */
typedef bool (*loadgen_sse_fn)(void *ctx, const char *data, size_t len);

typedef struct loadgen_sse {
    strbuf line;         /* the line being read */
    strbuf data;         /* the event's data so far (the last event's until a data field) */
    bool has_data;       /* a data field was seen since the last dispatch */
    bool after_cr;       /* the last byte was '\r': a '\n' right after it is the same EOL */
    int bom;             /* bytes of a leading UTF-8 BOM matched so far; -1 once past it */
    int other_fields;    /* field lines other than data (event:, id:, retry:, unknown) */
    size_t max_event;    /* bytes a line or an event may hold */
} loadgen_sse;

void loadgen_sse_init(loadgen_sse *p, size_t max_event);
void loadgen_sse_free(loadgen_sse *p);
/* Feeds any split of the stream (one leading BOM skipped; lines end in \n, \r\n or \r;
 * "data:" fields joined by '\n'; ':' comments ignored, other fields counted and ignored;
 * a blank line dispatches). TS_ERR_TOO_LONG when a line or an event passes max_event,
 * TS_ERR_NOMEM (the parser then stays failed: free it). buf: borrowed. */
ts_status loadgen_sse_feed(loadgen_sse *p, const char *buf, size_t len, loadgen_sse_fn fn,
                           void *ctx, ts_error *err);
/* At the end of the stream: an unterminated last line or undispatched event (the spec
 * drops it) is dispatched anyway, so a peer that omits the final blank line is still
 * measured. *pending: whether there was one. Errors as feed. */
ts_status loadgen_sse_finish(loadgen_sse *p, bool *pending, loadgen_sse_fn fn, void *ctx,
                             ts_error *err);

/* ---- Deviations from the OpenAI stream format ------------------------------------ */

/* What a streamed response did that OpenAI's does not, counted once per request and kind.
 * Only LOADGEN_DEV_ERROR_EVENT fails a request; with LOADGEN_DEV_MISSING_USAGE loadgen
 * counts content chunks as tokens; the others are recorded and measured through. */
typedef enum loadgen_dev {
    LOADGEN_DEV_INVALID_UTF8,   /* a delta's text is not UTF-8, even joined to its neighbours */
    LOADGEN_DEV_SPLIT_UTF8,     /* a character's bytes came in two deltas (raw, in JSON text) */
    LOADGEN_DEV_REPLACEMENT,    /* U+FFFD in a delta: bytes the server replaced */
    LOADGEN_DEV_INVALID_JSON,   /* a data event that is not JSON (skipped) */
    LOADGEN_DEV_ERROR_EVENT,    /* {"error": ...} inside the 200 stream */
    LOADGEN_DEV_MISSING_DONE,   /* the stream ended without data: [DONE] */
    LOADGEN_DEV_MISSING_USAGE,  /* no usage although stream_options.include_usage asked */
    LOADGEN_DEV_MISSING_FINISH, /* no choice carried a finish_reason */
    LOADGEN_DEV_MISSING_FIELDS, /* a chunk without id, object, created, model or choices */
    LOADGEN_DEV_EXTRA_FIELDS,   /* a field OpenAI's chunk does not have (llama.cpp: timings) */
    LOADGEN_DEV_SSE_FIELD,      /* an SSE field other than data (event:, id:, retry:, ...) */
    LOADGEN_DEV_AFTER_DONE,     /* an event after data: [DONE] */
    LOADGEN_DEV_UNTERMINATED,   /* the last event had no blank line after it */
    LOADGEN_DEV_CONTENT_TYPE,   /* the response is not text/event-stream */
    LOADGEN_DEV_COUNT
} loadgen_dev;

/* "invalid_utf8_in_delta", "missing_finish_reason", ... (the names loadgen reports). */
const char *loadgen_dev_name(loadgen_dev d);

/* One stream's conformance, fed chunk by chunk. */
typedef struct loadgen_check {
    uint32_t dev;              /* bit (1u << loadgen_dev) per deviation seen */
    bool chat;                 /* chat.completion.chunk deltas, else text_completion text */
    bool finish_seen, usage_seen;
    unsigned char carry[4];    /* (n_carry) a UTF-8 sequence a delta ended in the middle of */
    size_t n_carry;
    char extra[48];            /* the first extra field, as "timings" or "choices[].x" */
    char error[160];           /* the first error event's message */
} loadgen_check;

void loadgen_check_init(loadgen_check *c, bool chat);
/* One parsed chunk: error events, missing and extra fields, finish_reason, usage, and the
 * delta text's UTF-8 (text: the content, NUL-terminated, or NULL). j, text: borrowed. */
void loadgen_check_chunk(loadgen_check *c, const cJSON *j, const char *text);
/* The stream is over: an unfinished UTF-8 sequence, no finish_reason, no usage. */
void loadgen_check_end(loadgen_check *c);

/* ---- Statistics ----------------------------------------------------------------- */

/* The q-quantile (0..1) of sorted[0..n), interpolated linearly between the closest
 * ranks (numpy's default); NAN when n is 0. */
double loadgen_percentile(const double *sorted, size_t n, double q);
/* Sorts v[0..n) ascending in place. */
void loadgen_sort(double *v, size_t n);

typedef struct loadgen_pcts {
    double p50, p90, p99; /* milliseconds; NAN without samples */
} loadgen_pcts;

/* Sorts v and fills p50/p90/p99. */
void loadgen_pcts_of(loadgen_pcts *out, double *v, size_t n);

/* ---- Priority classes, mix and keys ---------------------------------------------- */

typedef enum loadgen_class {
    LOADGEN_CLASS_HIGH,
    LOADGEN_CLASS_NORMAL,
    LOADGEN_CLASS_LOW,
    LOADGEN_CLASS_COUNT
} loadgen_class;

const char *loadgen_class_name(loadgen_class c);

typedef struct loadgen_mix {
    double weight[LOADGEN_CLASS_COUNT]; /* fractions summing to 1 */
} loadgen_mix;

/* "high:0.2,normal:0.6,low:0.2": each class at most once, weights >= 0 and finite, not
 * all zero; normalised to sum 1. Classes left out get 0. s: borrowed. */
ts_status loadgen_mix_parse(loadgen_mix *out, const char *s, ts_error *err);
/* The class whose cumulative weight interval holds u in [0, 1). */
loadgen_class loadgen_mix_pick(const loadgen_mix *m, double u);

typedef struct loadgen_keys {
    char *key[LOADGEN_CLASS_COUNT]; /* the first key of each tier in the file, or NULL; owned */
} loadgen_keys;

/* Reads an api-keys file ({"KEY": {"tier": "high|normal|low", "name": "..."}}, tier
 * defaulting to normal). path: borrowed. On failure *out holds nothing. */
ts_status loadgen_keys_load(loadgen_keys *out, const char *path, ts_error *err);
void loadgen_keys_free(loadgen_keys *k);

/* ---- Prompts -------------------------------------------------------------------- */

/* n_words words from a fixed list of common English words (about one token each),
 * separated by spaces, chosen by seed; malloc'd, or NULL when out of memory. */
char *loadgen_words(int n_words, uint64_t seed);

/* ---- The server's counters -------------------------------------------------------- */

/* The sum of every sample of counter `name` in a Prometheus text page (NUL-terminated),
 * labelled or not, into *out; false when the page has none. page, name: borrowed. */
bool loadgen_spec_sum(const char *page, const char *name, uint64_t *out);

/* loadgen_spec_sum over the samples whose labels include `label` (e.g. source="ngram"),
 * NULL: every sample. label: borrowed. */
bool loadgen_spec_sum_where(const char *page, const char *name, const char *label,
                            uint64_t *out);

/* The draft sources tessera's /metrics labels its speculative-decoding counters with
 * (tessera_spec_draft_tokens_total{source=...}). */
enum { LOADGEN_SPEC_NGRAM, LOADGEN_SPEC_DRAFT_MODEL, LOADGEN_SPEC_SOURCES };

/* The label value of source s: "ngram", "draft_model"; "?" out of range. */
const char *loadgen_spec_source_name(int s);

/* Speculative-decoding counters read from a server's page: in all, and by draft source
 * when the page has them (by_source). */
typedef struct loadgen_spec_counts {
    uint64_t drafted, accepted;
    bool by_source;
    uint64_t source_drafted[LOADGEN_SPEC_SOURCES], source_accepted[LOADGEN_SPEC_SOURCES];
} loadgen_spec_counts;

/* The counters of page (NUL-terminated, borrowed) into *out; false when it has none of the
 * unlabelled totals (not a speculating tessera). */
bool loadgen_spec_read(const char *page, loadgen_spec_counts *out);

/* ---- The run -------------------------------------------------------------------- */

typedef struct loadgen_config {
    const char *url;          /* server base URL; borrowed */
    const int *levels;        /* (n_levels) concurrency levels in order; borrowed */
    int n_levels;
    int requests;             /* per level */
    int prompt_len;           /* words after the shared prefix */
    int shared_prefix;        /* words of the prefix every prompt starts with (0 = none) */
    int max_tokens;
    bool stream;              /* SSE with stream_options.include_usage */
    bool chat;                /* /v1/chat/completions instead of /v1/completions */
    bool ignore_eos;          /* send the server's ignore_eos extension */
    bool allow_remote;        /* permit hosts other than loopback */
    const char *model;        /* "model" field, or NULL; borrowed */
    const loadgen_mix *mix;   /* per-request tier, or NULL; borrowed */
    const loadgen_keys *keys; /* Bearer keys, or NULL for none; borrowed */
    double temperature;
    double timeout_s;         /* per request */
    double deadline_s;        /* the whole run; requests still out then are aborted */
    uint64_t seed;
    const char *save_dir;     /* raw responses of failed and deviating requests go here
                               * (headers and body as received), or NULL; borrowed */
    bool scrape_metrics;      /* read the server's speculative-decoding counters from its
                               * /metrics before and after each level (two GETs a level) */
    bool embed;               /* POST /v1/embeddings instead: each request embeds `batch`
                               * documents of shared_prefix + prompt_len words (max_tokens,
                               * stream, chat, temperature unused); a request succeeds with
                               * usage.prompt_tokens and one vector per document */
    int batch;                /* documents per embeddings request (1..2048, default 1) */
} loadgen_config;

/* Fills defaults: one level of 1, 16 requests, prompt 64, no prefix, 64 tokens, stream
 * off, completions, ignore_eos on, temperature 0, timeout 300 s, deadline 900 s, seed 1,
 * no metrics scraped, batches of 1 document. */
void loadgen_config_default(loadgen_config *cfg);

/* Error kinds besides HTTP statuses (which are >= 100). */
enum {
    LOADGEN_ERR_TRANSPORT = 0,    /* connection refused, reset, ... */
    LOADGEN_ERR_TIMEOUT = -1,     /* the per-request timeout */
    LOADGEN_ERR_BAD_RESPONSE = -2, /* 200 but not the shape expected (no usage, bad JSON) */
    LOADGEN_ERR_STREAM = -3,      /* an error event inside a 200 stream */
    LOADGEN_ERR_DEADLINE = -4,    /* aborted at the global deadline */
    LOADGEN_ERR_TRUNCATED = -5,   /* a 200 stream that ended with no [DONE], usage or finish */
};
/* "timeout", "transport", ..., or the status as text in buf (cap >= 8). */
const char *loadgen_error_name(int code, char *buf, size_t cap);

typedef struct loadgen_stats {
    int sent, ok, failed;
    long output_tokens, prompt_tokens;  /* of successful requests */
    long failed_chunks;  /* content chunks failed requests delivered before they failed */
    loadgen_pcts ttft_ms, itl_ms, latency_ms;
} loadgen_stats;

typedef struct loadgen_level {
    int concurrency;
    double wall_s, req_s, output_tok_s;
    double docs_s, prompt_tok_s; /* embeddings: documents of the successful requests, and
                                  * their usage.prompt_tokens, per second of wall time */
    loadgen_stats all;
    loadgen_stats cls[LOADGEN_CLASS_COUNT]; /* filled when the run had a mix */
    int err_code[LOADGEN_MAX_ERROR_KINDS];  /* (n_err_kinds) distinct codes, in order seen */
    int err_count[LOADGEN_MAX_ERROR_KINDS];
    int n_err_kinds;
    int dev_count[LOADGEN_DEV_COUNT];       /* requests that showed each deviation */
    char extra[LOADGEN_MAX_NOTES][48];      /* (n_extra) distinct extra fields, first seen */
    int n_extra;
    char error_sample[160];                 /* the first error event's message, or "" */
    int saved;                              /* raw responses written to save_dir */
    bool spec_seen;        /* the server's /metrics had speculative-decoding counters
                            * before and after the level: */
    uint64_t spec_drafted, spec_accepted; /* draft tokens it verified during the level, and
                                           * those it accepted */
    bool spec_by_source;   /* the page had them by draft source too: */
    uint64_t spec_source_drafted[LOADGEN_SPEC_SOURCES];
    uint64_t spec_source_accepted[LOADGEN_SPEC_SOURCES];
} loadgen_level;

typedef struct loadgen_result {
    loadgen_level levels[LOADGEN_MAX_LEVELS]; /* (n_levels) the levels that ran */
    int n_levels;
    bool mixed;
    bool deadline_hit;  /* levels after the one cut short did not run */
} loadgen_result;

/* Runs every level against cfg->url. Fails before sending anything on a bad URL, a
 * non-loopback host without allow_remote, a mix without keys for its tiers, or bad
 * numbers; request failures are counted in the result, not returned. */
ts_status loadgen_run(loadgen_result *out, const loadgen_config *cfg, ts_error *err);

/* The result and the settings as one JSON object (caller deletes), NULL without memory. */
cJSON *loadgen_result_json(const loadgen_result *r, const loadgen_config *cfg);

#endif
