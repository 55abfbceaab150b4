/* tessera/tokenizer.h: text <-> token ids for SentencePiece-style BPE ("llama") and
 * byte-level BPE ("gpt2") vocabularies. */
#ifndef TESSERA_TOKENIZER_H
#define TESSERA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

typedef struct ts_tokenizer ts_tokenizer;

/* Loads the tokenizer of a GGUF file (a full model or a vocabulary-only file). path is
 * borrowed; on success *out owns the tokenizer. */
ts_status ts_tokenizer_load_gguf(const char *path, ts_tokenizer **out, ts_error *err);

/* Loads a llama2.c tokenizer.bin holding vocab_size tokens (the model header's count;
 * <= 0 reads every token in the file). path is borrowed. On success *out owns the
 * tokenizer. Token 0 is <unk>, 1 BOS, 2 EOS; pieces get U+2581 for space. */
ts_status ts_tokenizer_load_llama2c(const char *path, int vocab_size, ts_tokenizer **out,
                                    ts_error *err);

/* Accepts NULL. */
void ts_tokenizer_free(ts_tokenizer *tok);

/* Encodes len bytes of text (copied; need not be NUL-terminated). add_special: BOS first
 * where the vocabulary starts prompts with one (ts_tokenizer_add_bos), as llama.cpp's
 * add_special does; false: never.
 * Writes at most cap ids and sets *n_ids to the number the text needs, which may exceed
 * cap: call again with a larger buffer then. Text that spells a special token ("<s>",
 * "<|endoftext|>") is encoded as plain text, never as that token (ts_tokenize_ex can
 * read them as tokens). Any bytes are accepted: invalid UTF-8 is encoded byte by byte
 * (byte tokens where the vocabulary has them). Returns TS_ERR_TOO_LONG past 512 MiB of
 * text, TS_ERR_NOMEM when scratch memory runs out, TS_ERR_INVALID_ARG for NULL tok or
 * n_ids. */
ts_status ts_tokenize(const ts_tokenizer *tok, const char *text, size_t len, bool add_special,
                      int32_t *ids, size_t cap, size_t *n_ids);

/* A byte range [off, off + len) of a text. */
typedef struct ts_text_span {
    size_t off, len;
} ts_text_span;

/* How ts_tokenize_ex reads a text. Zero-initialised: no BOS, special tokens as plain text
 * (what ts_tokenize does). */
typedef struct ts_tokenize_opts {
    /* BOS first where the vocabulary asks for it (ts_tokenizer_add_bos); a WordPiece
     * vocabulary's [CLS] first and [SEP] last, as llama.cpp frames a bert text whatever its
     * add_bos/add_sep flags; false: never. */
    bool add_special;
    /* With add_special: EOS after the text where the vocabulary ends one with it
     * (ts_tokenizer_text_eos: t5 and other add_eos_token vocabularies), as llama.cpp's
     * tokenizer does for a single text (/tokenize, embeddings). Chat and completion
     * prompts leave it off: their templates end turns themselves, and a prompt that
     * ended with EOS would ask for no continuation. */
    bool add_eos;
    /* A control or user-defined token spelled out in the text ("<|im_start|>", "</s>")
     * becomes that token, as llama.cpp and Hugging Face tokenizers read prompts; the text
     * between such tokens is encoded piece by piece (SentencePiece vocabularies give each
     * piece its space prefix, as llama.cpp does). */
    bool parse_special;
    /* With parse_special: byte ranges that stay plain text whatever they spell (sorted,
     * not overlapping, inside the text; no special token may straddle one). Chat
     * requests put each message's own text here, so a user cannot forge turn markers. */
    const ts_text_span *plain;
    size_t n_plain;
} ts_tokenize_opts;

/* ts_tokenize with options (o may be NULL: all defaults). TS_ERR_INVALID_ARG also for
 * plain spans out of order or outside the text. */
ts_status ts_tokenize_ex(const ts_tokenizer *tok, const char *text, size_t len,
                         const ts_tokenize_opts *o, int32_t *ids, size_t cap, size_t *n_ids);

/* ts_tokenize_ex into a fresh malloc'd array the caller frees (*ids is NULL on failure
 * and may be NULL for an empty result). */
ts_status ts_tokenize_alloc(const ts_tokenizer *tok, const char *text, size_t len,
                            const ts_tokenize_opts *o, int32_t **ids, size_t *n_ids);

/* The bytes token id stands for in decoded text (SentencePiece '▁' as a space, <0xNN> as
 * one byte); *len gets their count. Control tokens (BOS, EOS) decode to nothing. The
 * pointer is borrowed and lives as long as the tokenizer. A token's bytes may be part of
 * a UTF-8 character: join pieces before printing. */
const char *ts_token_bytes(const ts_tokenizer *tok, int32_t id, size_t *len);

/* The token as the vocabulary spells it ("<s>", "▁upon", "<0x0A>"): NUL-terminated,
 * borrowed for the tokenizer's life; "" for an id outside the vocabulary. */
const char *ts_token_text(const ts_tokenizer *tok, int32_t id);

/* The token as llama.cpp shows it with special tokens spelled out (its token_to_piece with
 * special, as /tokenize's with_pieces): control, unknown and user-defined tokens, and
 * the others that decode to nothing, by their text ("<s>", "<unk>", "[CLS]"); an unused
 * token as nothing; the rest as ts_token_bytes. Borrowed for the tokenizer's life, not
 * NUL-terminated; *len gets the byte count. */
const char *ts_token_piece(const ts_tokenizer *tok, int32_t id, size_t *len);

/* Decodes ids into out (at most cap bytes, not NUL-terminated); returns the number of
 * bytes the whole text needs. For SentencePiece vocabularies that add a leading space,
 * the space of the first token is dropped, as SentencePiece does. */
size_t ts_detokenize(const ts_tokenizer *tok, const int32_t *ids, size_t n_ids, char *out,
                     size_t cap);

int ts_tokenizer_vocab_size(const ts_tokenizer *tok);
int32_t ts_tokenizer_bos(const ts_tokenizer *tok); /* -1 if the vocabulary has none */
/* Whether add_special starts a prompt with BOS: the vocabulary has one and says to
 * (tokenizer.ggml.add_bos_token, else llama.cpp's default: yes for SentencePiece and Llama
 * 3's BPE, no for GPT-2, SmolLM, Qwen2 and the other byte-level BPE families). */
bool ts_tokenizer_add_bos(const ts_tokenizer *tok);
/* Whether the vocabulary asks for EOS after a text (tokenizer.ggml.add_eos_token) and has
 * one: rerank pairs take it after each text, as llama.cpp's (ts_tokenize_ex adds it to a
 * single text with add_eos; see ts_tokenizer_text_eos). */
bool ts_tokenizer_add_eos(const ts_tokenizer *tok);
/* Whether a text read with add_special and add_eos ends with EOS, as llama.cpp's tokenizer
 * ends it: the vocabulary asks (ts_tokenizer_add_eos) and is not WordPiece, whose texts end
 * with [SEP] instead. */
bool ts_tokenizer_text_eos(const ts_tokenizer *tok);
int32_t ts_tokenizer_eos(const ts_tokenizer *tok); /* -1 if the vocabulary has none */
/* The separator a pair of texts takes between them where the vocabulary asks for one
 * (tokenizer.ggml.add_sep_token: BERT's [SEP], by default in a bert vocabulary); -1 if it
 * asks for none or has none. */
int32_t ts_tokenizer_sep(const ts_tokenizer *tok);
/* True for tokens that end generation, as llama.cpp decides it: EOS, EOT, the file's
 * eom and fill-in-the-middle ids, and the tokens spelled as llama.cpp's end texts, such as
 * <|eot_id|>, <|im_end|>, <end_of_turn>, <|end|>, <|endoftext|> and </s> (control tokens,
 * whatever type the file gave them, so they print nothing). */
bool ts_token_is_eog(const ts_tokenizer *tok, int32_t id);
/* True for a token of ordinary text: typed normal (or untyped) in the vocabulary and none
 * of BOS, EOS, UNK, PAD, EOT or the end-of-generation tokens. An id past the vocabulary's
 * token list is ordinary unless it ends generation. */
bool ts_token_is_plain(const ts_tokenizer *tok, int32_t id);

#endif /* TESSERA_TOKENIZER_H */
