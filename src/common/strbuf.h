/* strbuf.h: a growable byte buffer, kept NUL-terminated after its bytes so text can be
 * read in place. `failed` sticks after the first allocation failure, so a run of appends
 * can be checked once at the end. Zero-initialise to start; strbuf_free to end. */
#ifndef TESSERA_COMMON_STRBUF_H
#define TESSERA_COMMON_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct strbuf {
    char *s;     /* NULL until the first append */
    size_t len;  /* bytes, not counting the NUL */
    size_t cap;
    bool failed;
} strbuf;

/* Appends n bytes (which may hold NULs). False, with `failed` set, when out of memory
 * (the buffer keeps what it had). */
bool strbuf_add(strbuf *b, const void *data, size_t n);

/* Appends printf-formatted text. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
bool strbuf_addf(strbuf *b, const char *fmt, ...);

/* Empties b for reuse: len 0, the room kept (and `failed`, if set). */
void strbuf_reset(strbuf *b);

/* Frees the bytes and zeroes b. */
void strbuf_free(strbuf *b);

#endif /* TESSERA_COMMON_STRBUF_H */
