/* detok.h: incremental UTF-8 assembly of generated token bytes, so that streamed text
 * is always made of whole, valid characters. */
#ifndef TESSERA_ENGINE_DETOK_H
#define TESSERA_ENGINE_DETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

/* Token pieces may split a character (byte-fallback tokens <0xE2> <0x82> <0xAC> make
 * one "€"). The detokenizer passes complete characters through, holds an incomplete
 * tail until the next push completes it, and replaces each maximal ill-formed
 * subsequence (Unicode's "maximal subpart" practice, as in WHATWG decoders) with one
 * U+FFFD: stray continuation bytes, C0/C1/F5..FF, a lead byte not followed by its
 * continuation bytes, overlongs, surrogates and code points above U+10FFFF. The output
 * is therefore always valid UTF-8. */
typedef struct detok {
    bool strip_leading_space; /* drop one ' ' at the start of the first non-empty piece */
    bool seen_piece;          /* a non-empty piece has been pushed */
    uint8_t tail[4];          /* bytes of the incomplete character held back */
    int n_tail;
    int need;                 /* total bytes of that character (2..4) */
} detok;

/* The most bytes one push of len bytes can write: each byte may become a 3-byte U+FFFD. */
#define DETOK_MAX_OUT(len) (3 * (size_t)(len) + 4)

/* strip_leading_space: SentencePiece's rule for the first piece of a text. */
void detok_init(detok *d, bool strip_leading_space);

/* Pushes len bytes (borrowed) and writes the newly completed text to out (cap bytes, not
 * NUL-terminated); *n_out gets its length. cap must be at least DETOK_MAX_OUT(len), else
 * TS_ERR_INVALID_ARG and nothing is consumed. */
ts_status detok_push(detok *d, char *out, size_t cap, size_t *n_out, const void *bytes,
                     size_t len, ts_error *err);

/* At the end of the text: writes U+FFFD for an incomplete tail (out needs 3 bytes; cap
 * is checked) and resets for a new text. */
ts_status detok_flush(detok *d, char *out, size_t cap, size_t *n_out, ts_error *err);

/* Whether s (len bytes, borrowed) is well-formed UTF-8 by the rules above. */
bool detok_utf8_valid(const void *s, size_t len);

#endif /* TESSERA_ENGINE_DETOK_H */
