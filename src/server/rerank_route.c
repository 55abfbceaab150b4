/* rerank_route.c: the POST /v1/rerank handler (also /rerank and /v1/reranking). Each
 * (query, document) pair becomes Qwen3-Reranker's prompt in the model's chat template and
 * one request of the engine, all submitted at once so they share its batched steps (and
 * the prefix cache: the pairs of a request share the prompt up to the document). The
 * pair is scored as rerank_params says; or, for an encoder with a classification head
 * (bge-reranker), the pair is rerank_pair_ids' input embedded, its score the head's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "server/fanout.h"
#include "server/rerank.h"
#include "server/server_internal.h"

/* What the work holds per byte of text and per document, against the server's budget. */
enum { BYTES_PER_TEXT_BYTE = 47, BYTES_PER_DOCUMENT = 4096 };

/* The empty think block that begins the assistant's turn, where the template wrote none. */
static const char THINK_BLOCK[] = "<think>\n\n</think>\n\n";

typedef struct rerank_job {
    const rerank_request *r;
    srv_model *m;
    const ts_tokenizer *tok;
    bool classifier;       /* an encoder's classification head scores each pair (its
                            * first pooled value), not Qwen3-Reranker's "yes" and "no" */
    int32_t yes, no;       /* the answer's two tokens */
    srv_fanout f;          /* each pair's prompt and request */
    double *scores;        /* (n) */
    long long prompt_tokens;
} rerank_job;

static void job_free(rerank_job *j)
{
    srv_fanout_free(&j->f);
    free(j->scores);
}

/* The first token whose bytes are text, as Qwen3-Reranker's convert_tokens_to_ids finds
 * "yes" and "no"; -1 when the vocabulary has none. */
static int32_t token_of(const ts_tokenizer *tok, const char *text)
{
    size_t want = strlen(text);
    for (int32_t id = 0; id < ts_tokenizer_vocab_size(tok); id++) {
        size_t len = 0;
        const char *b = ts_token_bytes(tok, id, &len);
        if (b && len == want && !memcmp(b, text, want))
            return id;
    }
    return -1;
}

/* A pair's chat (the system turn, user as the user turn, thinking off) as the request a
 * template renders: q->chat_vars set (the caller deletes it), messages pointing into msgs. */
static ts_status pair_chat(oai_message msgs[2], char *user, oai_request *q, oai_error *e)
{
    memset(q, 0, sizeof *q);
    q->kind = OAI_CHAT;
    msgs[0] = (oai_message){.role = (char *)"system", .content = (char *)RERANK_SYSTEM};
    msgs[1] = (oai_message){.role = (char *)"user", .content = user};
    q->messages = msgs;
    q->n_messages = 2;
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "messages");
    cJSON *kw = cJSON_AddObjectToObject(root, "chat_template_kwargs");
    for (int k = 0; arr && k < 2; k++) {
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, msg);
        if (!cJSON_AddStringToObject(msg, "role", msgs[k].role) ||
            !cJSON_AddStringToObject(msg, "content", msgs[k].content))
            arr = NULL;
    }
    ts_status st = TS_OK;
    if (!arr || !kw || !cJSON_AddFalseToObject(kw, "enable_thinking"))
        st = oai_error_set(e, 500, NULL, NULL, "out of memory");
    else
        st = oai_chat_vars(root, &q->chat_vars, e);
    cJSON_Delete(root);
    return st;
}

/* ids (n) end with tail (n_tail)? */
static bool ends_with(const int32_t *ids, size_t n, const int32_t *tail, size_t n_tail)
{
    return n >= n_tail && !memcmp(ids + n - n_tail, tail, n_tail * sizeof *tail);
}

/* Appends the think block's tokens to pair i's prompt unless it ends with them. */
static ts_status add_think_block(rerank_job *j, size_t i, oai_error *e)
{
    ts_tokenize_opts o = {.parse_special = true};
    int32_t *think = NULL;
    size_t n_think = 0;
    if (ts_tokenize_alloc(j->tok, THINK_BLOCK, strlen(THINK_BLOCK), &o, &think, &n_think) !=
        TS_OK)
        return oai_error_set(e, 500, NULL, NULL, "cannot tokenize the prompt");
    ts_status st = TS_OK;
    if (!ends_with(j->f.ids[i], j->f.n_ids[i], think, n_think)) {
        int32_t *grown = realloc(j->f.ids[i], (j->f.n_ids[i] + n_think) * sizeof *grown);
        if (!grown)
            st = oai_error_set(e, 500, NULL, NULL, "out of memory");
        else {
            memcpy(grown + j->f.n_ids[i], think, n_think * sizeof *think);
            j->f.ids[i] = grown;
            j->f.n_ids[i] += n_think;
        }
    }
    free(think);
    return st;
}

/* Pair i's prompt as Qwen3-Reranker's chat into j->f.ids[i]. */
static ts_status chat_tokens(rerank_job *j, size_t i, oai_error *e)
{
    char *user = rerank_user_turn(j->r->instruction, j->r->query, j->r->documents[i]);
    if (!user)
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    oai_message msgs[2];
    oai_request q;
    ts_status st = pair_chat(msgs, user, &q, e);
    if (st == TS_OK)
        st = prompt_tokens(&q, j->m, j->tok, &j->f.ids[i], &j->f.n_ids[i], e);
    cJSON_Delete(q.chat_vars);
    free(user);
    if (st == TS_OK)
        st = add_think_block(j, i, e);
    return st;
}

/* Pair i's prompt into j->f.ids[i], checked against the context (a chat's scoring request
 * generates one token; a classifier's input may fill it). */
static ts_status pair_tokens(rerank_job *j, size_t i, oai_error *e)
{
    ts_status st;
    if (!j->classifier)
        st = chat_tokens(j, i, e);
    else if ((st = rerank_pair_ids(j->tok, j->r->query, j->r->documents[i], &j->f.ids[i],
                                   &j->f.n_ids[i])) != TS_OK)
        st = oai_error_set(e, 500, NULL, NULL, "cannot tokenize the pair");
    if (st != TS_OK)
        return st;
    const ts_model_config *cfg = ts_model_get_config(ts_engine_get_model(j->m->engine));
    if (j->f.n_ids[i] + !j->classifier > (size_t)cfg->context_len) {
        char param[32];
        snprintf(param, sizeof param, "documents[%zu]", i);
        return oai_error_set(e, 400, param, "context_length_exceeded",
                             "the query with '%s' is %zu tokens, over the model's limit of "
                             "%d tokens",
                             param, j->f.n_ids[i], cfg->context_len - !j->classifier);
    }
    j->prompt_tokens += (long long)j->f.n_ids[i];
    return TS_OK;
}

/* A pair's request: its prompt, scored (srv_fanout_ops.params). */
static void rerank_item_params(void *ctx, size_t i, const int32_t *ids, size_t n_ids,
                               ts_request_params *p)
{
    (void)i;
    const rerank_job *j = ctx;
    if (j->classifier) { /* an embed request: its pooled row holds the scores */
        ts_request_params_default(p);
        p->prompt = ids;
        p->n_prompt = n_ids;
        p->embed = true;
    } else {
        rerank_params(p, ids, n_ids, j->yes, j->no);
    }
}

/* Pair i's score: a classifier's from its final event's pooled row, else from its token
 * event (srv_fanout_ops.take). */
static ts_status take_score(void *ctx, size_t i, const ts_event *ev, bool *got, oai_error *e)
{
    rerank_job *j = ctx;
    if (*got)
        return TS_OK;
    if (ev->kind == TS_EVENT_DONE && j->classifier && ev->embedding && ev->n_embedding > 0) {
        *got = true;
        j->scores[i] = ev->embedding[0];
        return TS_OK;
    }
    if (ev->kind != TS_EVENT_TOKEN)
        return TS_OK;
    *got = true;
    if (!rerank_event_score(ev, j->yes, j->no, &j->scores[i]))
        return oai_error_set(e, 500, NULL, NULL,
                             "the model's \"yes\" and \"no\" logits are not finite");
    return TS_OK;
}

/* {"object":"list","model":...,"results":[...],"usage":{...}} into b. */
static void write_answer(strbuf *b, const rerank_job *j, const char *model)
{
    const rerank_request *r = j->r;
    size_t *order = malloc(r->n_documents * sizeof *order);
    cJSON *root = cJSON_CreateObject(), *results = NULL;
    bool ok = order && root && cJSON_AddStringToObject(root, "object", "list") &&
              cJSON_AddStringToObject(root, "model", model) &&
              (results = cJSON_AddArrayToObject(root, "results"));
    if (ok)
        rerank_order(j->scores, r->n_documents, order);
    for (size_t k = 0; ok && k < r->top_n; k++) {
        size_t i = order[k];
        cJSON *item = cJSON_CreateObject(), *doc = NULL;
        cJSON_AddItemToArray(results, item);
        ok = item && cJSON_AddNumberToObject(item, "index", (double)i) &&
             cJSON_AddNumberToObject(item, "relevance_score", j->scores[i]);
        if (ok && r->return_documents)
            ok = (doc = cJSON_AddObjectToObject(item, "document")) &&
                 cJSON_AddStringToObject(doc, "text", r->documents[i]);
    }
    cJSON *usage = ok ? cJSON_AddObjectToObject(root, "usage") : NULL;
    ok = usage && cJSON_AddNumberToObject(usage, "prompt_tokens", (double)j->prompt_tokens) &&
         cJSON_AddNumberToObject(usage, "total_tokens", (double)j->prompt_tokens);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    if (text)
        strbuf_add(b, text, strlen(text));
    else
        b->failed = true;
    free(text);
    cJSON_Delete(root);
    free(order);
}

/* Whether m scores pairs: its GGUF's rank pooling, or the server told so. */
static bool is_reranker(const ts_server *srv, const srv_model *m)
{
    const ts_model_config *cfg = ts_model_get_config(ts_engine_get_model(m->engine));
    return cfg->pooling == TS_POOLING_RANK || srv->opts.rerank;
}

/* Every step of the answer but the sending; e set on failure. */
static ts_status run(rerank_job *j, srv_conn *c, oai_error *e)
{
    const rerank_request *r = j->r;
    if (!is_reranker(c->srv, j->m))
        return oai_error_set(e, 400, "model", "model_not_reranker",
                             "the model '%.200s' is not a reranker: its GGUF names no rank "
                             "pooling (pooling_type 4) and the server was not started with "
                             "--rerank", j->m->name);
    const ts_model *model = ts_engine_get_model(j->m->engine);
    j->tok = ts_model_get_tokenizer(model);
    const ts_model_config *cfg = ts_model_get_config(model);
    j->classifier = cfg->encoder;
    if (cfg->encoder && cfg->pooling != TS_POOLING_RANK)
        return oai_error_set(e, 400, "model", "model_not_reranker",
                             "the model '%.200s' is an embedding encoder: only one with rank "
                             "pooling (a classification head) reranks", j->m->name);
    j->yes = j->classifier ? -1 : token_of(j->tok, "yes");
    j->no = j->classifier ? -1 : token_of(j->tok, "no");
    if (!j->classifier && (j->yes < 0 || j->no < 0))
        return oai_error_set(e, 400, "model", "model_not_reranker",
                             "the model '%.200s' cannot rerank: its vocabulary has no "
                             "\"yes\" or no \"no\" token", j->m->name);
    size_t n = r->n_documents;
    size_t need = n * BYTES_PER_DOCUMENT +
                  strlen(r->query) * BYTES_PER_TEXT_BYTE * n;
    for (size_t i = 0; i < n; i++)
        need += strlen(r->documents[i]) * BYTES_PER_TEXT_BYTE;
    if (!srv_reserve(c, need, e))
        return TS_ERR_NOMEM;
    ts_status st = srv_fanout_init(&j->f, n, e);
    if (st != TS_OK)
        return st;
    if (!(j->scores = calloc(n, sizeof *j->scores)))
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; st == TS_OK && i < n; i++)
        st = pair_tokens(j, i, e);
    const srv_fanout_ops ops = {.params = rerank_item_params, .take = take_score, .ctx = j};
    if (st == TS_OK)
        st = srv_fanout_run(&j->f, c, j->m->engine, &ops, e);
    return st;
}

enum MHD_Result rerank_route(struct MHD_Connection *mc, srv_conn *c)
{
    rerank_request r;
    oai_error e;
    if (rerank_parse(c->body.s, c->body.len, &r, &e) != TS_OK)
        return srv_send_error(mc, c, &e);
    srv_model *m = srv_find_model(c->srv, r.model, &e);
    if (!m) {
        rerank_request_clear(&r);
        return srv_send_error(mc, c, &e);
    }
    c->model = m->name;
    rerank_job j = {.r = &r, .m = m};
    ts_status st = run(&j, c, &e);
    strbuf b = {0};
    if (st == TS_OK) {
        c->prompt_tokens = (int)j.prompt_tokens;
        write_answer(&b, &j, m->name);
        if (b.failed || !b.s)
            st = oai_error_set(&e, 500, NULL, NULL, "out of memory");
    }
    job_free(&j);
    rerank_request_clear(&r);
    if (st != TS_OK) {
        strbuf_free(&b);
        return srv_send_error(mc, c, &e);
    }
    return srv_send(mc, c, 200, "application/json", b.s, b.len);
}
