/* spec.h: speculative decoding inside the batched step (spec.c). A decoding sequence's
 * draft tokens become extra rows of its entry in the step, after its own token (the next
 * positions, K/V slots in its block table, a logits row each); after the sequence's own
 * token is emitted, each draft is checked against the token the target draws at its
 * position, the accepted run is kept and the rejected drafts' KV slots are given back. */
#ifndef TESSERA_ENGINE_SPEC_H
#define TESSERA_ENGINE_SPEC_H

#include "engine/state.h"

/* Shortest and longest run of last tokens prompt lookup matches, longest tried first. */
enum { SPEC_NGRAM_MIN = 1, SPEC_NGRAM_MAX = 3 };

/* Draft rows a step of an engine with options o may add: 0 when speculation is off. */
int spec_rows_cap(const ts_engine_options *o);

/* Prompt lookup: finds the latest earlier occurrence of the last g tokens of tokens (n),
 * g from SPEC_NGRAM_MAX down to SPEC_NGRAM_MIN, and copies up to k of the tokens that
 * followed it into out. Returns the number copied (0: no match). Borrowed pointers. */
int spec_ngram_draft(int32_t *out, const int32_t *tokens, int n, int k);

/* A sequence's chance that a draft is accepted once the one before it was, from its
 * recent verifications (a prior of 1/2 before any). */
double spec_acceptance(const spec_seq *sp);

/* Of up to k drafts, each accepted with probability alpha once the one before it was,
 * those worth rows in a step of `decode` decode and `prompt` prompt rows whose cost model
 * is c: as many as yield the sequence most tokens a second. With its share of the step,
 * t / decode, and a draft's cost, what a row adds (b_decode), j drafts yield E_j = 1 +
 * alpha + ... + alpha^j tokens in t / decode + j * b_decode; the j-th pays while alpha^j *
 * (t / decode + (j - 1) * b_decode) > b_decode * E_(j-1), and past the best it never pays
 * again. A step whose fixed cost dominates (a few streams streaming weights) takes many;
 * one of many rows (compute-bound) takes few or none. All k before the model has seen
 * COST_MIN_STEPS steps, and while its steps' decode rows hardly varied (it cannot know a
 * row's cost then; the drafts' rows teach it). */
int spec_drafts_worth(const step_cost *c, int decode, int prompt, double alpha, int k);
/* The same when each draft also costs draft_s seconds outside the step (a draft model's
 * share of its own steps): a draft's cost is b_decode + draft_s. */
int spec_drafts_worth_at(const step_cost *c, int decode, int prompt, double alpha, int k,
                         double draft_s);

/* A sequence's next depth (at most max) after `accepted` of its k drafts: deeper after a
 * run accepted whole; otherwise one past the accepted run or past the run its acceptance
 * expects (alpha / (1 - alpha) drafts before a miss, rounded up), whichever is longer;
 * and a rest from drafting after misses in a row while its acceptance is low (spec.c's
 * SPEC_REST_BELOW); and its acceptance record. The depth is a ceiling: spec_drafts_worth_at
 * then takes as many drafts under it as yield most tokens a second. At an acceptance of
 * 0.7 and a draft step near 0.15 of the target's that is three, where one past the last
 * run alone averaged under two, and the expected run rounded down often two (a record of
 * 0.66 gives 1.9). */
void spec_adapt_depth(spec_seq *sp, int max, int k, int accepted);

/* After the plan: gives each decoding sequence that may speculate a draft, as deep as its
 * adaptive depth and spec_drafts_worth allow, while the step's rows stay under
 * opts.spec_rows, reserving the drafts' KV slots from free blocks only (a draft never
 * evicts a cached block nor preempts a sequence). The drafts come from prompt lookup, or
 * with a draft model (spec_draft.h) from its batched steps, run here for all of them. */
void spec_plan(ts_engine *e);

/* After the pack: puts each sequence's drafts after its own row in b (n entries), rows
 * and logits rows of the later entries moved along; the drafts count as decode rows
 * (step.step_decode) and are counted apart (step.step_drafts). */
void spec_pack(ts_engine *e, fwd_batch *b, int n);

/* After the emit: for each of the n sequences that drafted, while the token it just
 * emitted equals the next draft, keeps that draft's K/V and draws the next token from the
 * draft row's logits (sampling, stop strings, constraints and logprobs as for any token);
 * then rolls back the rejected drafts' slots and adapts the sequence's depth. Drawing a
 * token from the target and accepting the draft when the two are equal is the rejection
 * rule for a deterministic draft (accept d with probability p(d), else draw from p
 * without d), so sampled output keeps its distribution and greedy output its tokens. */
void spec_verify(ts_engine *e, int n);

#endif /* TESSERA_ENGINE_SPEC_H */
