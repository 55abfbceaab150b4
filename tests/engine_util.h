/* engine_util.h: helpers for tests that drive the engine: loading stories260K, greedy
 * reference texts, submitting prompts and collecting their events. */
#ifndef TESSERA_TESTS_ENGINE_UTIL_H
#define TESSERA_TESTS_ENGINE_UTIL_H

#include <stdbool.h>

#include "tessera/engine.h"

/* stories260K from the GGUF file; fails the test run when it cannot be loaded. */
ts_model *eu_load_stories(void);

/* cmocka group fixtures for files whose tests share one stories260K, in eu_model. */
extern ts_model *eu_model;
int eu_setup_stories(void **state);
int eu_teardown_stories(void **state);

/* ids of prompt with BOS (malloc'd); *n gets the count. */
int32_t *eu_tokenize(const ts_model *m, const char *prompt, int *n);

/* The greedy continuation of tokens by the reference forward pass, decoded as the engine
 * emits it (malloc'd, NUL-terminated); stops after n_new tokens or at end of generation. */
char *eu_reference_greedy(const ts_model *m, const int32_t *tokens, int n_tokens, int n_new);

/* Everything one request produced. */
typedef struct eu_result {
    char *text[TS_MAX_N];              /* concatenated TOKEN + DONE text per completion */
    int tokens[TS_MAX_N];              /* TOKEN events per completion */
    ts_finish_reason finish[TS_MAX_N];
    int stop_index[TS_MAX_N];          /* the DONE event's: the stop string that ended it */
    int n_done;                        /* DONE events */
    bool error;                        /* an ERROR event came */
    ts_status error_status;
    char error_message[256];          /* the ERROR event's message */
    double done_time;                  /* when the last event was read */
    double first_token_time;
    bool utf8_valid;                   /* every event's text was valid UTF-8 */
} eu_result;

/* Reads every event of req (blocking) into r; releases nothing. */
void eu_collect(ts_request *req, eu_result *r);
void eu_result_free(eu_result *r);

/* A greedy request of tokens (borrowed) for max_tokens; everything else default. */
ts_request_params eu_greedy(const int32_t *tokens, int n, int max_tokens);
/* eu_greedy at temperature with a fixed seed. */
ts_request_params eu_seeded(const int32_t *tokens, int n, int max_tokens, float temperature,
                            uint64_t seed);

/* An engine on m with options o (NULL: the defaults); fails the test run when it cannot
 * start. */
ts_engine *eu_start(const ts_model *m, const ts_engine_options *o);

/* Submits p (borrowed for the call) and returns the request; fails the test when refused. */
ts_request *eu_submit_params(ts_engine *e, const ts_request_params *p);
/* Submits a greedy request of prompt tokens (priority, max_tokens) and returns it. */
ts_request *eu_submit(ts_engine *e, const int32_t *tokens, int n, int max_tokens,
                      ts_priority prio);

/* Waits (bounded) until the engine reports no running and no queued sequence. */
void eu_wait_idle(ts_engine *e);

/* The options of an engine for speculation tests: speculation spec (draft: the drafting
 * model of TS_SPEC_DRAFT, borrowed; NULL otherwise), max_seqs sequences, kv_blocks KV
 * blocks (0: the default), the kernel GEMM (the same bits at every row count), drafts
 * filling up to 64 rows and drafting eagerly (whatever this machine's step times say). */
void eu_spec_options(ts_engine_options *o, ts_spec_kind spec, const ts_model *draft,
                     int max_seqs, int kv_blocks);
/* An engine on m with those options. */
ts_engine *eu_start_spec(const ts_model *m, ts_spec_kind spec, const ts_model *draft,
                         int max_seqs, int kv_blocks);

/* Runs p (borrowed) on e to its end and returns its events (the caller frees them with
 * eu_result_free); fails the test on an ERROR event. */
eu_result eu_run(ts_engine *e, const ts_request_params *p);

/* Fails the test unless the first n completions of a and b have the same text, token
 * count and finish reason. */
void eu_assert_same(const eu_result *a, const eu_result *b, int n);

/* e's statistics once it is idle. */
ts_engine_stats eu_stats(ts_engine *e);

/* Submits an embedding request of prompt ids (n of them, borrowed for the call) and
 * returns it; fails the test when refused. */
ts_request *eu_submit_embed(ts_engine *e, const int32_t *ids, int n);

/* Reads req's events, then releases it: fails the test unless they are exactly one DONE
 * with a vector of dim floats, which it copies into out (dim). */
void eu_read_vector(ts_request *req, float *out, int dim);

#endif
