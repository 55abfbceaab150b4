/* listen.c: the server's listening socket, bound before the models load
 * (ts_server_listen) and handed to libmicrohttpd by ts_server_start. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server_internal.h"

enum { LISTEN_BACKLOG = 128 };

/* The port fd is bound to (the kernel's choice for port 0). */
static int bound_port(int fd)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return 0;
    if (sa.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    return ntohs(((struct sockaddr_in *)&sa)->sin_port);
}

ts_status ts_server_listen(ts_server *srv, ts_error *err)
{
    if (srv->daemon || srv->listen_fd >= 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the server is already listening");
    char port[16];
    snprintf(port, sizeof port, "%d", srv->opts.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(srv->host, port, &hints, &ai);
    if (rc != 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "cannot resolve host '%s': %s", srv->host,
                            gai_strerror(rc));
    int fd = -1, saved = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
            continue;
        }
        srv->listen_family = a->ai_family;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return ts_error_set(err, TS_ERR_IO, "cannot listen on %s port %d: %s", srv->host,
                            srv->opts.port, strerror(saved));
    srv->listen_fd = fd;
    srv->port = bound_port(fd);
    return TS_OK;
}
