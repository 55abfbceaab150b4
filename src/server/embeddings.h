/* embeddings.h: POST /v1/embeddings (embeddings.c): OpenAI's request shape parsed and
 * checked without a model, and the route that answers it through the engine. */
#ifndef TESSERA_SERVER_EMBEDDINGS_H
#define TESSERA_SERVER_EMBEDDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/openai.h"
#include "tessera/tokenizer.h"

enum {
    EMBED_MAX_INPUTS = 2048,             /* inputs of one request, as OpenAI's */
    EMBED_MAX_TOKENS = OAI_MAX_PROMPT_TOKENS, /* token ids of one input */
};

/* One input: text to tokenize, or token ids given as they are (exactly one set). */
typedef struct embed_input {
    char *text;   /* owned, NUL-terminated, non-empty; NULL for token ids */
    int32_t *ids; /* (n_ids) owned; NULL for text */
    size_t n_ids;
} embed_input;

typedef struct embed_request {
    char *model;          /* owned; NULL: the server's first model */
    embed_input *inputs;  /* (n_inputs) owned, 1..EMBED_MAX_INPUTS */
    size_t n_inputs;
    bool base64;          /* encoding_format "base64": little-endian float32 bytes */
    int dimensions;       /* 0: the model's; else the leading ones, scaled to unit norm */
    bool truncate;        /* over-long inputs keep their first context-length tokens
                           * (else they are a 400 naming the limit) */
} embed_request;

/* Parses and checks body (len bytes, borrowed). On failure e holds the 400 (500 when out
 * of memory) and r is cleared. */
ts_status embed_parse(const char *body, size_t len, embed_request *r, oai_error *e);

/* Frees what r owns and zeroes it; accepts a zeroed one. */
void embed_request_clear(embed_request *r);

/* Writes n bytes of data as base64 (with '=' padding) into out, which holds
 * 4 * ((n + 2) / 3) + 1 bytes, NUL-terminated; returns the characters written. */
size_t embed_base64(char *out, const void *data, size_t n);

/* text (len bytes) as an embedding model's input, as llama-server makes it: special tokens
 * added (BOS, WordPiece's [CLS] ... [SEP], EOS where the vocabulary ends a text with it) and
 * parsed. *ids is malloc'd (NULL on failure); ts_tokenize's codes. */
ts_status embed_tokenize(const ts_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                         size_t *n);

/* v (n floats) as 4n little-endian IEEE-754 bytes into out, whatever the host's order. */
void embed_float_bytes(unsigned char *out, const float *v, int n);

#endif /* TESSERA_SERVER_EMBEDDINGS_H */
