/* tessera/sampling.h: the sampling parameters of one request, as the HTTP layer fills
 * them from an OpenAI request, with defaults and validation. */
#ifndef TESSERA_SAMPLING_H
#define TESSERA_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/status.h"

/* The most alternatives a token's log-probabilities list: the one definition of the
 * limit (engine.h's TS_MAX_TOP_LOGPROBS and the server's follow it). */
#define TS_SAMPLING_MAX_TOP_LOGPROBS 20

/* The most logit_bias entries one request may give (OpenAI's own limit is 300). */
#define TS_SAMPLING_MAX_LOGIT_BIAS 300

/* A logit_bias bias at or below this bans the token outright (its logit becomes -inf),
 * as OpenAI documents -100 to do. */
#define TS_SAMPLING_BIAS_BAN -100.0f

/* DRY's sequence breakers: at most this many strings of request, each 1 to
 * TS_SAMPLING_MAX_DRY_BREAKER_LEN - 1 bytes. */
#define TS_SAMPLING_MAX_DRY_BREAKERS 8
#define TS_SAMPLING_MAX_DRY_BREAKER_LEN 32

/* One logit_bias entry: bias is added to the token's logit. */
typedef struct ts_logit_bias {
    int32_t token;
    float bias;
} ts_logit_bias;

/* Accepted ranges (ts_sampling_params_validate() rejects anything else, NaN included):
 *   temperature         [0, 2]      0 = greedy (argmax, first maximal id); OpenAI's range;
 *                                   one so small that 1/T overflows float acts as 0
 *   top_k               >= 0        0 = off; a value >= the vocabulary size is also off
 *   top_p               (0, 1]      1 = off
 *   min_p               [0, 1]      0 = off; 1 keeps only the tokens tied with the best
 *   repetition_penalty  (0, 10]     1 = off
 *   repeat_last_n       >= -1       0 = off, -1 = every token (prompt + generated)
 *   presence_penalty    [-2, 2]     OpenAI's range
 *   frequency_penalty   [-2, 2]     OpenAI's range
 *   top_logprobs        [0, 20]     > 0 requires logprobs, as in OpenAI's API
 *   n_logit_bias        [0, 300]    logit_bias[i].token >= 0 (and below the vocabulary
 *                                   size: ts_sampling_params_check_vocab), .bias in
 *                                   [-100, 100]
 *   typical_p           (0, 1]      1 = off
 *   top_n_sigma         <= 100      <= 0 = off
 *   min_keep            >= 0        0 = off
 *   xtc_probability     [0, 1]      0 = off
 *   xtc_threshold       [0, 1]      above 0.5 = off (two tokens cannot both pass it)
 *   mirostat            0, 1, 2     0 = off
 *   mirostat_tau        [0, 100]    target surprise, in bits
 *   mirostat_eta        [0, 1]      learning rate
 *   dry_multiplier      [0, 100]    0 = off
 *   dry_base            [0, 100]    below 1 = off
 *   dry_allowed_length  >= 0
 *   dry_penalty_last_n  >= -1       0 = off, -1 = every token (prompt + generated)
 *   n_dry_breakers      [0, 8]      each breaker 1 to 31 bytes
 *
 * Order of application: repetition penalty, then presence/frequency penalties, then DRY,
 * then logit_bias (each entry added; -100 sets -inf; an id given twice gets both), then
 * greedy (temperature 0) or, with mirostat, temperature -> softmax -> mirostat's cut ->
 * draw (top-k, top-p, min-p, typical-p, top-n-sigma and XTC ignored, as llama.cpp does),
 * or else temperature -> top-n-sigma and top-k -> softmax -> min-p -> top-p ->
 * typical-p -> XTC -> draw. min_keep bounds min-p, top-n-sigma, top-p, typical-p and XTC:
 * none of them leaves fewer tokens than min_keep (when that many are there).
 * The repetition penalty is llama.cpp's: each distinct token among the last
 * repeat_last_n tokens of prompt + generated text has its logit divided by the penalty
 * when positive and multiplied by it otherwise. Presence/frequency are OpenAI's: over the
 * generated tokens only, logit -= presence * (count > 0) + frequency * count.
 *
 * The others follow llama.cpp's meaning:
 * - top-n-sigma keeps the tokens whose logit is at least max - top_n_sigma * sigma, sigma
 *   the standard deviation of the finite logits of the whole vocabulary.
 * - typical-p (locally typical sampling) orders the kept tokens by |-ln p - H|, H the
 *   entropy of the kept set, and keeps the shortest prefix of that order whose mass
 *   exceeds typical_p.
 * - XTC ("exclude top choices"), with probability xtc_probability (one draw from the
 *   request's generator), removes every kept token of probability >= xtc_threshold but
 *   the least likely of them, when at least two reach it.
 * - Mirostat 2 keeps the tokens whose surprise -log2 p is at most mu; mirostat 1 keeps
 *   the k most likely, k from Zipf's exponent estimated on the 100 most likely tokens and
 *   mu. After each draw mu -= eta * (surprise of the drawn token - tau); mu starts at
 *   2 tau.
 * - DRY ("don't repeat yourself"): a token that would extend a sequence of n >=
 *   dry_allowed_length tokens repeating an earlier part of the last dry_penalty_last_n
 *   tokens loses dry_multiplier * dry_base^(n - dry_allowed_length) from its logit. A
 *   repeat never reaches back past a sequence breaker: a token whose text contains one
 *   of the breaker strings (llama.cpp's default "\n", ":", "\"", "*"), which is itself
 *   never penalised. */
typedef struct ts_sampling_params {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
    float repetition_penalty;
    int repeat_last_n;
    float presence_penalty;
    float frequency_penalty;
    uint64_t seed;     /* used when has_seed; otherwise the engine supplies a seed */
    bool has_seed;
    bool logprobs;     /* report the chosen token's log-probability */
    int top_logprobs;  /* and this many most likely alternatives */
    int n_logit_bias;  /* entries of logit_bias in use */
    ts_logit_bias logit_bias[TS_SAMPLING_MAX_LOGIT_BIAS]; /* (n_logit_bias) */
    float typical_p;
    float top_n_sigma;
    int min_keep;
    float xtc_probability;
    float xtc_threshold;
    int mirostat;
    float mirostat_tau;
    float mirostat_eta;
    float dry_multiplier;
    float dry_base;
    int dry_allowed_length;
    int dry_penalty_last_n;
    int n_dry_breakers; /* entries of dry_breakers in use */
    char dry_breakers[TS_SAMPLING_MAX_DRY_BREAKERS][TS_SAMPLING_MAX_DRY_BREAKER_LEN]; /* NUL-
                                                                                   * ended */
} ts_sampling_params;

/* OpenAI's defaults: temperature 1, every filter and penalty off, repeat_last_n 64, no
 * seed, no logprobs; the off samplers' own parameters as llama.cpp's (xtc_threshold 0.1,
 * mirostat_tau 5, mirostat_eta 0.1, dry_base 1.75, dry_allowed_length 2,
 * dry_penalty_last_n -1, DRY's four default breakers). */
ts_sampling_params ts_sampling_params_default(void);

/* TS_OK, or TS_ERR_INVALID_ARG with err naming the field, its range and the value.
 * params is borrowed. The one check of these ranges: the engine applies it at submit,
 * the HTTP layer before, to name the request's field. */
ts_status ts_sampling_params_validate(const ts_sampling_params *params, ts_error *err);

/* ts_sampling_params_validate, and *field (may be NULL) receives the name of the member
 * that failed ("top_p"), a static string, or NULL when none did. */
ts_status ts_sampling_params_check(const ts_sampling_params *params, const char **field,
                                   ts_error *err);

/* ts_sampling_params_check, and every logit_bias token below vocab_size (*field is
 * "logit_bias" when one is not). The engine applies it at submit, where the model is
 * known; the HTTP layer too, once it has picked the model, to name the field. */
ts_status ts_sampling_params_check_vocab(const ts_sampling_params *params, int vocab_size,
                                         const char **field, ts_error *err);

#endif /* TESSERA_SAMPLING_H */
