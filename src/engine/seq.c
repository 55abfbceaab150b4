/* seq.c: a sequence's life, below the scheduler and the emitter: creation, the waiting
 * queue, its text (detokenizer and stop strings), its end (finish or fail) and the
 * end-of-step sweep that frees what ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/seq.h"
#include "engine/spec_draft.h"

bool engine_alloc_ok(ts_engine *e)
{
    if (e->step.allocs_left <= 0)
        return true;
    return --e->step.allocs_left != 0;
}

bool engine_seq_scores(const seq *s)
{
    const ts_request *r = s->job->req;
    return r->prompt_logprobs && s->index == 0 && s->n_scored < r->n_prompt - 1;
}

int engine_seq_find(seq *const *arr, int n, const seq *s)
{
    for (int i = 0; i < n; i++)
        if (arr[i] == s)
            return i;
    return -1;
}

void engine_seq_remove_at(seq **arr, int *n, int i)
{
    memmove(arr + i, arr + i + 1, (size_t)(*n - i - 1) * sizeof *arr);
    (*n)--;
}

/* ---- the end-of-step sweep */

static ts_status push_dead(void ***arr, int *n, int *cap, void *item)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 32;
        void **grown = realloc(*arr, (size_t)c * sizeof *grown);
        if (!grown)
            return TS_ERR_NOMEM;
        *arr = grown;
        *cap = c;
    }
    (*arr)[(*n)++] = item;
    return TS_OK;
}

static void seq_free(ts_engine *e, seq *s)
{
    kv_table_free(e->step.pool, &s->table);
    spec_draft_forget(e, s);
    free(s->tokens);
    free(s->mask_bits);
    free(s->dry_bits);
    free(s->pooled);
    ts_schema_release(s->schema);
    ts_grammar_release(s->grammar);
    free(s);
}

/* Marks s done and hands it to the end-of-step sweep (freed at once if that fails). */
static void bury_seq(ts_engine *e, seq *s)
{
    s->done = true;
    kv_table_release(e->step.pool, &s->table);
    if (push_dead((void ***)&e->step.dead, &e->step.n_dead, &e->step.cap_dead, s) != TS_OK)
        seq_free(e, s); /* nothing holds it past this point in the step loops but `done` */
}

static void bury_job(ts_engine *e, job *j)
{
    request_close(j->req);
    request_unref(j->req);
    j->req = NULL;
    if (push_dead((void ***)&e->step.dead_jobs, &e->step.n_dead_jobs, &e->step.cap_dead_jobs,
                  j) != TS_OK)
        free(j);
}

void engine_free_dead(ts_engine *e)
{
    for (int i = 0; i < e->step.n_dead; i++)
        seq_free(e, e->step.dead[i]);
    e->step.n_dead = 0;
    for (int i = 0; i < e->step.n_dead_jobs; i++)
        free(e->step.dead_jobs[i]);
    e->step.n_dead_jobs = 0;
}

/* ---- creation and the waiting queue */

ts_status engine_waiting_add(ts_engine *e, seq *s)
{
    if (!engine_alloc_ok(e)) /* fault injection: any insertion may be the one that grows */
        return TS_ERR_NOMEM;
    if (e->step.n_waiting == e->step.cap_waiting) {
        int cap = e->step.cap_waiting ? 2 * e->step.cap_waiting : 64;
        seq **grown = realloc(e->step.waiting, (size_t)cap * sizeof *grown);
        if (!grown)
            return TS_ERR_NOMEM;
        e->step.waiting = grown;
        e->step.cap_waiting = cap;
    }
    e->step.waiting[e->step.n_waiting++] = s;
    return TS_OK;
}

/* The seed of completion index > 0 of a request seeded with seed: splitmix64's finalizer
 * over both, so nearby seeds and indices give unrelated streams. */
static uint64_t completion_seed(uint64_t seed, int index)
{
    uint64_t z = seed ^ ((uint64_t)index * UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* DRY's breaker tokens for s (sp: its parameters): each token whose text contains one of
 * the breaker strings, as a bit set the sampler borrows. Nothing while DRY is off. */
static ts_status dry_breakers(const ts_engine *e, seq *s, const ts_sampling_params *sp,
                              ts_error *err)
{
    if (!(sp->dry_multiplier > 0.0f) || sp->dry_base < 1.0f || sp->dry_penalty_last_n == 0 ||
        sp->n_dry_breakers == 0)
        return TS_OK;
    const int vocab = e->model->cfg.vocab_size;
    s->dry_bits = calloc(((size_t)vocab + 7) / 8, 1);
    if (!s->dry_bits)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for DRY's breaker tokens");
    for (int32_t id = 0; id < vocab; id++) {
        size_t len = 0;
        const char *b = ts_token_bytes(e->model->tokenizer, id, &len);
        for (int i = 0; b && i < sp->n_dry_breakers; i++) {
            const char *w = sp->dry_breakers[i];
            size_t n = strlen(w);
            bool hit = false;
            for (size_t o = 0; !hit && o + n <= len; o++)
                hit = !memcmp(b + o, w, n);
            if (hit) {
                s->dry_bits[id >> 3] |= (uint8_t)(1u << (id & 7));
                break;
            }
        }
    }
    sampler_set_dry_breakers(&s->smp, s->dry_bits);
    return TS_OK;
}

ts_status engine_seq_create(ts_engine *e, job *j, int index, const int32_t *tokens,
                            int n_tokens, seq **out, ts_error *err)
{
    *out = NULL;
    const ts_request *r = j->req;
    seq *s = engine_alloc_ok(e) ? calloc(1, sizeof *s) : NULL;
    if (!s)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a sequence");
    s->job = j;
    s->index = index;
    s->cap = n_tokens + r->max_tokens;
    s->tokens = malloc((size_t)s->cap * sizeof(int32_t));
    kv_table_init(&s->table);
    s->table.ns = r->cache_ns;
    ts_status st;
    if (!s->tokens) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a sequence's tokens");
        goto fail;
    }
    memcpy(s->tokens, tokens, (size_t)n_tokens * sizeof(int32_t));
    s->n_tokens = n_tokens;

    /* Each completion draws from its own stream. With a seed: the first from the seed
     * itself (a request's first completion does not depend on n), the others from the seed
     * and their index mixed; seed + index made completion 1 of seed s completion 0 of seed
     * s + 1, so sweeping seeds with n > 1 repeated samples. */
    ts_sampling_params sp = r->sampling;
    if (sp.has_seed && index > 0)
        sp.seed = completion_seed(sp.seed, index);
    uint64_t fallback = (r->id + 1) * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)index ^
                        (uint64_t)(r->submit_time * 1e9);
    if ((st = sampler_init(&s->smp, &sp, e->model->cfg.vocab_size, fallback, err)) != TS_OK ||
        (st = stop_init(&s->stop, (const char *const *)r->stop, r->n_stop, err)) != TS_OK ||
        (st = dry_breakers(e, s, &sp, err)) != TS_OK)
        goto fail;
    detok_init(&s->detok, false);
    s->schema = ts_schema_retain(r->schema);
    s->grammar = ts_grammar_retain(r->grammar);
    constraint_init(&s->cons, r->constraint, s->schema, s->grammar);
    if (r->constraint != TS_CONSTRAINT_NONE &&
        !(s->mask_bits = calloc(((size_t)engine_mask_width(e) + 7) / 8, 1))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a sequence's token mask");
        goto fail;
    }
    if (r->embed && !(s->pooled = calloc((size_t)e->model->cfg.dim, sizeof(float)))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a sequence's embedding");
        goto fail;
    }
    if ((st = engine_waiting_add(e, s)) != TS_OK) {
        ts_error_set(err, st, "out of memory queueing a sequence");
        goto fail;
    }
    j->live++;
    *out = s;
    return TS_OK;

fail:
    seq_free(e, s);
    return st;
}

void engine_seq_publish(ts_engine *e, seq *s)
{
    while ((s->n_published + 1) * TS_KV_BLOCK <= s->n_computed) {
        if (e->opts.prefix_cache && !s->job->req->embed) /* kept out of the cache */
            kv_prefix_publish(e->step.pool, &s->table, s->n_published,
                              s->tokens + (size_t)s->n_published * TS_KV_BLOCK, NULL, NULL);
        s->n_published++;
    }
}

/* ---- text */

ts_status engine_seq_text(seq *s, const char *bytes, size_t len, char **out, size_t *n_out,
                          ts_error *err)
{
    size_t cap_utf8 = DETOK_MAX_OUT(len), n_utf8 = 0;
    char *utf8 = malloc(cap_utf8);
    *out = NULL;
    *n_out = 0;
    if (!utf8)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory detokenizing");
    ts_status st = bytes ? detok_push(&s->detok, utf8, cap_utf8, &n_utf8, bytes, len, err)
                         : detok_flush(&s->detok, utf8, cap_utf8, &n_utf8, err);
    size_t cap = STOP_MAX_OUT(n_utf8);
    char *text = st == TS_OK ? malloc(cap + 1) : NULL;
    if (st == TS_OK && !text)
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory detokenizing");
    if (st == TS_OK)
        st = stop_push(&s->stop, text, cap, n_out, utf8, n_utf8, err);
    if (st == TS_OK && !bytes && !s->stop.stopped) {
        size_t more = 0;
        st = stop_flush(&s->stop, text + *n_out, cap - *n_out, &more, err);
        *n_out += more;
    }
    free(utf8);
    if (st != TS_OK) {
        free(text);
        *n_out = 0;
        return st;
    }
    *out = text;
    return TS_OK;
}

/* ---- the end */

void engine_finish_seq(ts_engine *e, seq *s, ts_finish_reason why)
{
    job *j = s->job;
    ts_request *r = j->req;
    ts_event ev = {.kind = TS_EVENT_DONE, .finish = why, .prompt_tokens = r->n_prompt,
                   .cached_tokens = j->cached_tokens,
                   /* the matcher holds r->stop in order: submit refuses empty strings */
                   .stop_index = s->stop.stopped ? s->stop.which : -1};
    /* Text held back (an unfinished character, a possible stop string) is released at the
     * end unless a stop string matched or the client cancelled. */
    if (why != TS_FINISH_CANCELLED && !s->stop.stopped) {
        ts_error err = {0};
        if (engine_seq_text(s, NULL, 0, &ev.text, &ev.text_len, &err) != TS_OK)
            ev.text = NULL, ev.text_len = 0;
    }
    if (!ev.text) {
        ev.text = calloc(1, 1);
        ev.text_len = 0;
    }
    if (r->embed && why != TS_FINISH_CANCELLED) { /* the vector moves into the event */
        ev.embedding = s->pooled;
        ev.n_embedding = e->model->cfg.dim;
        s->pooled = NULL;
    }
    /* A request cancelled before its prompt forked still owes n completions their end. */
    int first = s->index, last = s->index;
    if (!j->forked && r->n > 1)
        last = r->n - 1;
    for (int i = first; i <= last; i++) {
        ts_event done = ev;
        done.index = i;
        done.completion_tokens = s->n_generated;
        if (i != last) {
            done.text = calloc(1, 1);
            done.text_len = 0;
        }
        request_push(r, &done);
    }
    if (why == TS_FINISH_CANCELLED)
        e->step.counters.requests_cancelled += (j->live == 1);
    else
        e->step.counters.requests_completed += (j->live == 1);
    bury_seq(e, s);
    if (--j->live == 0)
        bury_job(e, j);
}

static void remove_job_seqs(seq **arr, int *n, job *j, seq **found, int *n_found, int cap)
{
    int w = 0;
    for (int i = 0; i < *n; i++) {
        if (arr[i]->job == j) {
            if (*n_found < cap)
                found[(*n_found)++] = arr[i];
        } else {
            arr[w++] = arr[i];
        }
    }
    *n = w;
}

void engine_fail_request(ts_engine *e, job *j, ts_status st, const char *msg)
{
    seq *found[TS_MAX_N];
    int n_found = 0;
    remove_job_seqs(e->step.running, &e->step.n_running, j, found, &n_found, TS_MAX_N);
    remove_job_seqs(e->step.waiting, &e->step.n_waiting, j, found, &n_found, TS_MAX_N);
    ts_event ev = {.kind = TS_EVENT_ERROR, .status = st};
    snprintf(ev.message, sizeof ev.message, "%s", msg && *msg ? msg : ts_status_str(st));
    request_push(j->req, &ev);
    for (int i = 0; i < n_found; i++)
        bury_seq(e, found[i]);
    if (st == TS_ERR_CANCELLED)
        e->step.counters.requests_cancelled++;
    else
        e->step.counters.requests_failed++;
    j->live = 0;
    bury_job(e, j);
}
