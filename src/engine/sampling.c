/* sampling.c: defaults and validation of the public sampling parameters. */
#include <string.h>

#include "tessera/sampling.h"

ts_sampling_params ts_sampling_params_default(void)
{
    return (ts_sampling_params){
        .temperature = 1.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repetition_penalty = 1.0f,
        .repeat_last_n = 64,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .seed = 0,
        .has_seed = false,
        .logprobs = false,
        .top_logprobs = 0,
        .n_logit_bias = 0,
        .typical_p = 1.0f,
        .top_n_sigma = -1.0f,
        .min_keep = 0,
        .xtc_probability = 0.0f,
        .xtc_threshold = 0.1f,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
        .dry_multiplier = 0.0f,
        .dry_base = 1.75f,
        .dry_allowed_length = 2,
        .dry_penalty_last_n = -1,
        .n_dry_breakers = 4,
        .dry_breakers = {"\n", ":", "\"", "*"},
    };
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* Written so that NaN fails every check; names the field in *bad. */
#define CHECK_RANGE(cond, field, range, value)                                         \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            *bad = field;                                                              \
            return ts_error_set(err, TS_ERR_INVALID_ARG, field " must be in " range    \
                                ", got %g", (double)(value));                          \
        }                                                                              \
    } while (0)

/* The samplers of llama.cpp's and vLLM's requests (typical-p ... DRY). */
static ts_status check_llama_samplers(const ts_sampling_params *p, const char **bad,
                                      ts_error *err)
{
    CHECK_RANGE(p->typical_p > 0.0f && p->typical_p <= 1.0f, "typical_p", "(0, 1]",
                p->typical_p);
    CHECK_RANGE(p->top_n_sigma >= -1e30f && p->top_n_sigma <= 100.0f, "top_n_sigma",
                "(-inf, 100]", p->top_n_sigma);
    CHECK_RANGE(p->min_keep >= 0, "min_keep", "[0, inf)", p->min_keep);
    CHECK_RANGE(p->xtc_probability >= 0.0f && p->xtc_probability <= 1.0f, "xtc_probability",
                "[0, 1]", p->xtc_probability);
    CHECK_RANGE(p->xtc_threshold >= 0.0f && p->xtc_threshold <= 1.0f, "xtc_threshold",
                "[0, 1]", p->xtc_threshold);
    CHECK_RANGE(p->mirostat >= 0 && p->mirostat <= 2, "mirostat", "{0, 1, 2}", p->mirostat);
    CHECK_RANGE(p->mirostat_tau >= 0.0f && p->mirostat_tau <= 100.0f, "mirostat_tau",
                "[0, 100]", p->mirostat_tau);
    CHECK_RANGE(p->mirostat_eta >= 0.0f && p->mirostat_eta <= 1.0f, "mirostat_eta", "[0, 1]",
                p->mirostat_eta);
    CHECK_RANGE(p->dry_multiplier >= 0.0f && p->dry_multiplier <= 100.0f, "dry_multiplier",
                "[0, 100]", p->dry_multiplier);
    CHECK_RANGE(p->dry_base >= 0.0f && p->dry_base <= 100.0f, "dry_base", "[0, 100]",
                p->dry_base);
    CHECK_RANGE(p->dry_allowed_length >= 0, "dry_allowed_length", "[0, inf)",
                p->dry_allowed_length);
    CHECK_RANGE(p->dry_penalty_last_n >= -1, "dry_penalty_last_n", "[-1, inf)",
                p->dry_penalty_last_n);
    CHECK_RANGE(p->n_dry_breakers >= 0 && p->n_dry_breakers <= TS_SAMPLING_MAX_DRY_BREAKERS,
                "dry_sequence_breakers", "[0, " STR(TS_SAMPLING_MAX_DRY_BREAKERS) "] entries",
                p->n_dry_breakers);
    for (int i = 0; i < p->n_dry_breakers; i++) {
        size_t n = strnlen(p->dry_breakers[i], TS_SAMPLING_MAX_DRY_BREAKER_LEN);
        CHECK_RANGE(n >= 1 && n < TS_SAMPLING_MAX_DRY_BREAKER_LEN, "dry_sequence_breakers",
                    "[1, " STR(TS_SAMPLING_MAX_DRY_BREAKER_LEN) ") bytes each", (double)n);
    }
    return TS_OK;
}

ts_status ts_sampling_params_validate(const ts_sampling_params *p, ts_error *err)
{
    return ts_sampling_params_check(p, NULL, err);
}

ts_status ts_sampling_params_check(const ts_sampling_params *p, const char **field,
                                   ts_error *err)
{
    const char *unused, **bad = field ? field : &unused;
    *bad = NULL;
    if (!p)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampling params are NULL");
    CHECK_RANGE(p->temperature >= 0.0f && p->temperature <= 2.0f, "temperature", "[0, 2]",
                p->temperature);
    CHECK_RANGE(p->top_k >= 0, "top_k", "[0, inf)", p->top_k);
    CHECK_RANGE(p->top_p > 0.0f && p->top_p <= 1.0f, "top_p", "(0, 1]", p->top_p);
    CHECK_RANGE(p->min_p >= 0.0f && p->min_p <= 1.0f, "min_p", "[0, 1]", p->min_p);
    CHECK_RANGE(p->repetition_penalty > 0.0f && p->repetition_penalty <= 10.0f,
                "repetition_penalty", "(0, 10]", p->repetition_penalty);
    CHECK_RANGE(p->repeat_last_n >= -1, "repeat_last_n", "[-1, inf)", p->repeat_last_n);
    CHECK_RANGE(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f,
                "presence_penalty", "[-2, 2]", p->presence_penalty);
    CHECK_RANGE(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f,
                "frequency_penalty", "[-2, 2]", p->frequency_penalty);
    CHECK_RANGE(p->top_logprobs >= 0 && p->top_logprobs <= TS_SAMPLING_MAX_TOP_LOGPROBS,
                "top_logprobs", "[0, " STR(TS_SAMPLING_MAX_TOP_LOGPROBS) "]", p->top_logprobs);
    if (p->top_logprobs > 0 && !p->logprobs) {
        *bad = "top_logprobs";
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "top_logprobs = %d requires logprobs to be true", p->top_logprobs);
    }
    CHECK_RANGE(p->n_logit_bias >= 0 && p->n_logit_bias <= TS_SAMPLING_MAX_LOGIT_BIAS,
                "logit_bias", "[0, " STR(TS_SAMPLING_MAX_LOGIT_BIAS) "] entries",
                p->n_logit_bias);
    for (int i = 0; i < p->n_logit_bias; i++) {
        const ts_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0) {
            *bad = "logit_bias";
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "logit_bias token ids must be >= 0, got %d", (int)b->token);
        }
        CHECK_RANGE(b->bias >= -100.0f && b->bias <= 100.0f, "logit_bias", "[-100, 100]",
                    b->bias);
    }
    return check_llama_samplers(p, bad, err);
}

ts_status ts_sampling_params_check_vocab(const ts_sampling_params *p, int vocab_size,
                                         const char **field, ts_error *err)
{
    ts_status st = ts_sampling_params_check(p, field, err);
    if (st != TS_OK)
        return st;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token >= vocab_size) {
            if (field)
                *field = "logit_bias";
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "logit_bias token %d is outside the vocabulary of %d tokens",
                                (int)p->logit_bias[i].token, vocab_size);
        }
    return TS_OK;
}
