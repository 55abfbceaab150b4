/* embed_route.c: the POST /v1/embeddings handler: each input tokenized (or taken as token
 * ids) and checked against the context, all submitted as embed requests at once, their
 * vectors gathered and answered as OpenAI's list of embeddings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/l2norm.h"
#include "common/strbuf.h"
#include "server/embeddings.h"
#include "server/fanout.h"
#include "server/server_internal.h"

/* What the answer and the work hold per input dimension (a float printed in JSON) and per
 * byte of text (the tokenizer's work and ids), counted against the server's budget. */
enum { BYTES_PER_DIM = 20, BYTES_PER_TEXT_BYTE = 47, BYTES_PER_INPUT = 256 };

/* The request's inputs as token ids, and then their vectors. */
typedef struct embed_job {
    const embed_request *r;
    const ts_model_config *cfg;
    int dims;             /* dimensions answered */
    srv_fanout f;         /* each input's tokens and request */
    float *vectors;       /* (n, dims) */
    long long prompt_tokens;
} embed_job;

static void job_free(embed_job *j)
{
    srv_fanout_free(&j->f);
    free(j->vectors);
}

/* Input i's tokens: its ids, or its text tokenized as llama-server does (special tokens
 * added and parsed); cut to the context when the request asks, else a 400 over it. */
static ts_status input_tokens(embed_job *j, const ts_tokenizer *tok, size_t i, oai_error *e)
{
    const embed_input *in = &j->r->inputs[i];
    char param[32];
    snprintf(param, sizeof param, j->r->n_inputs == 1 ? "input" : "input[%zu]", i);
    if (in->text) {
        ts_status st = embed_tokenize(tok, in->text, strlen(in->text), &j->f.ids[i], &j->f.n_ids[i]);
        if (st == TS_ERR_TOO_LONG)
            return oai_error_set(e, 400, param, "context_length_exceeded",
                                 "'%s' is too long to tokenize", param);
        if (st != TS_OK)
            return oai_error_set(e, 500, NULL, NULL, "tokenization failed: %s",
                                 ts_status_str(st));
        if (j->f.n_ids[i] == 0)
            return oai_error_set(e, 400, param, "invalid_value", "'%s' has no tokens", param);
    } else {
        if (!(j->f.ids[i] = malloc(in->n_ids * sizeof(int32_t))))
            return oai_error_set(e, 500, NULL, NULL, "out of memory");
        memcpy(j->f.ids[i], in->ids, in->n_ids * sizeof(int32_t));
        j->f.n_ids[i] = in->n_ids;
    }
    size_t limit = (size_t)j->cfg->context_len;
    if (j->f.n_ids[i] > limit) {
        if (!j->r->truncate)
            return oai_error_set(e, 400, param, "context_length_exceeded",
                                 "'%s' is %zu tokens, over the model's limit of %zu tokens "
                                 "(set \"truncate\": true to keep the first %zu)",
                                 param, j->f.n_ids[i], limit, limit);
        j->f.n_ids[i] = limit;
    }
    j->prompt_tokens += (long long)j->f.n_ids[i];
    return TS_OK;
}

/* An input's request: its tokens, embedded (srv_fanout_ops.params). */
static void embed_params(void *ctx, size_t i, const int32_t *ids, size_t n_ids,
                         ts_request_params *p)
{
    (void)ctx;
    (void)i;
    ts_request_params_default(p);
    p->prompt = ids;
    p->n_prompt = n_ids;
    p->embed = true;
}

/* Input i's vector from its final event: the leading dims, scaled to unit norm
 * (srv_fanout_ops.take). */
static ts_status take_vector(void *ctx, size_t i, const ts_event *ev, bool *got, oai_error *e)
{
    (void)e;
    embed_job *j = ctx;
    if (ev->kind == TS_EVENT_DONE && ev->embedding && ev->n_embedding >= j->dims) {
        float *v = j->vectors + i * (size_t)j->dims;
        memcpy(v, ev->embedding, (size_t)j->dims * sizeof(float));
        if (j->dims < ev->n_embedding)
            l2_normalize(v, j->dims);
        *got = true;
    }
    return TS_OK;
}

/* {"object":"list","data":[...],"model":...,"usage":{...}} into b. */
static void write_answer(strbuf *b, const embed_job *j, const char *model)
{
    cJSON *name = cJSON_CreateString(model);
    char *quoted = name ? cJSON_PrintUnformatted(name) : NULL;
    cJSON_Delete(name);
    if (!quoted) {
        b->failed = true;
        return;
    }
    char *b64 = j->r->base64 ? malloc(4 * (((size_t)j->dims * 4 + 2) / 3) + 1) : NULL;
    unsigned char *bytes = j->r->base64 ? malloc((size_t)j->dims * 4) : NULL;
    if (j->r->base64 && (!b64 || !bytes))
        b->failed = true;
    strbuf_addf(b, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; !b->failed && i < j->r->n_inputs; i++) {
        const float *v = j->vectors + i * (size_t)j->dims;
        strbuf_addf(b, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "",
                    i);
        if (j->r->base64) {
            embed_float_bytes(bytes, v, j->dims);
            embed_base64(b64, bytes, (size_t)j->dims * 4);
            strbuf_addf(b, "\"%s\"}", b64);
            continue;
        }
        strbuf_add(b, "[", 1);
        for (int d = 0; d < j->dims; d++)
            strbuf_addf(b, d ? ",%.9g" : "%.9g", isfinite(v[d]) ? (double)v[d] : 0.0);
        strbuf_add(b, "]}", 2);
    }
    strbuf_addf(b, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}",
                quoted, j->prompt_tokens, j->prompt_tokens);
    free(quoted);
    free(b64);
    free(bytes);
}

/* Every step of the answer but the sending; e set on failure. */
static ts_status run(embed_job *j, srv_conn *c, srv_model *m, oai_error *e)
{
    const embed_request *r = j->r;
    const ts_model *model = ts_engine_get_model(m->engine);
    j->cfg = ts_model_get_config(model);
    if (j->cfg->pooling == TS_POOLING_NONE || j->cfg->pooling == TS_POOLING_RANK)
        return oai_error_set(e, 400, "model", "model_not_embedding",
                             "the model '%.200s' serves no embeddings: its GGUF names %s "
                             "(%s.pooling_type)", m->name,
                             j->cfg->pooling == TS_POOLING_RANK ? "rank pooling (a reranker)"
                                                                : "no pooling",
                             j->cfg->arch);
    if (r->dimensions > j->cfg->dim)
        return oai_error_set(e, 400, "dimensions", "invalid_value",
                             "'dimensions' is %d, over the model's %d", r->dimensions,
                             j->cfg->dim);
    j->dims = r->dimensions ? r->dimensions : j->cfg->dim;
    size_t need = r->n_inputs * ((size_t)j->dims * BYTES_PER_DIM + BYTES_PER_INPUT);
    for (size_t i = 0; i < r->n_inputs; i++)
        need += r->inputs[i].text ? strlen(r->inputs[i].text) * BYTES_PER_TEXT_BYTE
                                  : r->inputs[i].n_ids * sizeof(int32_t);
    if (!srv_reserve(c, need, e))
        return TS_ERR_NOMEM;
    size_t n = r->n_inputs;
    ts_status st = srv_fanout_init(&j->f, n, e);
    if (st != TS_OK)
        return st;
    if (!(j->vectors = malloc(n * (size_t)j->dims * sizeof(float))))
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    const ts_tokenizer *tok = ts_model_get_tokenizer(model);
    for (size_t i = 0; st == TS_OK && i < n; i++)
        st = input_tokens(j, tok, i, e);
    const srv_fanout_ops ops = {.params = embed_params, .take = take_vector, .ctx = j};
    if (st == TS_OK)
        st = srv_fanout_run(&j->f, c, m->engine, &ops, e);
    return st;
}

enum MHD_Result embed_route(struct MHD_Connection *mc, srv_conn *c)
{
    embed_request r;
    oai_error e;
    if (embed_parse(c->body.s, c->body.len, &r, &e) != TS_OK)
        return srv_send_error(mc, c, &e);
    srv_model *m = srv_find_model(c->srv, r.model, &e);
    if (!m) {
        embed_request_clear(&r);
        return srv_send_error(mc, c, &e);
    }
    c->model = m->name;
    embed_job j = {.r = &r};
    ts_status st = run(&j, c, m, &e);
    strbuf b = {0};
    if (st == TS_OK) {
        c->prompt_tokens = (int)j.prompt_tokens;
        write_answer(&b, &j, m->name);
        if (b.failed || !b.s)
            st = oai_error_set(&e, 500, NULL, NULL, "out of memory");
    }
    job_free(&j);
    embed_request_clear(&r);
    if (st != TS_OK) {
        strbuf_free(&b);
        return srv_send_error(mc, c, &e);
    }
    return srv_send(mc, c, 200, "application/json", b.s, b.len);
}
