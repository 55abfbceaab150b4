/* rerank.h: POST /v1/rerank (rerank.c, rerank_route.c): the request shape llama-server,
 * Jina and Cohere use, parsed and checked without a model; the reranker's prompt and its
 * score; and the route that answers it through the engine. */
#ifndef TESSERA_SERVER_RERANK_H
#define TESSERA_SERVER_RERANK_H

#include <stdbool.h>
#include <stddef.h>

#include "server/openai.h"
#include "tessera/engine.h"

enum {
    RERANK_MAX_DOCUMENTS = 1024, /* documents of one request */
};

/* The Instruct of Qwen3-Reranker's prompt when the request gives none (its model card's). */
#define RERANK_DEFAULT_INSTRUCTION \
    "Given a web search query, retrieve relevant passages that answer the query"

/* The system turn of Qwen3-Reranker's prompt (its model card's). */
#define RERANK_SYSTEM                                                                      \
    "Judge whether the Document meets the requirements based on the Query and the Instruct " \
    "provided. Note that the answer can only be \"yes\" or \"no\"."

typedef struct rerank_request {
    char *model;        /* owned; NULL: the server's first model */
    char *query;        /* owned, non-empty */
    char *instruction;  /* owned: the request's "instruction", else the default */
    char **documents;   /* (n_documents) owned, 1..RERANK_MAX_DOCUMENTS; each a string or
                         * an object's "text" (may be empty) */
    size_t n_documents;
    size_t top_n;       /* results answered: the best top_n (n_documents when not given
                         * or larger) */
    bool return_documents; /* each result carries {"text": ...} (default false) */
} rerank_request;

/* Parses and checks body (len bytes, borrowed). On failure e holds the 400 (500 when out
 * of memory) and r is cleared. */
ts_status rerank_parse(const char *body, size_t len, rerank_request *r, oai_error *e);

/* Frees what r owns and zeroes it; accepts a zeroed one. */
void rerank_request_clear(rerank_request *r);

/* The user turn of Qwen3-Reranker's prompt, malloc'd (NULL when out of memory):
 * "<Instruct>: I\n<Query>: Q\n<Document>: D". */
char *rerank_user_turn(const char *instruction, const char *query, const char *document);

/* The relevance score from the log-probabilities of "yes" and "no" at the answer's first
 * position (or any two values that differ from their logits by one constant): their
 * softmax's P(yes), computed without overflow. */
double rerank_score(double yes, double no);

/* A scoring request of prompt (n ids, borrowed) into *p: one token generated greedily,
 * with "yes" and "no" raised by the same bias over every other token and the most likely
 * alternatives reported (both among them). The bias cancels in the difference of their
 * log-probabilities, so rerank_event_score's softmax over the two is that of the model's
 * own logits at the prompt's last position. It shares the engine's batched steps and
 * prefix cache with generation. */
void rerank_params(ts_request_params *p, const int32_t *prompt, size_t n, int32_t yes,
                   int32_t no);

/* The score (rerank_score) from the TOKEN event of a rerank_params request; false when
 * "yes" or "no" is not among its alternatives or their difference is not finite. */
bool rerank_event_score(const ts_event *ev, int32_t yes, int32_t no, double *score);

/* A classifier reranker's input (an encoder with rank pooling, bge-reranker) for query
 * and document (borrowed), as llama-server lays it out for a model without a rerank
 * template: BOS where the vocabulary adds one, the query, EOS (else the separator) where
 * it adds EOS, the separator where it adds one, the document, EOS again; each text
 * tokenized plain (no special tokens parsed). *ids is malloc'd (the caller frees it). */
ts_status rerank_pair_ids(const ts_tokenizer *tok, const char *query, const char *document,
                          int32_t **ids, size_t *n);

/* order (n) filled with 0..n-1 sorted by scores (n) descending, ties by index. */
void rerank_order(const double *scores, size_t n, size_t *order);

#endif /* TESSERA_SERVER_RERANK_H */
