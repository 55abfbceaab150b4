/* spec.c: speculative decoding verified inside the batched step: prompt-lookup drafts,
 * their rows in the step, the verification of each draft against the target's own draw,
 * the rollback of rejected drafts' KV slots, and each sequence's adaptive depth. */
#include <math.h>
#include <string.h>

#include "engine/emit.h"
#include "engine/seq.h"
#include "engine/spec.h"
#include "engine/spec_draft.h"

/* Below this variance of the decode rows of the steps the cost model has seen, it cannot
 * tell a row's cost from the step's: a single stream that never drafted decodes one row a
 * step, and the model then calls every row as dear as a step. Drafting is how it learns. */
#define SPEC_MIN_ROW_VARIANCE 0.5

/* How much of a sequence's acceptance record each verification keeps. */
#define SPEC_DECAY 0.9

/* After this many verifications in a row that accepted nothing, while its acceptance is
 * under SPEC_REST_BELOW, a sequence rests from drafting, twice as long each further time,
 * up to SPEC_REST_MAX steps. Above it, misses in a row are what a steady acceptance draws
 * now and then (two in a row about once in eleven at 0.7), and a rest lost their steps' drafts:
 * at a forced acceptance of 0.7 the rests took about one step in eight. */
enum { SPEC_MISSES_TO_REST = 2, SPEC_REST_MAX = 16 };
#define SPEC_REST_BELOW 0.5

const char *ts_spec_source_name(ts_spec_source source)
{
    switch (source) {
    case TS_SPEC_SOURCE_NGRAM: return "ngram";
    case TS_SPEC_SOURCE_DRAFT_MODEL: return "draft_model";
    default: return "unknown";
    }
}

int spec_rows_cap(const ts_engine_options *o)
{
    return o->spec == TS_SPEC_OFF ? 0 : o->spec_rows;
}

/* ---- prompt lookup */

/* The latest start i < n - g of tokens[i .. i+g) equal to the last g tokens; -1 if none. */
static int latest_match(const int32_t *tokens, int n, int g)
{
    const int32_t *tail = tokens + n - g;
    for (int i = n - g - 1; i >= 0; i--)
        if (tokens[i + g - 1] == tail[g - 1] && !memcmp(tokens + i, tail, (size_t)g * sizeof *tail))
            return i;
    return -1;
}

int spec_ngram_draft(int32_t *out, const int32_t *tokens, int n, int k)
{
    for (int g = SPEC_NGRAM_MAX; g >= SPEC_NGRAM_MIN; g--) {
        if (n < g + 1)
            continue;
        int i = latest_match(tokens, n, g);
        if (i < 0)
            continue;
        int from = i + g, count = n - from < k ? n - from : k;
        memcpy(out, tokens + from, (size_t)count * sizeof *out);
        return count;
    }
    return 0;
}

/* ---- plan and pack */

double spec_acceptance(const spec_seq *sp)
{
    return (sp->hits + 1.0) / (sp->trials + 2.0);
}

int spec_drafts_worth(const step_cost *c, int decode, int prompt, double alpha, int k)
{
    return spec_drafts_worth_at(c, decode, prompt, alpha, k, 0.0);
}

int spec_drafts_worth_at(const step_cost *c, int decode, int prompt, double alpha, int k,
                         double draft_s)
{
    if (c->seen < COST_MIN_STEPS || decode < 1)
        return k;
    double mean = c->s[0][1] / c->s[0][0], var = c->s[1][1] / c->s[0][0] - mean * mean;
    if (var < SPEC_MIN_ROW_VARIANCE)
        return k; /* what a row costs is not known yet: drafts find out */
    double fit[3]; /* the steps' own fit: a draft row's cost is the question here */
    cost_plain_fit(c, fit);
    double t = fit[0] + fit[1] * decode + fit[2] * prompt, row = fit[1];
    if (!(t > 0) || !(row > 0))
        return k; /* no cost a row adds: every draft is free */
    /* the sequence's share of the step, the cost of a draft, and with j drafts the
     * tokens the sequence expects (e) and the time they take (cost) */
    double share = t / decode, draft = row + draft_s, e = 1.0, cost = share, p = alpha;
    int j = 0;
    while (j < k && p * cost > draft * e) { /* (e + p) / (cost + draft) > e / cost */
        j++;
        e += p;
        cost += draft;
        p *= alpha;
    }
    return j;
}

/* Whether s decodes one token this step and may speculate. */
static bool may_speculate(const seq *s)
{
    return !s->done && s->step_rows == 1 && s->n_generated > 0 &&
           s->n_computed + 1 == s->n_tokens && !s->job->req->no_speculation;
}

/* Drafts s may add: its depth, within the step's room, its max_tokens (the main row's
 * token and every accepted draft are new tokens) and the context. */
static int draft_limit(const ts_engine *e, const seq *s, int room)
{
    int k = s->spec.depth > 0 ? s->spec.depth : e->opts.spec_max;
    int by_tokens = s->job->req->max_tokens - s->n_generated - 1;
    int by_context = e->model->cfg.context_len - s->n_tokens - 1;
    k = k < room ? k : room;
    k = k < by_tokens ? k : by_tokens;
    return k < by_context ? k : by_context;
}

/* Reserves the slots of s's k drafts from free blocks, fewer drafts when the free blocks
 * hold fewer; returns the drafts kept (0: none reserved). */
static int reserve_drafts(ts_engine *e, seq *s, int k, int64_t free_blocks)
{
    int64_t end = (int64_t)s->n_computed + 1;
    while (k > 0 && kv_table_blocks_needed(e->step.pool, &s->table, end + k - s->table.n_tokens) >
                        free_blocks)
        k--;
    int64_t more = end + k - s->table.n_tokens;
    ts_error err = {0};
    if (k > 0 && more > 0 && kv_table_reserve(e->step.pool, &s->table, more, &err) != TS_OK)
        return 0;
    return k;
}

/* Runs the draft model for the sequences that asked, then reserves each one's draft
 * slots in the target's table (fewer drafts when the free blocks hold fewer). */
static void draft_and_reserve(ts_engine *e)
{
    spec_draft_run(e);
    for (int i = 0; i < e->step.n_running; i++) {
        seq *s = e->step.running[i];
        if (s->spec.n_draft == 0)
            continue;
        kv_stats ks;
        kv_pool_stats(&ks, e->step.pool);
        s->spec.n_draft = reserve_drafts(e, s, s->spec.n_draft, ks.blocks_free);
    }
}

void spec_plan(ts_engine *e)
{
    if (e->opts.spec == TS_SPEC_OFF)
        return;
    int rows = 0, decode = 0;
    for (int i = 0; i < e->step.n_running; i++) {
        const seq *s = e->step.running[i];
        rows += s->step_rows;
        decode += s->step_rows == 1 && s->n_generated > 0;
    }
    int room = e->opts.spec_rows - rows;
    for (int i = 0; i < e->step.n_running && room > 0; i++) {
        seq *s = e->step.running[i];
        s->spec.n_draft = 0;
        if (!may_speculate(s))
            continue;
        if (s->spec.rest > 0) {
            s->spec.rest--;
            continue;
        }
        int k = draft_limit(e, s, room);
        if (!e->opts.spec_eager)
            k = spec_drafts_worth_at(&e->step.cost, decode, rows - decode,
                                     spec_acceptance(&s->spec), k, spec_draft_seconds(e));
        if (k <= 0)
            continue;
        if (e->step.drafter) { /* drafted below, all together */
            spec_draft_want(e, s, k);
            room -= k;
            continue;
        }
        k = spec_ngram_draft(s->spec.draft, s->tokens, s->n_tokens, k);
        kv_stats ks;
        kv_pool_stats(&ks, e->step.pool);
        k = k > 0 ? reserve_drafts(e, s, k, ks.blocks_free) : 0;
        s->spec.n_draft = k;
        room -= k;
    }
    if (e->step.drafter)
        draft_and_reserve(e);
}

void spec_pack(ts_engine *e, fwd_batch *b, int n)
{
    int drafts = 0;
    for (int i = 0; i < n; i++)
        drafts += e->step.order[i]->spec.n_draft;
    e->step.step_drafts = drafts;
    if (drafts == 0)
        return;
    /* From the last entry back, each entry's rows move down by the drafts of the entries
     * before it (a destination never overlaps rows not yet moved) and its drafts follow
     * its own row; logits rows shift likewise. */
    int32_t *tokens = e->step.tokens;
    int row_shift = drafts, logit_shift = drafts;
    for (int i = n - 1; i >= 0; i--) {
        fwd_seq *fs = &e->step.seqs[i];
        spec_seq *sp = &e->step.order[i]->spec;
        int k = sp->n_draft;
        row_shift -= k;
        logit_shift -= k;
        memmove(tokens + fs->row0 + row_shift, tokens + fs->row0,
                (size_t)fs->n_rows * sizeof *tokens);
        fs->row0 += row_shift;
        if (fs->logits_row >= 0)
            fs->logits_row += logit_shift;
        if (k == 0)
            continue;
        memcpy(tokens + fs->row0 + fs->n_rows, sp->draft, (size_t)k * sizeof *tokens);
        fs->n_rows += k;
        fs->logits_rows = 1 + k;
        sp->logits_row0 = fs->logits_row + 1;
    }
    b->n_rows += drafts;
    b->n_logits += drafts;
    e->step.step_decode += drafts;
}

/* ---- verification */

/* spec.h says what the depth follows. */
void spec_adapt_depth(spec_seq *sp, int max, int k, int accepted)
{
    sp->hits = SPEC_DECAY * sp->hits + accepted;
    sp->trials = SPEC_DECAY * sp->trials + accepted + (accepted < k);
    int depth = sp->depth > 0 ? sp->depth : max;
    if (accepted == k) {
        depth = 2 * k > depth ? 2 * k : depth;
    } else {
        double alpha = spec_acceptance(sp);
        int expected = (int)ceil(alpha / (1.0 - alpha));
        depth = (accepted > expected ? accepted : expected) + 1;
    }
    sp->depth = depth < max ? depth : max;
    sp->misses = accepted == 0 ? sp->misses + 1 : 0;
    if (sp->misses >= SPEC_MISSES_TO_REST && spec_acceptance(sp) < SPEC_REST_BELOW) {
        int shift = sp->misses - SPEC_MISSES_TO_REST, rest = 2 << (shift < 4 ? shift : 4);
        sp->rest = rest < SPEC_REST_MAX ? rest : SPEC_REST_MAX;
    }
}

/* Whether s's draft `at` is accepted: it is the token the target drew. With
 * opts.spec_force_accept, instead a draw of that probability, whatever the target drew;
 * an accepted draft then becomes s's last token, so its row's K/V hold s's tokens (the
 * text already emitted keeps the target's token). */
static bool accepts(ts_engine *e, seq *s, int at)
{
    double p = e->opts.spec_force_accept;
    if (!(p > 0))
        return s->tokens[s->n_tokens - 1] == s->spec.draft[at];
    uint64_t *x = &e->step.spec_rng; /* xorshift64 */
    *x = *x ? *x : 0x9e3779b97f4a7c15ull;
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    if ((double)(*x >> 11) * 0x1.0p-53 >= p)
        return false;
    s->tokens[s->n_tokens - 1] = s->spec.draft[at];
    return true;
}

/* Verifies the drafts of s (its own token of the step is emitted): returns how many were
 * accepted, each followed by the token drawn from its row. */
static int verify_seq(ts_engine *e, seq *s)
{
    spec_seq *sp = &s->spec;
    size_t vocab = (size_t)e->model->cfg.vocab_size;
    int accepted = 0;
    while (accepted < sp->n_draft && !s->done &&
           accepts(e, s, accepted)) {
        /* The draft's row computed the token just emitted: its K/V stay. */
        s->n_computed++;
        engine_seq_publish(e, s);
        sampled pick;
        emit_sample_row(e, s, e->step.fwd.logits + (size_t)(sp->logits_row0 + accepted) * vocab,
                        &pick);
        accepted++;
        emit_append(e, s, &pick);
    }
    return accepted;
}

/* Counts k drafts verified, `accepted` of them accepted, in all and under the engine's
 * draft source (a draft model when it has one, else prompt lookup). */
static void count_drafts(ts_engine *e, int k, int accepted)
{
    ts_engine_stats *c = &e->step.counters;
    ts_spec_source_stats *src =
        &c->spec_source[e->step.drafter ? TS_SPEC_SOURCE_DRAFT_MODEL : TS_SPEC_SOURCE_NGRAM];
    c->spec_drafted += (uint64_t)k;
    c->spec_accepted += (uint64_t)accepted;
    src->drafted += (uint64_t)k;
    src->accepted += (uint64_t)accepted;
}

void spec_verify(ts_engine *e, int n)
{
    for (int i = 0; i < n; i++) {
        seq *s = e->step.order[i];
        int k = s->spec.n_draft;
        if (k == 0) {
            if (!s->done)
                spec_draft_sync(e, s); /* drafts the target had no slots for */
            continue;
        }
        int accepted = s->done ? 0 : verify_seq(e, s);
        s->spec.n_draft = 0;
        count_drafts(e, k, accepted);
        if (s->done)
            continue; /* its blocks are released */
        ts_error err = {0};
        kv_table_truncate(e->step.pool, &s->table, s->n_computed, &err);
        spec_draft_sync(e, s);
        spec_adapt_depth(&s->spec, e->opts.spec_max, k, accepted);
    }
    spec_draft_check(e);
}
