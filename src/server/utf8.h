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

/* Copies the NUL-terminated s into out (cap >= 1 bytes, always terminated), control
 * bytes (< 0x20, 0x7f), backslashes and ill-formed UTF-8 written as \xNN, for a log line
 * or a message: what comes out is one line of valid UTF-8, cut only between characters. */
void utf8_escape_controls(char *out, size_t cap, const char *s);

/* Decodes %XX escapes of s in place (MHD's unescape callback); %00 stays as it is, so
 * that a NUL never cuts a path or an argument short. Returns the new length. */
size_t utf8_unescape_url(char *s);

#endif /* TESSERA_SERVER_UTF8_H */
