/* origin.c: who may drive the server from a browser: the Host check against DNS
 * rebinding on a loopback bind, the Origin check against cross-site pages (--cors lets
 * named origins in), and the content types a JSON route accepts. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/origin.h"

/* True when list (comma-separated, may be NULL) holds item[0..n) (case-insensitive). */
static bool in_list(const char *list, const char *item, size_t n)
{
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        const char *q = p;
        size_t m = k;
        while (m && *q == ' ')
            q++, m--;
        while (m && q[m - 1] == ' ')
            m--;
        if ((m == 1 && *q == '*') || (m == n && !strncasecmp(q, item, n)))
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

bool origin_is_loopback_name(const char *host, size_t n)
{
    if (n == 9 && !strncasecmp(host, "localhost", 9))
        return true;
    if (n > 10 && !strncasecmp(host + n - 10, ".localhost", 10))
        return true;
    if (n == 5 && !memcmp(host, "[::1]", 5))
        return true;
    if (n == 3 && !memcmp(host, "::1", 3))
        return true;
    /* 127.0.0.0/8, dotted quad only. */
    unsigned a, b, c, d;
    char tail;
    char buf[32];
    if (n >= sizeof buf)
        return false;
    memcpy(buf, host, n);
    buf[n] = '\0';
    return sscanf(buf, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

/* The host part of a Host header value: no port, brackets kept for IPv6. */
static size_t host_part(const char *h)
{
    if (h[0] == '[') {
        const char *e = strchr(h, ']');
        return e ? (size_t)(e - h) + 1 : strlen(h);
    }
    return strcspn(h, ":");
}

bool origin_host_ok(const char *bind, const char *allowed, const char *host)
{
    if (!host)
        return true; /* HTTP/1.0; MHD refuses an HTTP/1.1 request without one */
    size_t n = host_part(host);
    if (in_list(allowed, host, n))
        return true;
    if (!origin_is_loopback_name(bind, strlen(bind)))
        return true; /* bound to a routable address: the operator chose the exposure */
    return origin_is_loopback_name(host, n);
}

origin_verdict origin_check(const char *cors, const char *host, const char *origin)
{
    if (!origin)
        return ORIGIN_NONE;
    /* Same origin: "http://" followed by exactly the Host the request was sent to. */
    if (host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host))
        return ORIGIN_SAME;
    if (strcmp(origin, "null") && in_list(cors, origin, strlen(origin)))
        return ORIGIN_CORS;
    return ORIGIN_REFUSED;
}

bool origin_content_type_ok(const char *ctype, bool has_origin)
{
    if (!ctype)
        return true;
    size_t n = strcspn(ctype, ";");
    while (n && (ctype[n - 1] == ' ' || ctype[n - 1] == '\t'))
        n--;
    if (n == 16 && !strncasecmp(ctype, "application/json", 16))
        return true;
    /* curl -d sends this; a browser form can too, but a browser always sends Origin. */
    return !has_origin && n == 33 && !strncasecmp(ctype, "application/x-www-form-urlencoded", 33);
}
