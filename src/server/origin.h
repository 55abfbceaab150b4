/* origin.h: Host, Origin and Content-Type checks against browser-driven attacks (DNS
 * rebinding, cross-site simple requests). Pure functions on header values. */
#ifndef TESSERA_SERVER_ORIGIN_H
#define TESSERA_SERVER_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

typedef enum origin_verdict {
    ORIGIN_NONE,    /* no Origin header: not a browser's cross-origin request */
    ORIGIN_SAME,    /* Origin is http:// + the request's Host (a page served by us) */
    ORIGIN_CORS,    /* allowed by --cors: answers carry Access-Control-Allow-Origin */
    ORIGIN_REFUSED, /* answered 403 */
} origin_verdict;

/* True when host[0..n) names the loopback: localhost, *.localhost, 127.0.0.0/8, ::1. */
bool origin_is_loopback_name(const char *host, size_t n);

/* Whether a request whose Host header is host (NULL: none) may be served by a server
 * bound to bind: always when bind is not loopback; else only for a loopback Host or one
 * in allowed (comma-separated names, "*" for any; may be NULL). A port is ignored. */
bool origin_host_ok(const char *bind, const char *allowed, const char *host);

/* The verdict on an Origin header (NULL: none) given the Host header and cors (comma-
 * separated origins such as "https://app.example", "*" for any; may be NULL). */
origin_verdict origin_check(const char *cors, const char *host, const char *origin);

/* Whether a JSON route takes a body of this Content-Type (NULL: none given):
 * application/json (parameters allowed); application/x-www-form-urlencoded (curl -d)
 * only from a request without Origin. */
bool origin_content_type_ok(const char *ctype, bool has_origin);

#endif /* TESSERA_SERVER_ORIGIN_H */
