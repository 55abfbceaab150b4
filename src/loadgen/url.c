/* url.c: the load generator's base URL: parsing, the loopback check, route URLs. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "loadgen/loadgen.h"

ts_status loadgen_url_parse(loadgen_url *out, const char *url, ts_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = strstr(url, "://");
    if (!p)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': no scheme (http://HOST:PORT)", url);
    size_t slen = (size_t)(p - url);
    if (slen == 4 && !strncasecmp(url, "http", 4))
        strcpy(out->scheme, "http");
    else if (slen == 5 && !strncasecmp(url, "https", 5))
        strcpy(out->scheme, "https");
    else
        return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': scheme must be http or https", url);
    p += 3;
    size_t auth_len = strcspn(p, "/?#");
    if (memchr(p, '@', auth_len))
        return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': user info ('@') is not accepted", url);
    if (strpbrk(p, "?#"))
        return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': no query or fragment, please", url);

    /* host: [v6] or a name up to ':' */
    const char *host = p, *host_end, *after;
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', auth_len - 1);
        if (!host_end)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': unclosed '['", url);
        after = host_end + 1;
    } else {
        host_end = p;
        while (host_end < p + auth_len && *host_end != ':')
            host_end++;
        after = host_end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': empty host", url);
    if (hlen >= sizeof out->host)
        return ts_error_set(err, TS_ERR_TOO_LONG, "url '%s': host longer than %zu bytes", url,
                            sizeof out->host - 1);
    memcpy(out->host, host, hlen);

    out->port = strcmp(out->scheme, "https") ? 80 : 443;
    const char *auth_end = p + auth_len;
    if (after < auth_end) {
        if (*after != ':' || after + 1 == auth_end)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': bad port", url);
        long port = 0;
        for (const char *c = after + 1; c < auth_end; c++) {
            if (*c < '0' || *c > '9' || (port = port * 10 + (*c - '0')) > 65535)
                return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': port must be 1..65535", url);
        }
        if (port == 0)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': port must be 1..65535", url);
        out->port = (int)port;
    }

    size_t plen = strlen(auth_end);
    while (plen > 0 && auth_end[plen - 1] == '/')
        plen--;
    /* OpenAI clients take the base URL with /v1 (README says so); every route loadgen
     * sends starts with /v1 already, so such a base would give /v1/v1/... and 404s. */
    if (plen >= 3 && !strncmp(auth_end + plen - 3, "/v1", 3))
        plen -= 3;
    while (plen > 0 && auth_end[plen - 1] == '/')
        plen--;
    if (plen >= sizeof out->path)
        return ts_error_set(err, TS_ERR_TOO_LONG, "url '%s': path longer than %zu bytes", url,
                            sizeof out->path - 1);
    memcpy(out->path, auth_end, plen);
    for (size_t i = 0; i < plen; i++)
        if ((unsigned char)out->path[i] <= ' ' || out->path[i] == 0x7f)
            return ts_error_set(err, TS_ERR_INVALID_ARG, "url '%s': control or space in the path", url);
    return TS_OK;
}

bool loadgen_url_is_loopback(const loadgen_url *u)
{
    if (!strcasecmp(u->host, "localhost"))
        return true;
    struct in_addr a4;
    if (inet_pton(AF_INET, u->host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, u->host, &a6) == 1) {
        static const unsigned char lo[16] = {[15] = 1};
        static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
        if (!memcmp(a6.s6_addr, lo, 16))
            return true;
        return !memcmp(a6.s6_addr, mapped, 12) && a6.s6_addr[12] == 127;
    }
    return false;
}

ts_status loadgen_url_format(char *out, const loadgen_url *u, const char *route, size_t cap,
                             ts_error *err)
{
    bool v6 = strchr(u->host, ':') != NULL;
    int n = snprintf(out, cap, "%s://%s%s%s:%d%s%s", u->scheme, v6 ? "[" : "", u->host,
                     v6 ? "]" : "", u->port, u->path, route);
    if (n < 0 || (size_t)n >= cap)
        return ts_error_set(err, TS_ERR_TOO_LONG, "url of route %s longer than %zu bytes", route,
                            cap - 1);
    return TS_OK;
}
