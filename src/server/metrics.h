/* metrics.h: the server's counters and latency histograms, and their rendering in the
 * Prometheus text exposition format together with each engine's statistics. */
#ifndef TESSERA_SERVER_METRICS_H
#define TESSERA_SERVER_METRICS_H

#include <stddef.h>

#include "tessera/engine.h"

typedef enum metrics_route {
    METRICS_ROUTE_CHAT,
    METRICS_ROUTE_COMPLETIONS,
    METRICS_ROUTE_BATCH_CHAT,
    METRICS_ROUTE_BATCH_COMPLETIONS,
    METRICS_ROUTE_MODELS,
    METRICS_ROUTE_HEALTH,
    METRICS_ROUTE_METRICS,
    METRICS_ROUTE_TOKENIZE,
    METRICS_ROUTE_DETOKENIZE,
    METRICS_ROUTE_EMBEDDINGS,
    METRICS_ROUTE_RERANK,
    METRICS_ROUTE_OTHER,
    METRICS_ROUTE_COUNT
} metrics_route;

typedef enum metrics_hist {
    METRICS_HIST_TTFT,      /* seconds from arrival to the first token */
    METRICS_HIST_ITL,       /* seconds between consecutive tokens of a completion */
    METRICS_HIST_DURATION,  /* seconds from arrival to the last byte queued */
    METRICS_HIST_COUNT
} metrics_hist;

enum { METRICS_MAX_BUCKETS = 16 };

typedef struct metrics metrics;

/* Per-model input to metrics_render(). */
typedef struct metrics_model {
    const char *name;      /* borrowed */
    ts_engine_stats stats;
} metrics_model;

ts_status metrics_create(metrics **out, ts_error *err);
void metrics_free(metrics *m); /* accepts NULL */

/* All thread-safe. status is the HTTP status answered. */
void metrics_count_request(metrics *m, metrics_route route, int status);
void metrics_add_tokens(metrics *m, long prompt_tokens, long generated_tokens);
void metrics_observe(metrics *m, metrics_hist h, double seconds);

/* Prometheus text (version 0.0.4): a malloc'd NUL-terminated string, or NULL when out of
 * memory. models (n, borrowed) adds per-model gauges and counters labelled model="...". */
char *metrics_render(metrics *m, const metrics_model *models, size_t n);

/* The route's label value ("chat_completions", ...). */
const char *metrics_route_name(metrics_route route);

#endif /* TESSERA_SERVER_METRICS_H */
