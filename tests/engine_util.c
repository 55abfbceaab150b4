/* engine_util.c: shared helpers of the engine tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/clock.h"
#include "engine/detok.h"
#include "engine_util.h"
#include "model/forward_ref.h"
#include "util.h"

ts_model *eu_load_stories(void)
{
    ts_model *m = NULL;
    ts_error err = {0};
    if (ts_model_load(tu_shared("models/stories260K/stories260K.gguf"), NULL, &m, &err) != TS_OK)
        fail_msg("cannot load stories260K: %s", err.msg);
    return m;
}

ts_model *eu_model;

int eu_setup_stories(void **state)
{
    (void)state;
    eu_model = eu_load_stories();
    return 0;
}

int eu_teardown_stories(void **state)
{
    (void)state;
    ts_model_free(eu_model);
    eu_model = NULL;
    return 0;
}

int32_t *eu_tokenize(const ts_model *m, const char *prompt, int *n)
{
    ts_tokenize_opts o = {.add_special = true};
    int32_t *ids = NULL;
    size_t need = 0;
    assert_int_equal(ts_tokenize_alloc(ts_model_get_tokenizer(m), prompt, strlen(prompt), &o,
                                       &ids, &need), TS_OK);
    *n = (int)need;
    return ids;
}

char *eu_reference_greedy(const ts_model *m, const int32_t *tokens, int n_tokens, int n_new)
{
    const ts_model_config *c = ts_model_get_config(m);
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    ref_forward rf;
    assert_int_equal(ref_forward_init(&rf, m, n_tokens + n_new, NULL), TS_OK);
    size_t cap = 64, len = 0;
    char *text = malloc(cap);
    text[0] = '\0';
    const float *logits = NULL;
    for (int p = 0; p < n_tokens; p++)
        logits = ref_forward_token(&rf, tokens[p], p);
    for (int i = 0; i < n_new; i++) {
        int best = 0;
        for (int v = 1; v < c->vocab_size; v++)
            if (logits[v] > logits[best])
                best = v;
        if (ts_token_is_eog(tok, best))
            break;
        size_t n = 0;
        const char *piece = ts_token_bytes(tok, best, &n);
        if (len + n + 1 > cap) {
            cap = 2 * (len + n + 1);
            text = realloc(text, cap);
        }
        memcpy(text + len, piece, n);
        len += n;
        text[len] = '\0';
        if (i + 1 < n_new)
            logits = ref_forward_token(&rf, best, n_tokens + i);
    }
    ref_forward_free(&rf);
    return text;
}

static void append(char **dst, const char *s, size_t n)
{
    size_t len = *dst ? strlen(*dst) : 0;
    *dst = realloc(*dst, len + n + 1);
    memcpy(*dst + len, s, n);
    (*dst)[len + n] = '\0';
}

void eu_collect(ts_request *req, eu_result *r)
{
    memset(r, 0, sizeof *r);
    r->utf8_valid = true;
    ts_event ev;
    ts_status st;
    while ((st = ts_request_next_event(req, &ev, 60000)) == TS_OK) {
        if (ev.index < 0 || ev.index >= TS_MAX_N)
            fail_msg("event index %d out of range", ev.index);
        if (ev.kind == TS_EVENT_ERROR) {
            r->error = true;
            r->error_status = ev.status;
            snprintf(r->error_message, sizeof r->error_message, "%s", ev.message);
        } else {
            if (!detok_utf8_valid(ev.text, ev.text_len))
                r->utf8_valid = false;
            append(&r->text[ev.index], ev.text, ev.text_len);
            if (ev.kind == TS_EVENT_TOKEN) {
                if (r->first_token_time == 0)
                    r->first_token_time = clock_now_s();
                r->tokens[ev.index]++;
            } else {
                r->finish[ev.index] = ev.finish;
                r->stop_index[ev.index] = ev.stop_index;
                r->n_done++;
            }
        }
        ts_event_clear(&ev);
    }
    if (st != TS_ERR_NOT_FOUND)
        fail_msg("waiting for events: %s", ts_status_str(st));
    r->done_time = clock_now_s();
}

void eu_result_free(eu_result *r)
{
    for (int i = 0; i < TS_MAX_N; i++)
        free(r->text[i]);
    memset(r, 0, sizeof *r);
}

ts_request_params eu_greedy(const int32_t *tokens, int n, int max_tokens)
{
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = tokens;
    p.n_prompt = (size_t)n;
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.0f;
    return p;
}

ts_request_params eu_seeded(const int32_t *tokens, int n, int max_tokens, float temperature,
                            uint64_t seed)
{
    ts_request_params p = eu_greedy(tokens, n, max_tokens);
    p.sampling.temperature = temperature;
    p.sampling.seed = seed;
    p.sampling.has_seed = true;
    return p;
}

ts_engine *eu_start(const ts_model *m, const ts_engine_options *o)
{
    ts_engine *e = NULL;
    ts_error err = {0};
    if (ts_engine_create(m, o, &e, &err) != TS_OK)
        fail_msg("engine: %s", err.msg);
    return e;
}

ts_request *eu_submit(ts_engine *e, const int32_t *tokens, int n, int max_tokens,
                      ts_priority prio)
{
    ts_request_params p = eu_greedy(tokens, n, max_tokens);
    p.priority = prio;
    return eu_submit_params(e, &p);
}

ts_request *eu_submit_params(ts_engine *e, const ts_request_params *p)
{
    ts_request *req = NULL;
    ts_error err = {0};
    if (ts_engine_submit(e, p, &req, &err) != TS_OK)
        fail_msg("submit: %s", err.msg);
    return req;
}

void eu_wait_idle(ts_engine *e)
{
    if (ts_engine_wait_idle(e, 10000) != TS_OK)
        fail_msg("engine still busy after 10 s");
}

void eu_spec_options(ts_engine_options *o, ts_spec_kind spec, const ts_model *draft,
                     int max_seqs, int kv_blocks)
{
    ts_engine_options_default(o);
    o->max_seqs = max_seqs;
    o->kv_blocks = kv_blocks;
    o->gemm = TS_GEMM_KERNEL;
    o->spec = spec;
    o->draft_model = draft;
    o->spec_rows = 64;
    o->spec_eager = true;
}

ts_engine *eu_start_spec(const ts_model *m, ts_spec_kind spec, const ts_model *draft,
                         int max_seqs, int kv_blocks)
{
    ts_engine_options o;
    eu_spec_options(&o, spec, draft, max_seqs, kv_blocks);
    return eu_start(m, &o);
}

eu_result eu_run(ts_engine *e, const ts_request_params *p)
{
    eu_result r;
    ts_request *req = eu_submit_params(e, p);
    eu_collect(req, &r);
    ts_request_release(req);
    assert_false(r.error);
    return r;
}

void eu_assert_same(const eu_result *a, const eu_result *b, int n)
{
    for (int i = 0; i < n; i++) {
        assert_string_equal(a->text[i], b->text[i]);
        assert_int_equal(a->tokens[i], b->tokens[i]);
        assert_int_equal(a->finish[i], b->finish[i]);
    }
}

ts_engine_stats eu_stats(ts_engine *e)
{
    eu_wait_idle(e);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    return st;
}

ts_request *eu_submit_embed(ts_engine *e, const int32_t *ids, int n)
{
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = ids;
    p.n_prompt = (size_t)n;
    p.embed = true;
    return eu_submit_params(e, &p);
}

void eu_read_vector(ts_request *req, float *out, int dim)
{
    ts_event ev = {0};
    int done = 0;
    while (ts_request_next_event(req, &ev, 10000) == TS_OK) {
        if (ev.kind == TS_EVENT_ERROR)
            fail_msg("embed request failed: %s", ev.message);
        assert_int_equal(ev.kind, TS_EVENT_DONE);
        assert_non_null(ev.embedding);
        assert_int_equal(ev.n_embedding, dim);
        memcpy(out, ev.embedding, (size_t)dim * sizeof(float));
        done++;
        ts_event_clear(&ev);
    }
    assert_int_equal(done, 1);
    ts_request_release(req);
}
