/* guard.c: the connection guard (guard.h): read deadlines enforced by a sweeper thread,
 * and the reading / per-address bounds enforced when a connection opens. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "server/guard.h"

struct guard_conn {
    int fd;
    struct sockaddr_storage addr;
    bool reading;
    bool sending;     /* a whole answer is queued: it must be read by the deadline too */
    bool evicted;     /* shut down by the guard; waits for MHD's close */
    bool over_cap;
    double since;     /* monotonic seconds: when reading began */
    guard_conn *next, *prev;
};

struct guard {
    int max_reading, per_address;
    double timeout_s;
    pthread_mutex_t mu; /* guards the list and every guard_conn's fields */
    pthread_cond_t wake;
    guard_conn *all;
    bool stop;
    pthread_t sweeper;
    bool sweeper_started;
};

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return true;
}

/* Shuts c's socket: MHD's thread sees the end of input and closes the connection. The fd
 * is still MHD's: guard_close runs before MHD closes it, under the same mutex. */
static void evict(guard_conn *c)
{
    c->evicted = true;
    shutdown(c->fd, SHUT_RDWR);
}

/* The oldest reading connection other than except (of addr's address when addr). */
static guard_conn *oldest_reader(guard *g, const guard_conn *except,
                                 const struct sockaddr_storage *addr)
{
    guard_conn *best = NULL;
    for (guard_conn *c = g->all; c; c = c->next)
        if (c != except && c->reading && !c->evicted && (!addr || same_address(&c->addr, addr)) &&
            (!best || c->since < best->since))
            best = c;
    return best;
}

static void count(guard *g, const struct sockaddr_storage *addr, int *reading, int *same,
                  int *same_reading)
{
    *reading = *same = *same_reading = 0;
    for (guard_conn *c = g->all; c; c = c->next) {
        if (c->evicted)
            continue;
        bool s = same_address(&c->addr, addr);
        *reading += c->reading;
        *same += s;
        *same_reading += s && c->reading;
    }
}

static void *sweep(void *arg)
{
    guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = clock_now_s(), next = now + 3600;
        for (guard_conn *c = g->all; c; c = c->next) {
            if (!(c->reading || c->sending) || c->evicted)
                continue;
            double due = c->since + g->timeout_s;
            if (due <= now)
                evict(c);
            else if (due < next)
                next = due;
        }
        int ms = (int)((next - now) * 1e3) + 1;
        struct timespec until = clock_deadline(ms);
        pthread_cond_timedwait(&g->wake, &g->mu, &until);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

ts_status guard_create(guard **out, int max_reading, int per_address, int read_timeout_ms,
                       ts_error *err)
{
    *out = NULL;
    guard *g = calloc(1, sizeof *g);
    if (!g)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate the connection guard");
    g->max_reading = max_reading;
    g->per_address = per_address;
    g->timeout_s = read_timeout_ms / 1e3;
    pthread_mutex_init(&g->mu, NULL);
    clock_cond_init(&g->wake);
    if (read_timeout_ms > 0) {
        if (pthread_create(&g->sweeper, NULL, sweep, g) != 0) {
            guard_destroy(g);
            return ts_error_set(err, TS_ERR_IO, "cannot start the connection guard's thread");
        }
        g->sweeper_started = true;
    }
    *out = g;
    return TS_OK;
}

void guard_destroy(guard *g)
{
    if (!g)
        return;
    if (g->sweeper_started) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_cond_signal(&g->wake);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->sweeper, NULL);
    }
    for (guard_conn *c = g->all, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

guard_conn *guard_open(guard *g, int fd, const struct sockaddr *addr)
{
    guard_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    if (addr) {
        size_t n = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in);
        memcpy(&c->addr, addr, n);
    }
    c->reading = true;
    c->since = clock_now_s();
    pthread_mutex_lock(&g->mu);
    c->next = g->all;
    if (g->all)
        g->all->prev = c;
    g->all = c;
    int reading, same, same_reading;
    count(g, &c->addr, &reading, &same, &same_reading);
    guard_conn *old;
    if (g->per_address > 0 && same_reading > g->per_address &&
        (old = oldest_reader(g, c, &c->addr)) != NULL) {
        evict(old);
        count(g, &c->addr, &reading, &same, &same_reading);
    }
    if (g->max_reading > 0 && reading > g->max_reading && (old = oldest_reader(g, c, NULL)))
        evict(old);
    count(g, &c->addr, &reading, &same, &same_reading);
    c->over_cap = g->per_address > 0 && same > g->per_address;
    pthread_cond_signal(&g->wake); /* the sweeper may sleep past c's deadline */
    pthread_mutex_unlock(&g->mu);
    return c;
}

void guard_close(guard *g, guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->all = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void guard_request_in(guard *g, guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    c->reading = false;
    pthread_mutex_unlock(&g->mu);
}

void guard_request_done(guard *g, guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    c->reading = true;
    c->sending = false;
    c->since = clock_now_s();
    c->over_cap = false; /* judged once, at the opening */
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
}

void guard_answer_queued(guard *g, guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    c->reading = false;
    c->sending = true;
    c->since = clock_now_s();
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
}

bool guard_over_cap(guard *g, const guard_conn *c)
{
    if (!c)
        return false;
    pthread_mutex_lock(&g->mu);
    bool over = c->over_cap;
    pthread_mutex_unlock(&g->mu);
    return over;
}
