/* run_internal.h: what the load run's files share: request records, the per-level
 * accumulator of inter-token gaps, and the runner's fixed state. */
#ifndef TESSERA_LOADGEN_RUN_INTERNAL_H
#define TESSERA_LOADGEN_RUN_INTERNAL_H

#include <curl/curl.h>

#include "loadgen/loadgen.h"

typedef struct loadgen_request {
    int cls;                 /* loadgen_class */
    double t_send, t_first, t_done; /* seconds, CLOCK_MONOTONIC; t_first < 0 until content */
    long tokens, prompt_tokens;     /* from usage */
    int chunks;              /* content chunks seen */
    int error;               /* when done && !ok: HTTP status or LOADGEN_ERR_* */
    uint32_t dev;            /* stream: bit (1u << loadgen_dev) per deviation */
    bool done, ok;
} loadgen_request;

typedef struct loadgen_gaps {
    double *v;               /* (n) milliseconds; owned */
    size_t n, cap;
} loadgen_gaps;

typedef struct loadgen_acc {
    loadgen_gaps all, cls[LOADGEN_CLASS_COUNT];
    bool nomem;              /* a gap was dropped for want of memory */
    char extra[LOADGEN_MAX_NOTES][48]; /* (n_extra) distinct extra fields seen */
    int n_extra;
    char error_sample[160];  /* the first error event's message */
    int saved_failed, saved_dev; /* raw responses written to save_dir */
} loadgen_acc;

/* Records one inter-token gap of a request of class cls. */
void loadgen_acc_gap(loadgen_acc *a, int cls, double ms);

typedef struct loadgen_runner {
    const loadgen_config *cfg;           /* borrowed */
    CURLM *multi;                        /* owned */
    char endpoint[1024];                 /* the route's full URL */
    char metrics[1024];                  /* the server's /metrics URL ("": not scraped) */
    const char *key[LOADGEN_CLASS_COUNT]; /* Bearer key per class, or NULL; borrowed */
    char *prefix;                        /* the shared prefix words ("" for none); owned */
    bool mixed;
    double deadline;                     /* CLOCK_MONOTONIC seconds */
    bool deadline_hit;
} loadgen_runner;

/* A uniform double in [0, 1) that is a function of seed. */
double loadgen_uniform(uint64_t seed);

/* Runs level number `level` (cfg->levels[level] in flight, cfg->requests in all) into
 * reqs (cfg->requests records, zeroed) and acc. Requests still out at the deadline are
 * aborted and marked LOADGEN_ERR_DEADLINE. Fails only when a request cannot be set up. */
ts_status loadgen_run_level(loadgen_runner *run, int level, loadgen_request *reqs,
                            loadgen_acc *acc, ts_error *err);

/* Reads the server's speculative-decoding counters (loadgen_spec_read of its /metrics,
 * summed over its models) with the normal key, if any; false when the page or the counters
 * are not there (another server, speculation unknown) or the transfer fails. */
bool loadgen_spec_scrape(const loadgen_runner *run, loadgen_spec_counts *out);

#endif
