/* stop.h: stop-string matching over the streamed text of one request. */
#ifndef TESSERA_ENGINE_STOP_H
#define TESSERA_ENGINE_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/status.h"

#define STOP_MAX_STRINGS 4   /* OpenAI's limit */
#define STOP_MAX_LEN 256     /* bytes per stop string */

/* Text arrives in chunks (whatever the detokenizer completed). A suffix of the stream
 * that could still begin a stop string is held back, never emitted. After the first push
 * whose text completes a stop string (across any chunk boundaries), the text is cut at
 * the earliest start of any stop string present so far: what precedes it is emitted, the
 * rest dropped, and the matcher reports stopped. (So with stops "abbaa" and "bb", a
 * stream that has reached "abb" stops at "a|bb": generation ends when the first stop
 * string completes.) The emitted text never contains a stop string. Stop strings must be
 * valid UTF-8, so when the input is whole characters the cut between emitted and held
 * text falls on a character boundary too. */
typedef struct stop_matcher {
    int n;                                       /* stop strings */
    char str[STOP_MAX_STRINGS][STOP_MAX_LEN];    /* (n), not NUL-terminated */
    size_t len[STOP_MAX_STRINGS];                /* (n), each in [1, STOP_MAX_LEN] */
    size_t max_len;                              /* longest of them */
    char held[STOP_MAX_LEN];                     /* (n_held) withheld text */
    size_t n_held;                               /* < max_len */
    bool stopped;
    int which;                                   /* index of the matched string, or -1 */
} stop_matcher;

/* The most bytes one push of len bytes can write (held text + the chunk). */
#define STOP_MAX_OUT(len) ((size_t)(len) + STOP_MAX_LEN)

/* Copies n (0..STOP_MAX_STRINGS) NUL-terminated strings from strs (borrowed). Empty
 * strings are ignored; a string longer than STOP_MAX_LEN bytes gives TS_ERR_TOO_LONG, one
 * that is not valid UTF-8 TS_ERR_INVALID_ARG, each naming stop[i]. */
ts_status stop_init(stop_matcher *m, const char *const *strs, int n, ts_error *err);

/* Pushes len bytes of text (borrowed) and writes what can be released to out (cap
 * bytes, at least STOP_MAX_OUT(len)); *n_out gets its length. After a stop, pushes write
 * nothing. */
ts_status stop_push(stop_matcher *m, char *out, size_t cap, size_t *n_out, const char *text,
                    size_t len, ts_error *err);

/* At the end of generation (max tokens, EOS): releases the held text into out (cap >=
 * STOP_MAX_LEN). Writes nothing after a stop. */
ts_status stop_flush(stop_matcher *m, char *out, size_t cap, size_t *n_out, ts_error *err);

#endif /* TESSERA_ENGINE_STOP_H */
