/* budget.h: the server-wide byte budget: whole (not streamed) answers, built or waiting
 * to be read, with one answer's bound; and what every request holds besides, its body
 * and its route's work (/tokenize's tokens, /detokenize's text), counted against the
 * same total. Below http.c and the routes; calls nothing else. */
#ifndef TESSERA_SERVER_BUDGET_H
#define TESSERA_SERVER_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>

#include "server/openai.h"

typedef enum budget_verdict {
    BUDGET_OK,
    BUDGET_OVER_ONE,   /* this answer is past max_one: 400 response_too_large */
    BUDGET_OVER_TOTAL, /* the answers together are past max_total: 503 server_busy */
} budget_verdict;

/* Reserves n more bytes for an answer holding *held of total (0 bounds: unbounded). Past
 * a bound the answer's bytes are given back at once (*held = 0), so answers still
 * growing may use them, and the verdict says which bound. */
budget_verdict budget_reserve(atomic_size_t *total, size_t *held, size_t n, size_t max_one,
                              size_t max_total);

/* Gives back what an answer holds; *held = 0. */
void budget_release(atomic_size_t *total, size_t *held);

/* Gives back n (<= *held) of what a request holds: work it reserved and is done with. */
void budget_give_back(atomic_size_t *total, size_t *held, size_t n);

/* The error for a verdict past a bound (max_one or max_total, whichever it names). */
void budget_error(oai_error *e, budget_verdict v, size_t max_one, size_t max_total);

/* The error for a request refused because the total is spent (503 server_busy, which
 * is answered with Retry-After). */
void budget_busy_error(oai_error *e, size_t max_total);

#endif /* TESSERA_SERVER_BUDGET_H */
