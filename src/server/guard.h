/* guard.h: the connection guard against slow clients: a deadline for reading each
 * request, a per-client-address cap, and room kept for new connections while dribbling
 * ones hold the table. Below http.c; calls nothing else of the server. */
#ifndef TESSERA_SERVER_GUARD_H
#define TESSERA_SERVER_GUARD_H

#include <stdbool.h>
#include <sys/socket.h>

#include "tessera/status.h"

typedef struct guard guard;
typedef struct guard_conn guard_conn;

/* A connection is "reading" from its opening (or the end of its previous answer) until
 * its request, headers and body, is in. A reading connection past read_timeout_ms is shut
 * down (its socket, so MHD's thread closes it). At most max_reading connections read at
 * once and at most per_address of them come from one address: a new connection past
 * either bound shuts the oldest reader down (of that address for the second). */
ts_status guard_create(guard **out, int max_reading, int per_address, int read_timeout_ms,
                       ts_error *err);
void guard_destroy(guard *g); /* accepts NULL; joins the sweeper thread */

/* A new connection on socket fd from addr (copied). Returns NULL out of memory. When
 * its address already holds per_address connections that are not reading, the
 * connection is over the cap: guard_over_cap says so (answered 503 except /health). */
guard_conn *guard_open(guard *g, int fd, const struct sockaddr *addr);
void guard_close(guard *g, guard_conn *c); /* accepts NULL; before the socket closes */

/* The request on c is in (no more reading); its answer is going out. */
void guard_request_in(guard *g, guard_conn *c);
/* A whole (not streamed) answer is queued on c: the client must read it within the
 * read deadline, counted from now, else the connection is shut and the answer freed. */
void guard_answer_queued(guard *g, guard_conn *c);
/* The answer on c went out: the connection reads its next request from now. */
void guard_request_done(guard *g, guard_conn *c);
bool guard_over_cap(guard *g, const guard_conn *c);

#endif /* TESSERA_SERVER_GUARD_H */
