/* tokenizer_impl.h: the tokenizer's insides, shared by tokenizer.c and the encoders
 * (spm.c, bpe.c). Nothing outside src/tokenizer/ includes this. Grouped by the file that
 * defines each part: tokenizer.c calls down into spm.c and bpe.c, all three into
 * tokenizer_util.c; the encoders call nothing of tokenizer.c's (what they share with it,
 * tokenizer_out, tokenizer_emit and TOKENIZER_MAX_TEXT, lives here). */
#ifndef TESSERA_TOKENIZER_IMPL_H
#define TESSERA_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/vocab.h"

/* ---- tokenizer_util.c: the hash map, the merge heap, UTF-8 */

/* Open-addressing map from byte strings to int32 values. Keys are borrowed: they must
 * outlive the map. Putting an existing key overwrites its value (last one wins, as in
 * llama.cpp's token_to_id). */
typedef struct tokenizer_map_entry {
    const char *key; /* NULL = empty slot */
    uint32_t len;
    int32_t val;
} tokenizer_map_entry;

typedef struct tokenizer_map {
    tokenizer_map_entry *slots; /* (mask + 1) */
    size_t mask;
} tokenizer_map;

ts_status tokenizer_map_init(tokenizer_map *m, size_t n_keys);
void tokenizer_map_free(tokenizer_map *m);
void tokenizer_map_put(tokenizer_map *m, const char *key, uint32_t len, int32_t val);
/* The value of key (len bytes), or -1. */
int32_t tokenizer_map_get(const tokenizer_map *m, const char *key, size_t len);

/* A candidate merge of symbols left and right, valid while their sizes still add up. */
typedef struct tokenizer_bigram {
    int left, right;
    float score;
    size_t size;
} tokenizer_bigram;

/* Max-heap of bigrams: the higher score first, then the leftmost pair (llama.cpp's
 * order). BPE uses score = -rank. */
typedef struct tokenizer_heap {
    tokenizer_bigram *v;
    size_t n, cap;
} tokenizer_heap;

int tokenizer_heap_push(tokenizer_heap *h, tokenizer_bigram b); /* -1: out of memory */
tokenizer_bigram tokenizer_heap_pop(tokenizer_heap *h);         /* h->n > 0 */
void tokenizer_heap_free(tokenizer_heap *h);

/* Length of the UTF-8 character starting at s[0] (n > 0 bytes available): 1 for a byte
 * that does not begin a well-formed character, whose *cp is then U+FFFD. */
size_t tokenizer_utf8_next(const char *s, size_t n, uint32_t *cp);

/* ---- the tokenizer (tokenizer.c builds it) and where the encoders write */

/* Where encoders write ids: ids[0..cap) receive the first cap ids, n counts them all. */
typedef struct tokenizer_out {
    int32_t *ids;
    size_t cap;
    size_t n;
} tokenizer_out;

static inline void tokenizer_emit(tokenizer_out *o, int32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

typedef struct bpe_state bpe_state;
typedef struct ugm_state ugm_state;

/* A node of a byte trie of token texts (the special tokens', WordPiece's and Unigram's
 * pieces): the text spelled from the root (node 0) to it is a prefix of some token's. Its
 * children form a list (first_child, then each one's next). */
typedef struct special_node {
    int32_t first_child, next; /* -1: none */
    int32_t token;             /* the token spelled exactly so, or -1 */
    uint8_t byte;              /* the byte that leads here from the parent */
} special_node;

/* The child of node reached by byte b, or -1. */
int32_t tokenizer_trie_child(const special_node *t, int32_t node, uint8_t b);

/* Which token stands for texts spelled alike in tokenizer_trie_build's trie. */
typedef enum { TRIE_FIRST_ID, TRIE_LAST_ID } trie_duplicates;

/* *out = a byte trie (free() it) of the texts of v's tokens that keep accepts (every token
 * when keep is NULL; empty texts never); what names them in an error. */
ts_status tokenizer_trie_build(special_node **out, const tokenizer_vocab *v,
                               bool (*keep)(const vocab_token *t), trie_duplicates dup,
                               const char *what, ts_error *err);

struct ts_tokenizer {
    tokenizer_vocab vocab;     /* deep copy of what tokenizer_create() was given */
    tokenizer_map text_to_id;  /* vocab.tokens[i].text -> i */
    char *pieces;              /* decoded bytes of every token, back to back */
    uint32_t *piece_off;       /* (n_tokens + 1) token i decodes to pieces[off[i], off[i+1]) */
    int32_t byte_token[256];   /* SPM: the token for a raw byte (<0xNN>), -1 if none */
    int32_t eog[48];           /* end-of-generation ids: EOS, EOT, the file's eom and FIM
                                * ids, <|im_end|>-like tokens (eog_texts in tokenizer.c) */
    int n_eog;
    bpe_state *bpe;            /* byte-level BPE tables; NULL for SPM */
    special_node *special;     /* byte trie of the control and user-defined tokens' texts,
                                * node 0 its root */
    int32_t n_special;         /* tokens in it */
    special_node *wpm_trie;    /* WordPiece: byte trie of every token's text, node 0 its
                                * root (a token's last duplicate stands for it); else NULL */
    ugm_state *ugm;            /* Unigram tables; else NULL */
};

/* The longest text the encoders take (512 MiB): their scratch indexes it with int32 and
 * holds up to 4 bytes per input byte. */
#define TOKENIZER_MAX_TEXT ((size_t)INT32_MAX / 4)

/* ---- spm.c */

/* SentencePiece-BPE encoding of len bytes of text, without BOS (spm.c). */
ts_status tokenizer_spm_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out);

/* ---- bpe.c */

/* Byte-level BPE (bpe.c): tables built from the vocab's merges, the encoder, and the
 * decoding of one token's text back to bytes (appended to dst, which must hold len bytes;
 * returns the number written). */
ts_status tokenizer_bpe_init(ts_tokenizer *tok, ts_error *err);
/* A pre-tokenizer: the end of the word that starts at pos (pos < n). */
typedef size_t (*bpe_split_fn)(const char *s, size_t n, size_t pos);
/* The pre-tokenizer of a tokenizer.ggml.pre name; NULL for one we do not know. */
bpe_split_fn tokenizer_bpe_splitter(const char *pre);
void tokenizer_bpe_free(bpe_state *b);
ts_status tokenizer_bpe_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out);
size_t tokenizer_bpe_decode_text(char *dst, const char *text, size_t len);

/* ---- wordpiece.c */

/* Builds tok->wpm_trie from tok->vocab. */
ts_status tokenizer_wpm_init(ts_tokenizer *tok, ts_error *err);
/* WordPiece (BERT) encoding of len bytes of text, without [CLS] / [SEP]: the normalizer
 * and BERT's basic split into words, then each word greedily as its longest pieces. */
ts_status tokenizer_wpm_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out);

/* ---- unigram.c */

/* Unigram (t5) tables built from tok->vocab: the pieces' trie, the user-defined tokens'
 * trie, the unknown token's score; the charsmap stays in tok->vocab. */
ts_status tokenizer_ugm_init(ts_tokenizer *tok, ts_error *err);
void tokenizer_ugm_free(ugm_state *u);
/* Unigram encoding of len bytes of text, without BOS / EOS: SentencePiece's normalizer
 * (the charsmap, spaces as '▁'), then the segmentation of highest total score (Viterbi),
 * a character no piece covers as the unknown token, runs of unknowns as one. */
ts_status tokenizer_ugm_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out);

#endif /* TESSERA_TOKENIZER_IMPL_H */
