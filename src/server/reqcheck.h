/* reqcheck.h: the request-line and header checks nginx makes and libmicrohttpd 0.9.75
 * does not: one well-formed Host (required in HTTP/1.1), no NUL or control byte in the
 * request line, no NUL, CR or LF inside a header. Pure functions, below http.c. */
#ifndef TESSERA_SERVER_REQCHECK_H
#define TESSERA_SERVER_REQCHECK_H

#include <stdbool.h>
#include <stddef.h>

/* A Host value: a name or IPv4 address of letters, digits and - . _ ~ (1-255 bytes), or an
 * [IPv6] literal, then at most ":PORT" of 1-5 digits, then optional spaces or tabs.
 * "localhost:1:2", "a b", "" and a port of letters are not. */
bool reqcheck_host_ok(const char *value, size_t len);

/* A header line: a name of 1+ visible ASCII bytes (no ':' or space) and a value without
 * NUL, CR or LF (a bare CR, or a NUL hiding a suffix such as "Bearer KEY\0junk"). The
 * lengths are MHD's, so an embedded NUL shows as len > strlen. */
bool reqcheck_field_ok(const char *name, size_t name_len, const char *value,
                       size_t value_len);

/* Whether a header value reached the end of its line, from the pointers libmicrohttpd
 * 0.9.75 hands out: it splits the header block in place, turning each line's CR LF (or
 * LF) into NULs, so the byte after a whole value's terminator is a NUL or the first byte
 * of the next header's name (next_name; NULL for the last header, which the block's
 * empty line follows). A NUL inside the value ("Bearer KEY\0junk") leaves the rest of
 * the line there: false. Empty values are not judged. */
bool reqcheck_value_whole(const char *value, size_t len, const char *next_name);

/* The raw request target (before unescaping): no control byte (CR, ESC, DEL...). */
bool reqcheck_target_ok(const char *uri);

/* The request line, from the pointers libmicrohttpd 0.9.75 hands out: it parses the line
 * in place, so method, uri (the raw target, as the URI log callback sees it, uri_len its
 * strlen then, before MHD unescapes it in place) and version lie in one buffer, each
 * NUL-terminated where a space was. A NUL inside the method or target cuts its string
 * short of the next one: false. Pointers that do not lie in that order within max_line
 * bytes are not judged (true). */
bool reqcheck_line_ok(const char *method, const char *uri, size_t uri_len,
                      const char *version, size_t max_line);

#endif /* TESSERA_SERVER_REQCHECK_H */
