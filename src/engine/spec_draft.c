/* spec_draft.c: the draft model of speculative decoding: the vocabulary check, its KV pool
 * and forward scratch, the batched draft steps (catch-up and first draft, then one draft
 * a step) and the rollback of its K/V to the target's tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "engine/spec_draft.h"

/* How much of the running mean of a draft's cost each step keeps. */
#define DRAFT_COST_DECAY 0.8

struct spec_drafter {
    const ts_model *model; /* borrowed: opts.draft_model */
    kv_pool *pool;
    fwd_state fwd;
    int max_rows;          /* rows of one draft step: a catch-up budget plus a row a seq */
    int32_t *tokens;       /* (max_rows) the step's tokens */
    fwd_seq *seqs;         /* (max_seqs) the step's sequences */
    seq **want;            /* (max_seqs) sequences asking for drafts since the last run */
    int *want_k;           /* (max_seqs) how many each asks for */
    int n_want;
    seq **member;          /* (max_seqs) the sequence of each of the step's seqs */
    seq **live;            /* (max_seqs) those drafting on in the next step */
    double seconds;        /* running mean of a draft step's seconds per drafting sequence,
                            * from steps of one row a sequence (a catch-up on a prompt or
                            * a rest is paid once, not per draft) */
    bool checking;         /* spec_draft_check after each verification */
    char breach[320];      /* its first failure, or "" */
};

/* ---- the vocabulary check */

/* Whether token id is the same in both vocabularies; *why says how it differs. */
static bool same_token(const ts_tokenizer *a, const ts_tokenizer *b, int32_t id,
                       const char **why)
{
    size_t la = 0, lb = 0;
    const char *ta = ts_token_bytes(a, id, &la), *tb = ts_token_bytes(b, id, &lb);
    if (la != lb || (la && memcmp(ta, tb, la))) {
        *why = "its text";
        return false;
    }
    if (ts_token_is_eog(a, id) != ts_token_is_eog(b, id)) {
        *why = "whether it ends generation";
        return false;
    }
    if (ts_token_is_plain(a, id) != ts_token_is_plain(b, id)) {
        *why = "whether it is a special token";
        return false;
    }
    return true;
}

ts_status spec_draft_check_vocab(const ts_model *target, const ts_model *draft, ts_error *err)
{
    const ts_tokenizer *a = target->tokenizer, *b = draft->tokenizer;
    int va = target->cfg.vocab_size, vb = draft->cfg.vocab_size;
    if (va != vb)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "the draft model's vocabulary has %d tokens, the target's %d", vb,
                            va);
    if (!a || !b)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the %s model has no vocabulary",
                            a ? "draft" : "target");
    int ta = ts_tokenizer_vocab_size(a), tb = ts_tokenizer_vocab_size(b);
    if (ta != tb)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "the draft model's tokenizer has %d tokens, the target's %d", tb, ta);
    if (ts_tokenizer_bos(a) != ts_tokenizer_bos(b) || ts_tokenizer_eos(a) != ts_tokenizer_eos(b))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "the draft model's special ids differ: BOS %d, EOS %d; the "
                            "target's BOS %d, EOS %d",
                            (int)ts_tokenizer_bos(b), (int)ts_tokenizer_eos(b),
                            (int)ts_tokenizer_bos(a), (int)ts_tokenizer_eos(a));
    for (int32_t id = 0; id < ta; id++) {
        const char *why = NULL;
        if (!same_token(a, b, id, &why))
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "the draft model's token %d differs from the target's in %s",
                                (int)id, why);
    }
    return TS_OK;
}

/* ---- life */

ts_status spec_draft_create(ts_engine *e, ts_error *err)
{
    const ts_model *m = e->opts.draft_model;
    int max_seqs = e->opts.max_seqs;
    spec_drafter *d = calloc(1, sizeof *d);
    if (!d)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for the draft model's state");
    e->step.drafter = d;
    d->model = m;
    d->max_rows = e->opts.step_tokens + max_seqs;
    kv_stats ks;
    kv_pool_stats(&ks, e->step.pool);
    kv_config kc = {
        .n_layers = m->cfg.n_layers,
        .n_kv_heads = m->cfg.n_kv_heads,
        .head_dim = m->cfg.head_dim,
        .dtype = model_all_f32(&m->w) ? KV_DTYPE_F32 : KV_DTYPE_F16,
        .n_blocks = ks.blocks_total,
        .to_f16 = e->kernels->f32_to_f16,
    };
    ts_status st;
    if ((st = kv_pool_init(&d->pool, &kc, err)) != TS_OK ||
        (st = fwd_state_init(&d->fwd, m, d->max_rows, max_seqs, err)) != TS_OK)
        return st;
    d->fwd.gemm_path = (fwd_gemm_path)e->opts.gemm;
    d->fwd.head_rows = e->opts.spec_draft_vocab;
    d->tokens = malloc((size_t)d->max_rows * sizeof *d->tokens);
    d->seqs = malloc((size_t)max_seqs * sizeof *d->seqs);
    d->want = malloc((size_t)max_seqs * sizeof *d->want);
    d->want_k = malloc((size_t)max_seqs * sizeof *d->want_k);
    d->member = malloc((size_t)max_seqs * sizeof *d->member);
    d->live = malloc((size_t)max_seqs * sizeof *d->live);
    if (!d->tokens || !d->seqs || !d->want || !d->want_k || !d->member || !d->live)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for the draft model's buffers");
    return TS_OK;
}

void spec_draft_destroy(ts_engine *e)
{
    spec_drafter *d = e->step.drafter;
    if (!d)
        return;
    fwd_state_free(&d->fwd);
    kv_pool_free(d->pool);
    free(d->tokens);
    free(d->seqs);
    free(d->want);
    free(d->want_k);
    free(d->member);
    free(d->live);
    free(d);
    e->step.drafter = NULL;
}

double spec_draft_seconds(const ts_engine *e)
{
    return e->step.drafter ? e->step.drafter->seconds : 0.0;
}

const kv_pool *spec_draft_pool(const ts_engine *e)
{
    return e->step.drafter ? e->step.drafter->pool : NULL;
}

void spec_draft_want(ts_engine *e, seq *s, int k)
{
    spec_drafter *d = e->step.drafter;
    if (d->n_want < e->opts.max_seqs) {
        d->want[d->n_want] = s;
        d->want_k[d->n_want++] = k;
    }
}

/* ---- the draft steps */

static int32_t argmax(const float *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Adds s's tokens (n) at its next draft positions to the step being built (*rows rows,
 * *n_seqs sequences, *n_logits logits rows so far), with logits for the last row when
 * `logits`; reserves their K/V. False when the draft pool has no room. */
static bool add_rows(spec_drafter *d, seq *s, const int32_t *tokens, int n, bool logits,
                     int *rows, int *n_seqs, int *n_logits)
{
    spec_seq *sp = &s->spec;
    ts_error err = {0};
    if (kv_table_reserve(d->pool, &sp->draft_table, n, &err) != TS_OK)
        return false;
    memcpy(d->tokens + *rows, tokens, (size_t)n * sizeof *tokens);
    d->member[*n_seqs] = s;
    d->seqs[*n_seqs] = (fwd_seq){.row0 = *rows,
                                 .n_rows = n,
                                 .pos0 = sp->draft_computed,
                                 .table = &sp->draft_table,
                                 .logits_row = logits ? (*n_logits)++ : -1,
                                 .pool_row = -1};
    *rows += n;
    (*n_seqs)++;
    return true;
}

/* Runs one draft step over the n_seqs sequences of d->seqs and advances their draft
 * positions, or on failure gives back the K/V it reserved; false when it failed. */
static bool draft_forward(ts_engine *e, int rows, int n_seqs, int n_logits)
{
    spec_drafter *d = e->step.drafter;
    fwd_batch b = {.n_rows = rows, .tokens = d->tokens, .n_seqs = n_seqs, .seqs = d->seqs,
                   .n_logits = n_logits};
    ts_error err = {0};
    ts_status st = forward_batch(&d->fwd, d->model, d->pool, e->kernels, &b, &err);
    for (int i = 0; i < TS_PHASE_COUNT; i++)
        d->fwd.seconds[i] = 0.0; /* the draft's phases are not the target's profile */
    (void)fwd_moe_take_counts(&d->fwd); /* nor its experts */
    for (int i = 0; i < n_seqs; i++) {
        spec_seq *sp = &d->member[i]->spec;
        if (st == TS_OK)
            sp->draft_computed += d->seqs[i].n_rows;
        else
            kv_table_truncate(d->pool, &sp->draft_table, sp->draft_computed, &err);
    }
    return st == TS_OK;
}

/* The first draft step's rows: each wanting sequence's tokens the draft has not seen
 * (those the target produced since its last draft, the whole prompt the first time),
 * within the step's row budget; a sequence whose tokens fit whole gets logits and will
 * draft, one cut short only catches up. Returns the step's sequences. */
static int catch_up(ts_engine *e, int *rows, int *n_logits)
{
    spec_drafter *d = e->step.drafter;
    int n_seqs = 0, budget = e->opts.step_tokens;
    int draft_ctx = d->model->cfg.context_len;
    *rows = *n_logits = 0;
    for (int i = 0; i < d->n_want && budget > 0; i++) {
        seq *s = d->want[i];
        spec_seq *sp = &s->spec;
        int behind = s->n_tokens - sp->draft_computed;
        int take = behind < budget ? behind : budget;
        if (take <= 0 || s->n_tokens + d->want_k[i] > draft_ctx)
            continue;
        if (add_rows(d, s, s->tokens + sp->draft_computed, take, take == behind, rows, &n_seqs,
                     n_logits))
            budget -= take;
    }
    return n_seqs;
}

/* After a draft step of n sequences: appends each one with logits its greedy token (among
 * the ids the draft's head scored). */
static void take_drafts(ts_engine *e, int n)
{
    spec_drafter *d = e->step.drafter;
    int vocab = d->model->cfg.vocab_size, scored = fwd_scored_ids(&d->fwd, d->model);
    for (int i = 0; i < n; i++) {
        const fwd_seq *fs = &d->seqs[i];
        if (fs->logits_row < 0)
            continue;
        spec_seq *sp = &d->member[i]->spec;
        sp->draft[sp->n_draft++] = argmax(d->fwd.logits + (size_t)fs->logits_row * vocab, scored);
    }
}

/* How many drafts the wanting sequence s asked for. */
static int wanted(const spec_drafter *d, const seq *s)
{
    for (int i = 0; i < d->n_want; i++)
        if (d->want[i] == s)
            return d->want_k[i];
    return 0;
}

/* A further draft step's rows, after a step of n sequences: each that drafted and wants
 * more feeds its last draft. Returns the step's sequences (rows and logits as many). */
static int next_step(ts_engine *e, int n)
{
    spec_drafter *d = e->step.drafter;
    int n_live = 0;
    for (int i = 0; i < n; i++)
        if (d->seqs[i].logits_row >= 0 && d->member[i]->spec.n_draft < wanted(d, d->member[i]))
            d->live[n_live++] = d->member[i];
    int rows = 0, n_seqs = 0, n_logits = 0;
    for (int i = 0; i < n_live; i++) {
        spec_seq *sp = &d->live[i]->spec;
        add_rows(d, d->live[i], &sp->draft[sp->n_draft - 1], 1, true, &rows, &n_seqs, &n_logits);
    }
    return n_seqs;
}

void spec_draft_run(ts_engine *e)
{
    spec_drafter *d = e->step.drafter;
    e->step.step_draft_s = 0.0;
    if (!d || d->n_want == 0)
        return;
    for (int i = 0; i < d->n_want; i++)
        d->want[i]->spec.n_draft = 0;
    double start = clock_now_s(), single_s = 0.0;
    int rows, n_logits, single_drafts = 0;
    int n = catch_up(e, &rows, &n_logits);
    while (n > 0) {
        double t0 = clock_now_s();
        if (!draft_forward(e, rows, n, n_logits)) {
            for (int i = 0; i < d->n_want; i++)
                d->want[i]->spec.n_draft = 0;
            break;
        }
        if (rows == n && n_logits == n) { /* what one more draft costs */
            single_s += clock_now_s() - t0;
            single_drafts += n;
        }
        take_drafts(e, n);
        n = next_step(e, n);
        rows = n_logits = n;
    }
    e->step.step_draft_s = clock_now_s() - start;
    e->step.counters.spec_draft_model_seconds += e->step.step_draft_s;
    if (single_drafts > 0) {
        double per = single_s / single_drafts;
        d->seconds = d->seconds > 0 ? DRAFT_COST_DECAY * d->seconds + (1 - DRAFT_COST_DECAY) * per
                                    : per;
    }
    d->n_want = 0;
}

/* ---- the debug check */

void spec_draft_set_checking(ts_engine *e, bool on)
{
    if (e->step.drafter)
        e->step.drafter->checking = on;
}

const char *spec_draft_breach(const ts_engine *e)
{
    return e->step.drafter ? e->step.drafter->breach : "";
}

/* The check of s's draft table after a verification: it holds no draft the target has not
 * accepted, nor the last token (which the target drew, the draft never saw); false with
 * why written when it does. */
static bool seq_ok(const seq *s, char *why, size_t cap)
{
    const spec_seq *sp = &s->spec;
    if (sp->draft_table.n_tokens != sp->draft_computed || sp->draft_computed >= s->n_tokens) {
        snprintf(why, cap, "a draft table holds %lld positions, its count %d, of %d tokens",
                 (long long)sp->draft_table.n_tokens, sp->draft_computed, s->n_tokens);
        return false;
    }
    return true;
}

void spec_draft_check(ts_engine *e)
{
    spec_drafter *d = e->step.drafter;
    if (!d || !d->checking || d->breach[0])
        return;
    /* Every sequence not yet freed holds its draft table: running, waiting (a preempted
     * one keeps it, its tokens being the same) and finished this step. */
    const engine_step_state *st = &e->step;
    int n = st->n_running + st->n_waiting + st->n_dead;
    const kv_table **tables = malloc((size_t)(n ? n : 1) * sizeof *tables);
    if (!tables)
        return;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const seq *s = i < st->n_running                  ? st->running[i]
                       : i < st->n_running + st->n_waiting ? st->waiting[i - st->n_running]
                                                           : st->dead[i - st->n_running -
                                                                      st->n_waiting];
        tables[i] = &s->spec.draft_table;
        if (ok && i < st->n_running && !s->done)
            ok = seq_ok(s, d->breach, sizeof d->breach);
    }
    ts_error err = {0};
    if (ok && kv_pool_check(d->pool, tables, n, &err) != TS_OK)
        snprintf(d->breach, sizeof d->breach, "draft pool: %s", err.msg);
    free(tables);
}

/* ---- rollback */

void spec_draft_sync(ts_engine *e, seq *s)
{
    spec_drafter *d = e->step.drafter;
    spec_seq *sp = &s->spec;
    if (!d || sp->draft_computed <= s->n_computed)
        return;
    /* The draft's positions before n_computed hold the tokens the target kept (its own
     * token and the accepted drafts); those after, rejected drafts. */
    ts_error err = {0};
    kv_table_truncate(d->pool, &sp->draft_table, s->n_computed, &err);
    sp->draft_computed = s->n_computed;
}

void spec_draft_forget(ts_engine *e, seq *s)
{
    spec_drafter *d = e->step.drafter;
    kv_table_free(d ? d->pool : NULL, &s->spec.draft_table);
    s->spec.draft_computed = 0;
}
