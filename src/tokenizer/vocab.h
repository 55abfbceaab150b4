/* vocab.h: a vocabulary as files describe it. Model readers fill one, tokenizer_create()
 * builds a tokenizer from it, and the GGUF writer writes it back out. */
#ifndef TESSERA_TOKENIZER_VOCAB_H
#define TESSERA_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "tessera/tokenizer.h"

typedef enum vocab_kind {
    VOCAB_KIND_SPM, /* tokenizer.ggml.model = "llama": scores, '▁' for space, <0xNN> */
    VOCAB_KIND_BPE, /* tokenizer.ggml.model = "gpt2": merges, byte-to-unicode map */
    VOCAB_KIND_WPM, /* tokenizer.ggml.model = "bert": WordPiece; word-initial pieces carry
                     * '▁', continuations (BERT's "##x") are stored bare */
    VOCAB_KIND_UGM, /* tokenizer.ggml.model = "t5": Unigram (SentencePiece's), scores as
                     * log probabilities, '▁' for space, an optional precompiled charsmap */
} vocab_kind;

/* llama.cpp's token types (tokenizer.ggml.token_type). */
typedef enum vocab_token_type {
    VOCAB_TOKEN_UNDEFINED = 0,
    VOCAB_TOKEN_NORMAL = 1,
    VOCAB_TOKEN_UNKNOWN = 2,
    VOCAB_TOKEN_CONTROL = 3,
    VOCAB_TOKEN_USER_DEFINED = 4,
    VOCAB_TOKEN_UNUSED = 5,
    VOCAB_TOKEN_BYTE = 6,
} vocab_token_type;

typedef struct vocab_token {
    char *text;      /* the token as stored in GGUF ('▁' for space), NUL-terminated */
    uint32_t len;    /* bytes in text, without the NUL */
    float score;     /* SentencePiece merge score; 0 when the file has none */
    int32_t type;    /* vocab_token_type */
} vocab_token;

typedef struct tokenizer_vocab {
    vocab_kind kind;
    int n_tokens;
    vocab_token *tokens;  /* (n_tokens) */
    int n_merges;
    char **merges;        /* (n_merges) "left right", BPE only */
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id; /* -1 when absent */
    /* More tokens the file says end generation: its eom, fim_pad, fim_rep and fim_sep ids
     * (llama.cpp ends on these too). A count, so that a zeroed vocab has none. */
    int32_t eog_extra[4]; /* (n_eog_extra) */
    int n_eog_extra;
    bool add_bos;         /* prompts start with BOS: tokenizer.ggml.add_bos_token, or
                           * vocab_default_add_bos when the file does not say */
    bool add_space_prefix;
    bool add_eos;         /* tokenizer.ggml.add_eos_token (false when absent): llama.cpp
                           * ends texts tokenized with special tokens with EOS
                           * (Qwen3-Embedding pools that last token) */
    /* WordPiece (bert) only: the separator closing a text ([SEP]), whether it is added
     * with the special tokens, and BERT's normalizer (lowercase; fold accents). */
    int32_t sep_id;       /* -1 when absent */
    bool add_sep;
    bool lowercase, strip_accents;
    /* Unigram (t5) only: runs of spaces become one (tokenizer.ggml.
     * remove_extra_whitespaces), and SentencePiece's normalizer
     * (tokenizer.ggml.precompiled_charsmap: a u32 size, that many bytes of XOR-compressed
     * double array, then NUL-terminated replacements), NULL when the file has none. */
    bool remove_extra_whitespaces;
    uint8_t *charsmap;    /* (charsmap_len) owned */
    uint32_t charsmap_len;
    char pre[32];         /* tokenizer.ggml.pre: pre-tokenizer family, "" = default */
} tokenizer_vocab;

/* Frees what the vocab points to (not the struct itself). Accepts half-filled vocabs. */
void vocab_clear(tokenizer_vocab *v);

/* Fills v (zeroed by the caller) from f's tokenizer.ggml.* keys; a model file or a
 * vocabulary-only file. On success the caller owns what v points to (vocab_clear());
 * on failure v is left empty. Ids of 0xFFFFFFFF (llama.cpp's "none") read as -1. */
ts_status vocab_read_gguf(tokenizer_vocab *v, const gguf_file *f, ts_error *err);

/* llama.cpp's answer to "does a prompt start with BOS?" for a file without
 * tokenizer.ggml.add_bos_token: yes for SentencePiece; for byte-level BPE only under the
 * pre-tokenizers it says so for (Llama 3's family), so SmolLM, Qwen2 and GPT-2 get none.
 * Defined in bpe.c, beside its table of pre-tokenizers. */
bool vocab_default_add_bos(vocab_kind kind, const char *pre);

/* Builds a tokenizer from v (copied; the caller keeps v). */
ts_status tokenizer_create(const tokenizer_vocab *v, ts_tokenizer **out, ts_error *err);

/* The vocabulary the tokenizer was built from, for writers (borrowed), as the tokenizer
 * reads it: end-of-turn tokens such as <|im_end|> typed control whatever v said. */
const tokenizer_vocab *tokenizer_get_vocab(const ts_tokenizer *tok);

#endif /* TESSERA_TOKENIZER_VOCAB_H */
