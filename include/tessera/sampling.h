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
 *
 * Order of application: repetition penalty, then presence/frequency penalties, then
 * logit_bias (each entry added; -100 sets -inf; an id given twice gets both), then
 * greedy (temperature 0) or temperature -> top-k -> softmax -> min-p -> top-p -> draw.
 * The repetition penalty is llama.cpp's: each distinct token among the last
 * repeat_last_n tokens of prompt + generated text has its logit divided by the penalty
 * when positive and multiplied by it otherwise. Presence/frequency are OpenAI's: over the
 * generated tokens only, logit -= presence * (count > 0) + frequency * count. */
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
} ts_sampling_params;

/* OpenAI's defaults: temperature 1, every filter and penalty off, repeat_last_n 64, no
 * seed, no logprobs. */
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
