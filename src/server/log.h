/* log.h: the server's log lines (ISO time, request id, model; text or JSON) and request
 * ids, which are also answered as X-Request-Id. */
#ifndef TESSERA_SERVER_LOG_H
#define TESSERA_SERVER_LOG_H

#include <stdint.h>

#include "tessera/server.h"

enum { SRV_REQUEST_ID_CAP = 65 }; /* 64 bytes and the NUL */

/* The request's id into out: the client's X-Request-Id value (borrowed, may be NULL) when
 * it is 1..64 bytes of letters, digits and - _ . : (so it cannot break a log line or a
 * header), else 16 hex digits from fresh (distinct for distinct values). */
void srv_request_id(char out[SRV_REQUEST_ID_CAP], const char *client, uint64_t fresh);

/* What one log line says; any string may be NULL. */
typedef struct srv_log_entry {
    const char *request_id, *model;
    const char *method, *path; /* NULL for a message that is not a request's summary */
    int status, prompt_tokens, completion_tokens;
    double duration_ms;
    const char *error_code;    /* a 4xx answer's error code ("invalid_value"), else NULL */
    const char *error_param;   /* and the request field it names ("temperature"), or NULL */
    const char *message;       /* free text: an error, "connection closed early" */
} srv_log_entry;

/* Formats e as one line (text, or a JSON object when opts->log_json) stamped with the
 * current UTC time to the millisecond, and passes it to opts->log. Does nothing without
 * opts->log. Thread-safe as opts->log is. Text:
 *   2026-11-25T15:18:05.123Z req=ID model=M POST /v1/completions 200 prompt_tokens=5
 *   completion_tokens=16 12.3ms[ error=CODE[ param=P]][ (MESSAGE)]   (a request's summary)
 *   2026-11-25T15:18:05.123Z req=ID model=M MESSAGE   (anything else) */
void srv_log(const ts_server_options *opts, const srv_log_entry *e);

#endif
