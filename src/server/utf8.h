/* utf8.h: UTF-8 validation and repair for text that crosses the HTTP boundary. */
#ifndef TESSERA_SERVER_UTF8_H
#define TESSERA_SERVER_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* True when the n bytes of s are well-formed UTF-8 (no overlongs, no surrogates, no
 * code points past U+10FFFF). */
bool utf8_valid(const char *s, size_t n);

/* A malloc'd NUL-terminated copy of the n bytes of s with every ill-formed sequence
 * replaced by U+FFFD, so it can go into JSON; NULL when out of memory. */
char *utf8_sanitize(const char *s, size_t n);

#endif /* TESSERA_SERVER_UTF8_H */
