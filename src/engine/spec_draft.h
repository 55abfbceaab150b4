/* spec_draft.h: the draft model of speculative decoding (TS_SPEC_DRAFT, spec_draft.c). A
 * small model of the target's vocabulary, with a KV pool and forward scratch of its own,
 * proposes each speculating sequence's drafts greedily: its first step catches up on the
 * tokens the target produced since it last ran (all drafting sequences in one batch) and
 * yields each one's first draft, each further step one draft more per sequence. Its K/V
 * of a sequence follow the target's tokens: cut back to the accepted prefix after each
 * verification. A draft is one token (q one-hot), so spec.c's rejection rule stays exact. */
#ifndef TESSERA_ENGINE_SPEC_DRAFT_H
#define TESSERA_ENGINE_SPEC_DRAFT_H

#include "engine/state.h"

/* TS_OK when draft's vocabulary is target's: the same size (model and tokenizer), the same
 * BOS and EOS ids, and every token the same bytes and kind (ordinary, end of generation);
 * else TS_ERR_INVALID_ARG with err naming the first difference. Borrowed pointers. */
ts_status spec_draft_check_vocab(const ts_model *target, const ts_model *draft, ts_error *err);

/* Creates e->step.drafter for e->opts.draft_model (checked by spec_draft_check_vocab): its
 * KV pool holds as many blocks as the target's (each of the draft's smaller layers). */
ts_status spec_draft_create(ts_engine *e, ts_error *err);
/* Frees e->step.drafter (NULL allowed); the sequences' draft tables are freed first. */
void spec_draft_destroy(ts_engine *e);

/* Seconds the draft model's steps have cost a drafting sequence per draft, on average over
 * recent steps (0 before any): what a draft adds to the step besides its row. */
double spec_draft_seconds(const ts_engine *e);

/* Asks for up to k drafts for s this step (s decodes one token, k >= 1). */
void spec_draft_want(ts_engine *e, seq *s, int k);

/* Runs the draft model for the sequences asked for since the last run: each gets its
 * proposed tokens in s->spec.draft and their count in s->spec.n_draft (0 when its draft
 * K/V could not be had or its catch-up did not fit in this step). A failed draft step
 * proposes nothing; the target's step goes on without drafts. */
void spec_draft_run(ts_engine *e);

/* After s's verification: drops the draft K/V of positions past the target's computed
 * tokens (the rejected drafts', and the last draft's, which the target never took). */
void spec_draft_sync(ts_engine *e, seq *s);

/* Releases s's draft K/V (s is being freed). */
void spec_draft_forget(ts_engine *e, seq *s);

/* The draft model's KV pool, for checks (NULL without a draft model). */
const kv_pool *spec_draft_pool(const ts_engine *e);

/* A debug check after each verification, on when `on` (set it before submitting any
 * request): every live sequence's draft table holds exactly its draft_computed positions,
 * none past its tokens but the last (no draft the target has not accepted), and the draft pool passes kv_pool_check with
 * all those tables. The first breach's message is kept; spec_draft_breach() returns it
 * once the engine is idle ("" while none). */
void spec_draft_set_checking(ts_engine *e, bool on);
const char *spec_draft_breach(const ts_engine *e);

/* Runs that check now (step thread). */
void spec_draft_check(ts_engine *e);

#endif /* TESSERA_ENGINE_SPEC_DRAFT_H */
