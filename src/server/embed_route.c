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
#include "server/server_internal.h"

/* How long one wait for an embedding lasts before it looks at the server's stopping flag;
 * the most inputs of one request in the engine at once (submit_and_gather). */
enum { EMBED_POLL_MS = 100, EMBED_WINDOW = 256 };

/* What the answer and the work hold per input dimension (a float printed in JSON) and per
 * byte of text (the tokenizer's work and ids), counted against the server's budget. */
enum { BYTES_PER_DIM = 20, BYTES_PER_TEXT_BYTE = 47, BYTES_PER_INPUT = 256 };

/* The request's inputs as token ids, and then their vectors. */
typedef struct embed_job {
    const embed_request *r;
    const ts_model_config *cfg;
    int dims;             /* dimensions answered */
    int32_t **ids;        /* (n) each input's tokens (owned) */
    size_t *n_ids;        /* (n) */
    ts_request **reqs;    /* (n) submitted requests, NULL where none */
    float *vectors;       /* (n, dims) */
    long long prompt_tokens;
} embed_job;

static void job_free(embed_job *j, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (j->ids)
            free(j->ids[i]);
        if (j->reqs)
            ts_request_release(j->reqs[i]);
    }
    free(j->ids);
    free(j->n_ids);
    free(j->reqs);
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
        ts_status st = embed_tokenize(tok, in->text, strlen(in->text), &j->ids[i], &j->n_ids[i]);
        if (st == TS_ERR_TOO_LONG)
            return oai_error_set(e, 400, param, "context_length_exceeded",
                                 "'%s' is too long to tokenize", param);
        if (st != TS_OK)
            return oai_error_set(e, 500, NULL, NULL, "tokenization failed: %s",
                                 ts_status_str(st));
        if (j->n_ids[i] == 0)
            return oai_error_set(e, 400, param, "invalid_value", "'%s' has no tokens", param);
    } else {
        if (!(j->ids[i] = malloc(in->n_ids * sizeof(int32_t))))
            return oai_error_set(e, 500, NULL, NULL, "out of memory");
        memcpy(j->ids[i], in->ids, in->n_ids * sizeof(int32_t));
        j->n_ids[i] = in->n_ids;
    }
    size_t limit = (size_t)j->cfg->context_len;
    if (j->n_ids[i] > limit) {
        if (!j->r->truncate)
            return oai_error_set(e, 400, param, "context_length_exceeded",
                                 "'%s' is %zu tokens, over the model's limit of %zu tokens "
                                 "(set \"truncate\": true to keep the first %zu)",
                                 param, j->n_ids[i], limit, limit);
        j->n_ids[i] = limit;
    }
    j->prompt_tokens += (long long)j->n_ids[i];
    return TS_OK;
}

/* Submits input i as an embed request of m's engine: the engine's status. */
static ts_status submit_one(embed_job *j, srv_conn *c, srv_model *m, size_t i, ts_error *err)
{
    ts_request_params p;
    ts_request_params_default(&p);
    p.prompt = j->ids[i];
    p.n_prompt = j->n_ids[i];
    p.embed = true;
    p.priority = c->batch ? TS_PRIORITY_LOW : c->priority;
    p.cache_namespace = c->cache_ns;
    return ts_engine_submit(m->engine, &p, &j->reqs[i], err);
}

/* Reads request i's events into its vector (the leading dims, scaled to unit norm).
 * Cancels every request of the job once the server stops. */
static ts_status gather_one(embed_job *j, srv_conn *c, size_t i, oai_error *e)
{
    ts_event ev = {0};
    ts_status st, out = TS_OK;
    bool got = false;
    while ((st = ts_request_next_event(j->reqs[i], &ev, EMBED_POLL_MS)) != TS_ERR_NOT_FOUND) {
        if (st == TS_ERR_TIMEOUT) {
            if (atomic_load(&c->srv->stopping))
                for (size_t k = 0; k < j->r->n_inputs; k++)
                    ts_request_cancel(j->reqs[k]);
            continue;
        }
        if (ev.kind == TS_EVENT_ERROR && out == TS_OK)
            out = srv_status_error(e, ev.status, ev.message);
        if (ev.kind == TS_EVENT_DONE && ev.embedding && ev.n_embedding >= j->dims) {
            float *v = j->vectors + i * (size_t)j->dims;
            memcpy(v, ev.embedding, (size_t)j->dims * sizeof(float));
            if (j->dims < ev.n_embedding)
                l2_normalize(v, j->dims);
            got = true;
        }
        ts_event_clear(&ev);
    }
    ts_request_release(j->reqs[i]);
    j->reqs[i] = NULL;
    if (out == TS_OK && !got)
        out = oai_error_set(e, 503, NULL, "server_shutting_down",
                            "the server is shutting down");
    return out;
}

/* Submits the inputs in order with at most EMBED_WINDOW of them in the engine at once, and
 * reads the vectors as the window moves on: a request of EMBED_MAX_INPUTS inputs neither
 * fills the engine's queue against other clients nor is refused by it. A full queue (the
 * others') waits for one of the request's own to finish; with none of its own queued it is
 * the answer (429). */
static ts_status submit_and_gather(embed_job *j, srv_conn *c, srv_model *m, oai_error *e)
{
    size_t n = j->r->n_inputs, read = 0;
    ts_status st = TS_OK;
    for (size_t i = 0; st == TS_OK && i < n; i++) {
        if (i - read == EMBED_WINDOW)
            st = gather_one(j, c, read++, e);
        while (st == TS_OK) {
            ts_error err = {0};
            ts_status sub = submit_one(j, c, m, i, &err);
            if (sub == TS_OK)
                break;
            if (sub != TS_ERR_QUEUE_FULL || read == i)
                st = srv_status_error(e, sub, err.msg);
            else
                st = gather_one(j, c, read++, e);
        }
    }
    while (st == TS_OK && read < n)
        st = gather_one(j, c, read++, e);
    return st;
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
    j->ids = calloc(n, sizeof *j->ids);
    j->n_ids = calloc(n, sizeof *j->n_ids);
    j->reqs = calloc(n, sizeof *j->reqs);
    j->vectors = malloc(n * (size_t)j->dims * sizeof(float));
    if (!j->ids || !j->n_ids || !j->reqs || !j->vectors)
        return oai_error_set(e, 500, NULL, NULL, "out of memory");
    const ts_tokenizer *tok = ts_model_get_tokenizer(model);
    ts_status st = TS_OK;
    for (size_t i = 0; st == TS_OK && i < n; i++)
        st = input_tokens(j, tok, i, e);
    if (st == TS_OK)
        st = submit_and_gather(j, c, m, e);
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
    job_free(&j, r.n_inputs);
    embed_request_clear(&r);
    if (st != TS_OK) {
        strbuf_free(&b);
        return srv_send_error(mc, c, &e);
    }
    return srv_send(mc, c, 200, "application/json", b.s, b.len);
}
