/* job.h: one completion request's state (srv_job) and job.c's helpers, shared by
 * complete.c (submitting, whole answers) and stream.c (Server-Sent-Event streams). */
#ifndef TESSERA_SERVER_JOB_H
#define TESSERA_SERVER_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/budget.h"
#include "server/server_internal.h"
#include "server/toolcall.h"

/* A tool call of a choice's answer, with its id. */
typedef struct job_call {
    char id[40];        /* "call_" and 24 letters or digits; 9 of them for the mistral
                         * family, whose templates refuse other ids */
    toolcall_call call; /* owned */
} job_call;

typedef struct choice_acc {
    char *text;               /* (len) non-streamed text */
    size_t len, cap;
    oai_token_logprob *lps;   /* (n_lps) when logprobs were asked for */
    size_t n_lps, cap_lps;
    const char *finish;       /* static; NULL until DONE */
    int stop_index;           /* DONE: the index in oreq.stop of the stop string that
                               * ended it, -1 when none did */
    size_t text_off;          /* streamed bytes so far (a whole answer has len) */
    double t_last;            /* time of the previous token (inter-token latency) */
    toolcall_parser tc;       /* the answer's tool calls, when job_tools_on */
    toolcall_out tco;         /* content the parser released, not yet used */
    job_call *calls;          /* (n_calls) the answer's tool calls so far */
    size_t n_calls, cap_calls;
} choice_acc;

/* A prompt token's score for vLLM's prompt_logprobs (a PROMPT event's). */
typedef struct plp_entry {
    int32_t token;
    float logprob;
    int rank;
    int n_top;
    ts_logprob top[TS_MAX_TOP_LOGPROBS]; /* (n_top) */
} plp_entry;

struct srv_job {
    ts_server *srv;
    srv_model *model;
    const char *request_id;   /* the connection's; borrowed (it outlives the job) */
    const ts_tokenizer *tok;
    ts_request *req;
    srv_cell *cell;
    int client_fd;
    double t_start;
    oai_request oreq;
    char id[48];
    oai_meta meta;
    choice_acc acc[OAI_MAX_N];
    int prompt_tokens, cached_tokens, completion_tokens;
    atomic_bool first_token_seen; /* read by ts_server_stop to order its cancellations */
    bool failed;
    ts_status fail_status;
    char fail_msg[256];
    atomic_bool cancelled_for_shutdown; /* set by this thread or complete_cancel_all */
    srv_job *next, **prev;    /* in srv->jobs while it has a request */
    int tokens_seen;          /* TOKEN events read: usage when no DONE comes */
    double t_first, t_last;   /* monotonic seconds of the first and latest token; 0 before */
    size_t held;              /* bytes reserved in srv->answer_bytes (a whole answer) */
    budget_verdict over;      /* a whole answer past max_answer or the total */
    char *out;                /* stream bytes not yet handed to MHD: [out_off, out_len) */
    size_t out_len, out_off, out_cap;
    bool out_failed;
    bool stream_ended;
    api_kind api;             /* the shape of the request and its answer */
    api_stream api_out;       /* a streamed Responses or Messages answer's state */
    char *prompt_text;        /* (prompt_text_len) owned, llama.cpp's /completion only:
                               * the prompt as given, or its ids decoded */
    size_t prompt_text_len;
    /* echo (echo.c): the prompt's text and tokens before the completion's */
    char *echo_text;          /* (echo_len) owned: the prompt as given, or its ids decoded */
    size_t echo_len;
    int32_t echo_first;       /* the prompt's first token, which has no logprob */
    size_t echo_drop;         /* bytes the decoded prompt has fewer than its tokens' (the
                               * space SentencePiece drops before the first word) */
    oai_token_logprob *plps;  /* (n_plps) the prompt's other tokens (PROMPT events) */
    size_t n_plps, cap_plps;
    char *echo_out;           /* owned: the answer's text, prompt then completion */
    oai_token_logprob *echo_lps; /* owned: the answer's logprobs, prompt then completion */
    plp_entry *vlps;          /* (n_vlps) owned: prompt_logprobs' scores, from the second
                               * prompt token on */
    size_t n_vlps, cap_vlps;
};

/* ---- prompt_logprobs.c */

/* A PROMPT event into j->vlps; false when out of memory. */
bool plp_collect(srv_job *j, const ts_event *ev);
/* The whole answer json (malloc'd, taken) with "prompt_logprobs" added (in the choice of
 * a completion, at the top of a chat); NULL when out of memory. */
char *plp_attach(const srv_job *j, char *json);

/* ---- echo.c */

/* Keeps what echo needs of the prompt ids (n >= 1, borrowed): its text and first token.
 * False when out of memory. */
bool echo_start(srv_job *j, const int32_t *ids, size_t n);
/* A PROMPT event into j->plps; false when out of memory. */
bool echo_collect(srv_job *j, const ts_event *ev);
/* The prompt's first token as a logprobs entry: its bytes, offset 0, logprob null. */
void echo_first(const srv_job *j, oai_token_logprob *lp);
/* j->plps[k] with its offset within the echoed text. */
oai_token_logprob echo_prompt_logprob(const srv_job *j, size_t k);
/* Choice c (built from a, the one completion) with the prompt before it: text, and with
 * logprobs the prompt's tokens first (the first one null). False when out of memory. */
bool echo_choice(srv_job *j, const choice_acc *a, oai_choice *c);
/* Frees what echo holds. */
void echo_free(srv_job *j);

/* ---- job.c */

/* Grows *p (*cap elements of elem bytes) to hold need elements; false (unchanged) when
 * out of memory. */
bool job_grow(void **p, size_t *cap, size_t need, size_t elem);

/* 1: an event is in *ev; 0: no more events; -1: the client left (or shutdown gave up).
 * The request is cancelled when the client leaves or the server shuts down. */
int job_wait(srv_job *j, ts_event *ev);

/* The token's log-probabilities; its text starts at text_off, the bytes emitted before. */
void job_fill_logprob(const srv_job *j, const ts_event *ev, size_t text_off,
                      oai_token_logprob *lp);

/* A token of choice a came now: observes time to first token or inter-token latency. */
void job_note_token_time(srv_job *j, choice_acc *a);

/* The job's usage so far, with its timings once a token came. */
oai_usage job_usage(const srv_job *j);

/* A DONE event: the choice's finish reason ("tool_calls" when its answer called tools,
 * unless cancelled), the stop string that ended it and the usage. */
void job_record_done(srv_job *j, const ts_event *ev);

/* The stop string that ended choice a (borrowed from j->oreq), or NULL. */
const char *job_stop_sequence(const srv_job *j, const choice_acc *a);

/* An ERROR event: the job fails with its status and message, logged. */
void job_record_error(srv_job *j, const ts_event *ev);

/* ---- job_tools.c */

/* Whether the request's answers go through a tool-call parser: it has tools and a
 * tool_choice other than none. */
bool job_tools_on(const srv_job *j);

/* Starts each choice's parser: the model family's syntax for auto, the bare JSON call(s)
 * of a forced tool_choice. */
void job_tools_start(srv_job *j);

/* A TOKEN or DONE event of choice ev->index through its parser (the family's marker fed
 * after the text when the event's token is that marker as a control token; the parser
 * finished at DONE). The content it releases is appended to a->tco.content; the calls
 * are appended to a->calls with fresh ids. Returns the index in a->calls of the first
 * new call (a->n_calls when none), or -1 when out of memory. */
long job_tools_event(srv_job *j, const ts_event *ev);

/* Choice a's call k, and all its calls (out: a->n_calls entries), as the JSON builders
 * take them; borrowed from a. */
void job_tools_view_one(const choice_acc *a, size_t k, oai_tool_call *out);
void job_tools_view(const choice_acc *a, oai_tool_call *out);

/* Frees what choice a holds for tools. */
void job_tools_free(choice_acc *a);

/* ---- stream.c */

/* Queues a 200 text/event-stream answer fed by the job's events as MHD reads it (a
 * chat's first chunk per choice buffered at once); MHD_NO when no response was queued. */
enum MHD_Result stream_start(struct MHD_Connection *mc, srv_conn *c, srv_job *j);

#endif /* TESSERA_SERVER_JOB_H */
