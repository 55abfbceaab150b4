/* job.c: what whole answers (complete.c) and streams (stream.c) share about one
 * completion request: waiting for its events and recording them (job.h). Each HTTP
 * connection has its own thread, so waiting blocks in poll() on the request's wake-up
 * eventfd, the client socket (hang-up cancels the request) and the shutdown eventfd. */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "server/job.h"

static const char *finish_name(ts_finish_reason r)
{
    switch (r) {
    case TS_FINISH_STOP: return "stop";
    case TS_FINISH_LENGTH: return "length";
    case TS_FINISH_CANCELLED: return "cancelled";
    default: return "stop";
    }
}

bool job_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* ---- waiting for events */

/* 1: an event is in *ev; 0: no more events; -1: the client left (or shutdown gave up).
 * The request is cancelled when the client leaves or the server shuts down. */
int job_wait(srv_job *j, ts_event *ev)
{
    for (;;) {
        ts_status st = ts_request_next_event(j->req, ev, 0);
        if (st == TS_OK)
            return 1;
        if (st == TS_ERR_NOT_FOUND)
            return 0;
        struct pollfd p[3] = {
            {.fd = j->cell->efd, .events = POLLIN},
            {.fd = j->client_fd, .events = 0}, /* POLLHUP/POLLERR only: no half-close */
            {.fd = j->srv->stop_efd, .events = POLLIN},
        };
        int nfds = j->client_fd >= 0 ? 2 : 1;
        bool for_shutdown = atomic_load(&j->cancelled_for_shutdown);
        if (!for_shutdown)
            p[nfds++] = p[2];
        int rc = poll(p, (nfds_t)nfds, for_shutdown ? SRV_SHUTDOWN_WAIT_MS : -1);
        if (rc == 0)
            return -1; /* the engine did not wind the request down in time */
        if (rc < 0)
            continue; /* EINTR */
        if (p[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(j->cell->efd, &v, sizeof v);
            (void)r;
        }
        if (j->client_fd >= 0 && (p[1].revents & (POLLHUP | POLLERR))) {
            ts_request_cancel(j->req);
            return -1;
        }
        int last = nfds - 1;
        if (!for_shutdown && p[last].fd == j->srv->stop_efd &&
            (p[last].revents & POLLIN)) {
            atomic_store(&j->cancelled_for_shutdown, true);
            ts_request_cancel(j->req);
        }
    }
}

/* ---- recording events */

/* The token's log-probabilities; its text starts at text_off, the bytes emitted before. */
void job_fill_logprob(const srv_job *j, const ts_event *ev, size_t text_off,
                      oai_token_logprob *lp)
{
    memset(lp, 0, sizeof *lp);
    lp->bytes = ts_token_bytes(j->tok, ev->token, &lp->len);
    lp->text_offset = text_off;
    lp->logprob = ev->logprob;
    lp->n_top = ev->n_top < OAI_MAX_TOP_LOGPROBS ? ev->n_top : OAI_MAX_TOP_LOGPROBS;
    for (int k = 0; k < lp->n_top; k++) {
        lp->top[k].bytes = ts_token_bytes(j->tok, ev->top[k].token, &lp->top[k].len);
        lp->top[k].logprob = ev->top[k].logprob;
    }
    if (!lp->bytes) {
        lp->bytes = "";
        lp->len = 0;
    }
    for (int k = 0; k < lp->n_top; k++)
        if (!lp->top[k].bytes) {
            lp->top[k].bytes = "";
            lp->top[k].len = 0;
        }
}

void job_note_token_time(srv_job *j, choice_acc *a)
{
    double now = clock_now_s();
    if (!atomic_load(&j->first_token_seen)) {
        atomic_store(&j->first_token_seen, true);
        metrics_observe(j->srv->metrics, METRICS_HIST_TTFT, now - j->t_start);
    } else if (a->t_last > 0) {
        metrics_observe(j->srv->metrics, METRICS_HIST_ITL, now - a->t_last);
    }
    a->t_last = now;
    if (j->t_first == 0)
        j->t_first = now;
    j->t_last = now;
}

oai_usage job_usage(const srv_job *j)
{
    oai_usage u = {j->prompt_tokens, j->completion_tokens, j->cached_tokens,
                   .timed = j->t_first > 0};
    if (u.timed) {
        u.ttft_ms = (j->t_first - j->t_start) * 1e3;
        u.generation_ms = (j->t_last - j->t_first) * 1e3;
    }
    return u;
}

void job_record_done(srv_job *j, const ts_event *ev)
{
    choice_acc *a = &j->acc[ev->index];
    a->finish = a->n_calls && ev->finish != TS_FINISH_CANCELLED ? "tool_calls"
                                                                : finish_name(ev->finish);
    a->stop_index = ev->stop_index;
    j->prompt_tokens = ev->prompt_tokens;
    j->cached_tokens = ev->cached_tokens;
    j->completion_tokens += ev->completion_tokens;
}

const char *job_stop_sequence(const srv_job *j, const choice_acc *a)
{
    bool matched = a->finish && a->stop_index >= 0 && a->stop_index < j->oreq.n_stop;
    return matched ? j->oreq.stop[a->stop_index] : NULL;
}

void job_record_error(srv_job *j, const ts_event *ev)
{
    j->failed = true;
    j->fail_status = ev->status;
    snprintf(j->fail_msg, sizeof j->fail_msg, "%s", ev->message);
    char line[400];
    snprintf(line, sizeof line, "%s: request failed (%s): %s", j->id, ts_status_str(ev->status),
             ev->message);
    srv_log(&j->srv->opts, &(srv_log_entry){.request_id = j->request_id,
                                            .model = j->model->name, .message = line});
}
