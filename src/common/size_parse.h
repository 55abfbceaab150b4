/* size_parse.h: byte sizes with K/M/G/T suffixes, as command-line options give them
 * (--kv-mem 2G). */
#ifndef TESSERA_COMMON_SIZE_PARSE_H
#define TESSERA_COMMON_SIZE_PARSE_H

#include <stddef.h>

#include "tessera/status.h"

/* Parses "512M", "2G", "1.5G", "4096K", "1T", "100" (bytes); suffixes K/M/G/T are powers
 * of 1024, case-insensitive, optionally followed by "B" or "iB". A fraction must come to a
 * whole number of bytes. s is borrowed; *out is 0 on any error (TS_ERR_INVALID_ARG). */
ts_status size_parse(size_t *out, const char *s, ts_error *err);

#endif /* TESSERA_COMMON_SIZE_PARSE_H */
