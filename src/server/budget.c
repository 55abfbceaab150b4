/* budget.c: the byte budget of whole answers (budget.h). */
#include "server/budget.h"

budget_verdict budget_reserve(atomic_size_t *total, size_t *held, size_t n, size_t max_one,
                              size_t max_total)
{
    size_t all = atomic_fetch_add(total, n) + n;
    *held += n;
    budget_verdict v = max_one && *held > max_one         ? BUDGET_OVER_ONE
                       : max_total && all > max_total     ? BUDGET_OVER_TOTAL
                                                          : BUDGET_OK;
    if (v != BUDGET_OK)
        budget_release(total, held);
    return v;
}

void budget_release(atomic_size_t *total, size_t *held)
{
    atomic_fetch_sub(total, *held);
    *held = 0;
}

void budget_give_back(atomic_size_t *total, size_t *held, size_t n)
{
    n = n < *held ? n : *held;
    atomic_fetch_sub(total, n);
    *held -= n;
}

void budget_error(oai_error *e, budget_verdict v, size_t max_one, size_t max_total)
{
    if (v == BUDGET_OVER_ONE)
        oai_error_set(e, 400, "max_tokens", "response_too_large",
                      "the answer grew past the limit of %zu bytes and was cancelled; ask for "
                      "fewer tokens, completions or logprobs, or stream it", max_one);
    else
        oai_error_set(e, 503, NULL, "server_busy",
                      "answers waiting to be read hold over %zu bytes; the request was "
                      "cancelled; retry or stream it", max_total);
}

void budget_busy_error(oai_error *e, size_t max_total)
{
    oai_error_set(e, 503, NULL, "server_busy",
                  "the requests in progress hold over %zu bytes; retry shortly", max_total);
}
