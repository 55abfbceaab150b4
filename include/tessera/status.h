/* tessera/status.h: the one status enum every fallible function returns, and an error
 * record that carries a human-readable message next to it. */
#ifndef TESSERA_STATUS_H
#define TESSERA_STATUS_H

#include <stddef.h>

/* X(name, message): one row per status. The enum and ts_status_str() are generated from
 * this table so they never disagree. */
#define TS_STATUS_MAP(X)                                                  \
    X(OK, "success")                                                      \
    X(ERR_IO, "input/output error")                                       \
    X(ERR_NOMEM, "out of memory")                                         \
    X(ERR_FORMAT, "malformed input file")                                 \
    X(ERR_UNSUPPORTED, "unsupported feature")                             \
    X(ERR_INVALID_ARG, "invalid argument")                                \
    X(ERR_NOT_FOUND, "not found")                                         \
    X(ERR_TOO_LONG, "input exceeds a limit")                              \
    X(ERR_OUT_OF_BLOCKS, "out of KV cache blocks")                        \
    X(ERR_QUEUE_FULL, "request queue is full")                            \
    X(ERR_CANCELLED, "request cancelled")                                 \
    X(ERR_TIMEOUT, "timed out")                                           \
    X(ERR_SHUTDOWN, "engine is shutting down")                            \
    X(ERR_INTERNAL, "internal error")

typedef enum ts_status {
#define TS_STATUS_ENUM(name, msg) TS_##name,
    TS_STATUS_MAP(TS_STATUS_ENUM)
#undef TS_STATUS_ENUM
    TS_STATUS_COUNT
} ts_status;

/* Static description of a status code; never NULL. */
const char *ts_status_str(ts_status status);

/* Where a failing function explains itself. Callers may pass NULL when they only want
 * the status. The message names what was wrong (which key, which tensor, which field). */
typedef struct ts_error {
    ts_status status;
    char msg[256];
} ts_error;

/* Records status and a printf-style message in err (if non-NULL); returns status so the
 * caller can write `return ts_error_set(err, TS_ERR_FORMAT, "...", ...);`. */
ts_status ts_error_set(ts_error *err, ts_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* TESSERA_STATUS_H */
