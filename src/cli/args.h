/* args.h: option parsing and model loading shared by the subcommands. Each parser prints
 * "tessera: ..." naming the option on a bad value and returns false. Numbers are decimal
 * and start with a digit (or '-' where the range allows): no white space, no '+'. */
#ifndef TESSERA_CLI_ARGS_H
#define TESSERA_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera/engine.h"
#include "tessera/model.h"

bool cli_int(const char *opt, const char *s, long min, long max, int *out);
bool cli_float(const char *opt, const char *s, double min, double max, float *out);
bool cli_u64(const char *opt, const char *s, uint64_t *out);
/* "1,4,16": 1..cap integers in min..max into out, their count in *n. Empty items ("1,,2",
 * "1,") are refused. */
bool cli_int_list(const char *opt, const char *s, long min, long max, int *out, int cap,
                  int *n);
/* "512M", "2G", "1.5G", plain bytes. */
bool cli_size(const char *opt, const char *s, size_t *out);

/* The value after option argv[*i]; advances *i. NULL (with a message) when missing. */
const char *cli_value(int argc, char **argv, int *i);

/* A command's options for cli_parse: -h/--help, the shared ones it takes, and its own. */
typedef struct cli_spec {
    const char *name;                /* "generate", for "tessera generate: unknown option" */
    void (*usage)(FILE *out);        /* to stdout for --help, to stderr after an unknown one */
    const char *const *flags;        /* its own options without a value, NULL-terminated;
                                      * every other option takes one; may be NULL */
    const char **model, **tokenizer; /* -m/--model, --tokenizer land here; NULL: not taken */
    ts_engine_options *engine;       /* cli_engine_option's land here; NULL: not taken */
    /* Takes its own option a with value v (NULL for a flag): 1 taken, 0 not one of its
     * options, -1 after printing why v is bad. NULL: it has none. */
    int (*own)(void *ctx, const char *a, const char *v);
    void *ctx;
    ts_model_load_opts *load;        /* cli_load_option's land here; NULL: not taken */
} cli_spec;

/* Runs a command's option loop over argv[1..argc-1]: -1 when all were taken, 0 after
 * printing the help, 2 after printing why an option is bad or unknown. */
int cli_parse(int argc, char **argv, const cli_spec *s);

/* Options every engine-running command shares (help text below). Looks at argv[*i]:
 * returns 1 when it was one of them (its value consumed, *i advanced), 0 when it was
 * not, -1 after printing why its value was bad. */
int cli_engine_option(int argc, char **argv, int *i, ts_engine_options *o);
/* Frees the draft model --draft-model loaded into o (none: nothing); o->draft_model is
 * NULL after. Call it once the engines that borrow it are destroyed. */
void cli_free_draft_model(ts_engine_options *o);

/* "auto", "f32", "f16" or "q8_0": the name --kv-type takes for t, and logs and bench print. */
const char *cli_kv_type_name(ts_kv_type t);

#define CLI_ENGINE_HELP                                                                   \
    "engine:\n"                                                                            \
    "  --threads N, -t N    OpenMP threads per step (default: one per physical core)\n"    \
    "  --kv-mem SIZE        KV cache size, e.g. 512M, 2G (default: max-seqs full contexts\n" \
    "                       + 2 blocks each, at most 1G, at least one context)\n"         \
    "  --kv-type T          how keys and values are stored: auto (f32 for an all-f32\n"     \
    "                       model, else f16, as llama.cpp), f32, f16 or q8_0 (int8, a\n"   \
    "                       scale per 32: half f16's bytes); --kv-f16 = f16\n"           \
    "  --max-seqs N         sequences decoding at once (64)\n"                              \
    "  --max-queue N        waiting requests before new ones are refused (1024)\n"          \
    "  --step-tokens N      token budget of one step (512; an encoder's 4096)\n"           \
    "  --itl-target X       a step that decodes takes prompt tokens while it lasts at most\n" \
    "                       X times a step decoding the whole batch alone (measured; 1.5;\n"  \
    "                       0 = a fixed --prefill-cap)\n"                                    \
    "  --prefill-min N      prompt tokens such a step takes at least (32)\n"                 \
    "  --prefill-cap N      prompt tokens in a step that also decodes with --itl-target 0\n" \
    "                       and until steps are timed; at most that many after (128)\n"      \
    "  --aging R            priority levels a waiting request gains per second (0.1)\n"     \
    "  --no-prefix-cache    never share KV blocks between requests\n"                      \
    "  --spec KIND          speculative decoding: ngram (prompt lookup), draft (a draft\n"   \
    "                       model's greedy tokens; prompt lookup unused) or off (off)\n"   \
    "  --draft-model FILE   a small model of the same vocabulary that drafts (loaded with\n" \
    "                       default options; selects --spec draft unless --spec came first)\n" \
    "  --spec-max N         draft tokens a sequence adds to a step, at most (8, 1..64)\n"   \
    "  --spec-rows N        drafts fill a step only up to N rows (16)\n"                    \
    "  --spec-eager         draft as deep as --spec-max allows whatever steps cost (by\n"   \
    "                       default a draft must be likelier accepted than its row costs)\n"

/* Model-loading options of the commands that run models: --mlock, --hugepages, --pack MODE
 * (help below), at argv[*i] (*i moves past a value). Returns 1 when taken, 0 when not one
 * of them, -1 after printing why a value is missing or wrong. */
int cli_load_option(int argc, char **argv, int *i, ts_model_load_opts *o);

#define CLI_LOAD_HELP                                                                     \
    "model memory:\n"                                                                      \
    "  --mlock              lock the mapped model file in RAM (RLIMIT_MEMLOCK must allow)\n" \
    "  --hugepages          advise transparent huge pages for the mapped model file\n"     \
    "  --pack MODE          repack weight matrices at load, 16 rows interleaved for the\n" \
    "                       AVX-512 VNNI and AMX kernels: auto (default: Q8_0, Q4_0,\n"    \
    "                       Q4_K, Q5_K, Q6_K where such a kernel runs), off (compute on\n" \
    "                       the file's blocks), all (F16/BF16 too, on AMX bf16 tiles,\n"   \
    "                       activations rounded to bf16), force (whatever the CPU; tests)\n"

/* The model to use when none is named: cli_model_path(NULL, NULL, ...) (models.h) in a
 * static buffer; NULL, after printing every place it looked, when there is none. */
const char *cli_default_model(void);

/* Loads path (and tokenizer, for llama2.c checkpoints) with opts (borrowed; NULL for the
 * defaults; its tokenizer_path is ignored) and logs one line to stderr; on failure prints
 * the error and returns NULL. */
ts_model *cli_load_model(const char *path, const char *tokenizer_path,
                         const ts_model_load_opts *opts);

/* The engine options the environment sets, for the library reads none itself:
 * TESSERA_GEMM (auto, blas or kernel: the step's GEMM; unset or empty: o's) and
 * TESSERA_FAIL_ALLOC_AT (fault injection, when o's fail_alloc_at is 0). TS_ERR_INVALID_ARG
 * naming the variable and its value when one is malformed. */
ts_status cli_env_engine_options(ts_engine_options *o, ts_error *err);

/* The engine of a command that runs model m (borrowed; it must outlive the engine):
 * opts (copied) with the environment applied. On failure prints why and returns NULL. */
ts_engine *cli_make_engine(const ts_model *m, const ts_engine_options *opts);

#endif
