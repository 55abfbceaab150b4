/* emit.c: the step's stages after the forward pass: sampling (rows in parallel),
 * appending and emitting tokens, and the fork of an n > 1 request into its completions. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/emit.h"
#include "engine/seq.h"

/* Below this many rows to sample, a parallel region costs more than it saves. */
enum { PARALLEL_SAMPLE_MIN_ROWS = 4 };

/* Whether the step brought s to the end of its tokens (publish has run), so that its last
 * logits row is one to sample from: a scored prompt has logits for every row of a chunk. */
static bool at_end(const seq *s)
{
    return s->n_computed == s->n_tokens;
}

/* Whether s samples straight from its own logits row this step (a request of n > 1
 * whose prompt just finished forks first, and its completions sample after). */
static bool samples_now(const seq *s)
{
    return s->job->forked || s->job->req->n == 1;
}

/* Tokens s may still generate: its max_tokens and the context both bound it. */
static int tokens_left(const ts_engine *e, const seq *s)
{
    int by_max = s->job->req->max_tokens - s->n_generated;
    int by_ctx = e->model->cfg.context_len - s->n_tokens;
    return by_max < by_ctx ? by_max : by_ctx;
}

/* Sets every logit (vocab) of a token s's constraint does not allow next to -inf, with
 * allowed (engine_mask_width bytes) as work space; the trie is walked only when the state
 * allows other tokens than the cached mask's. While the text could end as it is (a
 * JSON-schema number), the end-of-generation tokens stay allowed, unless ignore_eos.
 * A constraint that closes allows only tokens after which its shortest completion fits
 * the tokens left after them (one per byte), so the text is complete when the budget
 * runs out; a cached mask serves while its tokens' largest closing cost still fits. When
 * no token fits (the budget was too small from the start), the budget is not applied.
 * TS_OK, or why no token is allowed. */
static ts_status mask_constrained(const ts_engine *e, seq *s, float *logits, uint8_t *allowed)
{
    int vocab = e->model->cfg.vocab_size, n_tok = e->step.trie.vocab_size;
    uint8_t *bits = s->mask_bits;
    int left = tokens_left(e, s);
    uint32_t limit = constraint_closes(&s->cons) && left >= 1 ? (uint32_t)left - 1 : UINT32_MAX;
    if (!s->mask_valid || !constraint_same(&s->mask_state, &s->cons) ||
        limit > s->mask_limit || limit < s->mask_max_cost) {
        uint32_t max_cost = 0;
        bool may_end = constraint_can_end(&s->cons) && !s->job->req->ignore_eos;
        int n = constraint_allowed_within(&s->cons, &e->step.trie, limit, allowed, &max_cost);
        if (n == 0 && limit != UINT32_MAX && !may_end)
            n = constraint_allowed_within(&s->cons, &e->step.trie, limit = UINT32_MAX,
                                          allowed, &max_cost);
        if (n < 0)
            return n == CONSTRAINT_TOO_COSTLY ? TS_ERR_TOO_LONG : TS_ERR_NOMEM;
        if (may_end)
            for (int id = 0; id < n_tok; id++)
                if (ts_token_is_eog(e->model->tokenizer, id))
                    allowed[id] = 1, n++;
        if (n == 0)
            return TS_ERR_INTERNAL;
        memset(bits, 0, ((size_t)n_tok + 7) / 8);
        for (int id = 0; id < n_tok; id++)
            bits[id >> 3] |= (uint8_t)(allowed[id] << (id & 7));
        s->mask_state = s->cons;
        s->mask_limit = limit;
        s->mask_max_cost = max_cost;
        s->mask_valid = true;
    }
    for (int id = 0; id < vocab; id++)
        if (id >= n_tok || !((bits[id >> 3] >> (id & 7)) & 1))
            logits[id] = -INFINITY;
    return TS_OK;
}

/* Draws s's next token from logits (vocab; modified) with scratch sc and mask space
 * allowed. Touches only s's sampler, sc and allowed, so several sequences may sample at
 * once on separate scratches. */
static void sample_one(const ts_engine *e, seq *s, float *logits, sampler_scratch *sc,
                       uint8_t *allowed, sampled *out)
{
    const ts_request *r = s->job->req;
    out->want_logprobs = r->sampling.logprobs || r->sampling.top_logprobs > 0;
    out->err = (ts_error){0};
    ts_status st = s->cons.kind != TS_CONSTRAINT_NONE ? mask_constrained(e, s, logits, allowed)
                                                      : TS_OK;
    if (st != TS_OK) {
        out->status = ts_error_set(&out->err, st, st == TS_ERR_NOMEM
                                   ? "out of memory masking the constrained output"
                                   : st == TS_ERR_TOO_LONG
                                   ? "the grammar is too ambiguous to follow: one token's mask "
                                     "needs more work than the bound allows"
                                   : "no token of the vocabulary can continue the constrained "
                                     "output");
        return;
    }
    out->status = sampler_sample(&s->smp, sc, &out->token, out->want_logprobs ? &out->lp : NULL,
                                 logits, s->tokens, s->n_tokens, s->n_generated, &out->err);
    const ts_engine_options *o = &e->opts;
    if (out->status == TS_OK && s->n_generated < o->n_spec_script)
        out->token = o->spec_script[s->n_generated]; /* a measuring aid: the text is scripted */
}

/* The vocabulary's token trie, built the first time a constrained sequence samples (on
 * the step thread, before the parallel region). False when it cannot be built: the
 * constrained requests of the step fail. */
static bool ensure_trie(ts_engine *e, int n)
{
    if (e->step.trie_built)
        return true;
    bool need = false;
    for (int i = 0; i < n && !need; i++)
        need = e->step.order[i]->cons.kind != TS_CONSTRAINT_NONE;
    if (!need)
        return true;
    ts_error err = {0};
    if (token_trie_build(&e->step.trie, e->model->tokenizer, &err) == TS_OK) {
        e->step.trie_built = true;
        return true;
    }
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        if (s->cons.kind != TS_CONSTRAINT_NONE && !s->done)
            engine_fail_request(e, s->job, TS_ERR_NOMEM, err.msg);
    }
    return false;
}

void emit_sample(ts_engine *e, const fwd_batch *b, int n)
{
    int vocab = e->model->cfg.vocab_size, rows = 0;
    size_t width = (size_t)engine_mask_width(e);
    for (int i = 0; i < n; i++)
        rows += b->seqs[i].logits_row >= 0;
    ensure_trie(e, n);
    int threads = e->step.team.n < e->step.n_scratch ? e->step.team.n : e->step.n_scratch;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) \
    if (rows >= PARALLEL_SAMPLE_MIN_ROWS)
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        const fwd_seq *fs = &b->seqs[i];
        if (fs->logits_row < 0 || s->done || !samples_now(s) || !at_end(s) ||
            s->job->req->max_tokens == 0)
            continue;
        int t = omp_get_thread_num();
        sample_one(e, s, e->step.fwd.logits + (size_t)fs->logits_row * vocab,
                   &e->step.scratch[t], e->step.allowed + (size_t)t * width, &e->step.picks[i]);
    }
}

/* Pushes one TOKEN event; on failure the request is failed. */
static bool push_token(ts_engine *e, seq *s, const char *text, size_t len, int32_t token,
                       const sampler_logprobs *lp)
{
    ts_logprob top[TS_MAX_TOP_LOGPROBS];
    int n_top = 0;
    float logprob = 0.0f;
    if (lp) {
        logprob = lp->logprob;
        n_top = lp->n_top < TS_MAX_TOP_LOGPROBS ? lp->n_top : TS_MAX_TOP_LOGPROBS;
        for (int i = 0; i < n_top; i++)
            top[i] = (ts_logprob){lp->top[i].id, lp->top[i].logprob};
    }
    if (!engine_alloc_ok(e) ||
        request_push_token(s->job->req, s->index, text, len, token, lp ? &logprob : NULL, top,
                           n_top) != TS_OK) {
        engine_fail_request(e, s->job, TS_ERR_NOMEM, "out of memory queueing an event");
        return false;
    }
    return true;
}

/* Appends the token drawn for s and emits its text; ends the sequence when it is done
 * (or fails the request when sampling failed). */
static void emit_one(ts_engine *e, seq *s, const sampled *pick)
{
    job *j = s->job;
    ts_request *r = j->req;
    const ts_tokenizer *tok = e->model->tokenizer;
    ts_error err = {0};
    ts_status st = pick->status;
    if (st != TS_OK) {
        engine_fail_request(e, j, st, pick->err.msg);
        return;
    }
    int32_t token = pick->token;
    s->tokens[s->n_tokens++] = token;
    s->n_generated++;
    e->step.counters.generated_tokens++;

    ts_finish_reason why = TS_FINISH_NONE;
    bool eog = !r->ignore_eos && ts_token_is_eog(tok, token);
    if (eog) {
        why = TS_FINISH_STOP; /* the end-of-generation token itself is not shown */
    } else {
        size_t len = 0;
        const char *bytes = ts_token_bytes(tok, token, &len);
        char *text = NULL;
        size_t n_text = 0;
        st = engine_seq_text(s, bytes ? bytes : "", bytes ? len : 0, &text, &n_text, &err);
        if (st != TS_OK) {
            engine_fail_request(e, j, st, err.msg);
            return;
        }
        bool ok = push_token(e, s, text, n_text, token, pick->want_logprobs ? &pick->lp : NULL);
        free(text);
        if (!ok)
            return;
        size_t unread = r->max_unread ? request_unread_bytes(r) : 0;
        if (unread > r->max_unread) {
            /* The reader fell behind: stop generating rather than buffer without bound. */
            char msg[160];
            snprintf(msg, sizeof msg,
                     "cancelled: %zu bytes of output unread, over the limit of %zu "
                     "(the client reads too slowly)", unread, r->max_unread);
            engine_fail_request(e, j, TS_ERR_CANCELLED, msg);
            return;
        }
        if (s->stop.stopped)
            why = TS_FINISH_STOP;
    }
    if (s->cons.kind != TS_CONSTRAINT_NONE && !eog) { /* the mask let it end the text */
        size_t len = 0;
        const char *bytes = ts_token_bytes(tok, token, &len);
        if (!constraint_advance(&s->cons, bytes ? bytes : "", bytes ? len : 0)) {
            engine_fail_request(e, j, TS_ERR_INTERNAL, "a sampled token broke the constraint");
            return;
        }
        if (why == TS_FINISH_NONE && constraint_done(&s->cons))
            why = TS_FINISH_STOP; /* the constrained text is complete */
    }
    if (why == TS_FINISH_NONE &&
        (s->n_generated >= r->max_tokens || s->n_tokens >= e->model->cfg.context_len))
        why = constraint_closes(&s->cons) && constraint_can_end(&s->cons)
                  ? TS_FINISH_STOP /* the budget closed the constrained text in time */
                  : TS_FINISH_LENGTH;
    if (why == TS_FINISH_NONE)
        return;
    int i = engine_seq_find(e->step.running, e->step.n_running, s);
    if (i >= 0)
        engine_seq_remove_at(e->step.running, &e->step.n_running, i);
    engine_finish_seq(e, s, why);
}

void emit_sample_row(ts_engine *e, seq *s, float *logits, sampled *out)
{
    sample_one(e, s, logits, &e->step.scratch[0], e->step.allowed, out);
}

void emit_append(ts_engine *e, seq *s, const sampled *pick)
{
    emit_one(e, s, pick);
}

/* Turns the prompt sequence of an n > 1 request into n sequences sharing its blocks. */
static void fork_completions(ts_engine *e, seq *s)
{
    job *j = s->job;
    j->forked = true;
    if (e->step.n_running + j->req->n - 1 > e->opts.max_seqs) { /* admission reserved them */
        engine_fail_request(e, j, TS_ERR_INTERNAL, "no batch slots left for the n completions");
        return;
    }
    for (int i = 1; i < j->req->n; i++) {
        seq *c = NULL;
        ts_error err = {0};
        ts_status st = engine_seq_create(e, j, i, s->tokens, s->n_tokens, &c, &err);
        if (st == TS_OK) {
            /* engine_seq_create queued it as waiting: move it to running, sharing blocks. */
            e->step.n_waiting--;
            st = kv_table_fork(e->step.pool, &c->table, &s->table, &err);
            c->n_computed = s->n_computed;
            c->n_published = s->n_published;
            c->admit_order = ++e->step.admit_counter;
            e->step.running[e->step.n_running++] = c;
        }
        if (st != TS_OK) {
            engine_fail_request(e, j, st, err.msg);
            return;
        }
    }
}

/* The prompt of s is done: makes the n completions, each sampling its own first token
 * from a copy of the prompt's logits row (vocab). */
static void fork_and_emit(ts_engine *e, seq *s, const float *row)
{
    int vocab = e->model->cfg.vocab_size;
    job *j = s->job;
    fork_completions(e, s);
    seq *mine[TS_MAX_N];
    int n_mine = 0;
    for (int k = 0; k < e->step.n_running && n_mine < TS_MAX_N; k++)
        if (e->step.running[k]->job == j)
            mine[n_mine++] = e->step.running[k];
    for (int k = 0; k < n_mine; k++) {
        if (mine[k]->done)
            continue;
        memcpy(e->step.logits_copy, row, (size_t)vocab * sizeof(float));
        sampled pick;
        sample_one(e, mine[k], e->step.logits_copy, &e->step.scratch[0], e->step.allowed,
                   &pick);
        emit_one(e, mine[k], &pick);
    }
}

/* A request that only scores its prompt (max_tokens 0) ends once the prompt is computed. */
static void finish_scored(ts_engine *e, seq *s)
{
    int i = engine_seq_find(e->step.running, e->step.n_running, s);
    if (i >= 0)
        engine_seq_remove_at(e->step.running, &e->step.n_running, i);
    engine_finish_seq(e, s, TS_FINISH_LENGTH);
}

/* One scored prompt row of a step: which sequence, the logits row and the prompt token
 * it predicts, and the result. */
typedef struct score_item {
    int seq;            /* index into the step's order and b->seqs */
    const float *logits; /* (vocab) */
    int next;           /* the prompt position of the token scored */
    ts_status st;
    sampler_logprobs lp;
    int rank;           /* 1 + the tokens of a higher logit than the one scored */
} score_item;

/* 1 + how many of the vocab logits are above token's. */
static int rank_of(const float *logits, int vocab, int32_t token)
{
    int above = 0;
    for (int v = 0; v < vocab; v++)
        above += logits[v] > logits[token];
    return 1 + above;
}

/* The step's rows whose next token is a prompt token not yet scored, into w (capacity:
 * every scored row of the step); returns their count. */
static int score_items(const ts_engine *e, const fwd_batch *b, int n, score_item *w)
{
    const int vocab = e->model->cfg.vocab_size;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const fwd_seq *fs = &b->seqs[i];
        const seq *s = e->step.order[i];
        if (!fs->all_logits || s->done)
            continue;
        const float *first =
            e->step.fwd.logits + (size_t)(fs->logits_row - fs->n_rows + 1) * vocab;
        for (int j = 0; j < fs->n_rows; j++) {
            const int next = fs->pos0 + j + 1; /* the prompt token row j predicts */
            if (next > s->n_scored && next < s->job->req->n_prompt)
                w[m++] = (score_item){.seq = i, .logits = first + (size_t)j * vocab,
                                      .next = next};
        }
    }
    return m;
}

/* Pushes item w's PROMPT event; on failure the request is failed. */
static void push_scored(ts_engine *e, seq *s, const score_item *w)
{
    if (w->st != TS_OK) {
        engine_fail_request(e, s->job, w->st, "scoring a prompt token failed");
        return;
    }
    ts_logprob top[TS_MAX_TOP_LOGPROBS];
    int n_top = w->lp.n_top < TS_MAX_TOP_LOGPROBS ? w->lp.n_top : TS_MAX_TOP_LOGPROBS;
    for (int k = 0; k < n_top; k++)
        top[k] = (ts_logprob){w->lp.top[k].id, w->lp.top[k].logprob};
    if (!engine_alloc_ok(e) ||
        request_push_prompt(s->job->req, w->lp.token, w->lp.logprob, w->rank, top, n_top) !=
            TS_OK) {
        engine_fail_request(e, s->job, TS_ERR_NOMEM, "out of memory queueing an event");
        return;
    }
    s->n_scored = w->next;
}

void emit_prompt_logprobs(ts_engine *e, const fwd_batch *b, int n)
{
    int rows = 0;
    for (int i = 0; i < n; i++)
        rows += b->seqs[i].all_logits ? b->seqs[i].n_rows : 0;
    if (rows == 0)
        return;
    score_item *w = malloc((size_t)rows * sizeof *w);
    if (!w) {
        for (int i = 0; i < n; i++)
            if (b->seqs[i].all_logits && !e->step.order[i]->done)
                engine_fail_request(e, e->step.order[i]->job, TS_ERR_NOMEM,
                                    "out of memory scoring the prompt");
        return;
    }
    const int m = score_items(e, b, n, w);
    /* the rows in parallel, each thread on its own scratch; the events in order after */
    int threads = e->step.team.n < e->step.n_scratch ? e->step.team.n : e->step.n_scratch;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) \
    if (m >= PARALLEL_SAMPLE_MIN_ROWS)
    for (int k = 0; k < m; k++) {
        seq *s = e->step.order[w[k].seq];
        w[k].st = sampler_score(&s->smp, &e->step.scratch[omp_get_thread_num()], &w[k].lp,
                                w[k].logits, s->tokens[w[k].next], NULL);
        w[k].rank = rank_of(w[k].logits, e->model->cfg.vocab_size, s->tokens[w[k].next]);
    }
    for (int k = 0; k < m; k++) {
        seq *s = e->step.order[w[k].seq];
        if (!s->done)
            push_scored(e, s, &w[k]);
    }
    free(w);
}

void emit_tokens(ts_engine *e, const fwd_batch *b, int n)
{
    int vocab = e->model->cfg.vocab_size;
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        const fwd_seq *fs = &b->seqs[i];
        if (fs->logits_row < 0 || s->done || !at_end(s))
            continue;
        if (s->job->req->max_tokens == 0)
            finish_scored(e, s);
        else if (samples_now(s))
            emit_one(e, s, &e->step.picks[i]);
        else
            fork_and_emit(e, s, e->step.fwd.logits + (size_t)fs->logits_row * vocab);
    }
}
