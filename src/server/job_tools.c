/* job_tools.c: a completion's answers through the tool-call parser of toolcall.c: which
 * syntax, the marker token the detokenizer does not print, ids for the calls found, and
 * the views the JSON builders take (job.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/job.h"

bool job_tools_on(const srv_job *j)
{
    return j->oreq.kind == OAI_CHAT && j->oreq.tools.defs &&
           j->oreq.tools.choice != OAI_TOOL_CHOICE_NONE;
}

void job_tools_start(srv_job *j)
{
    toolcall_syntax syn = j->oreq.tools.choice == OAI_TOOL_CHOICE_AUTO
                              ? toolcall_syntax_for(j->model->template)
                              : TOOLCALL_SYNTAX_JSON;
    for (int i = 0; i < j->oreq.n; i++) {
        toolcall_init(&j->acc[i].tc, syn);
        toolcall_declare(&j->acc[i].tc, j->oreq.tools.defs);
    }
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* An id for call k of choice `index`: letters and digits drawn from the request's id,
 * the server's random seed and (index, k), so ids differ across calls, choices, requests
 * and restarts. "call_" and 24 of them, as OpenAI's; 9 and no prefix for the mistral
 * family, whose templates take nothing else when the call comes back. */
static void call_id(const srv_job *j, int index, size_t k, char *out)
{
    static const char digits[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint64_t x = j->srv->id_seed ^ ((uint64_t)index << 48) ^ (uint64_t)k;
    for (const char *c = j->id; *c; c++) /* FNV-1a of the request's id */
        x = (x ^ (unsigned char)*c) * 0x100000001B3ULL;
    bool mistral = j->model->template == CHAT_TEMPLATE_MISTRAL;
    size_t n = mistral ? 9 : 24, o = 0;
    if (!mistral) {
        memcpy(out, "call_", 5);
        o = 5;
    }
    uint64_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 10 == 0)
            r = splitmix64(&x);
        out[o++] = digits[r % 62];
        r /= 62;
    }
    out[o] = '\0';
}

long job_tools_event(srv_job *j, const ts_event *ev)
{
    choice_acc *a = &j->acc[ev->index];
    toolcall_parser *p = &a->tc;
    bool ok = toolcall_feed(p, ev->text, ev->text_len, &a->tco);
    if (ok && ev->kind == TS_EVENT_TOKEN && ev->token == j->model->tool_marker &&
        j->model->tool_marker >= 0) {
        const char *mk = toolcall_marker(p->syntax);
        ok = !mk || toolcall_feed(p, mk, strlen(mk), &a->tco);
    }
    if (ok && ev->kind == TS_EVENT_DONE)
        ok = toolcall_finish(p, &a->tco);
    long first = (long)a->n_calls;
    toolcall_out *o = &a->tco;
    if (ok && a->n_calls + o->n_calls > a->cap_calls &&
        !job_grow((void **)&a->calls, &a->cap_calls, a->n_calls + o->n_calls, sizeof *a->calls))
        ok = false;
    for (size_t i = 0; i < o->n_calls; i++) {
        if (!ok) { /* out of memory: the call is lost with the request */
            free(o->calls[i].name);
            free(o->calls[i].arguments);
            continue;
        }
        job_call *c = &a->calls[a->n_calls];
        call_id(j, ev->index, a->n_calls++, c->id);
        c->call = o->calls[i]; /* moved */
    }
    o->n_calls = 0;
    return ok && !o->failed ? first : -1;
}

void job_tools_view_one(const choice_acc *a, size_t k, oai_tool_call *out)
{
    *out = (oai_tool_call){a->calls[k].id, a->calls[k].call.name, a->calls[k].call.arguments};
}

void job_tools_view(const choice_acc *a, oai_tool_call *out)
{
    for (size_t i = 0; i < a->n_calls; i++)
        job_tools_view_one(a, i, &out[i]);
}

void job_tools_free(choice_acc *a)
{
    for (size_t i = 0; i < a->n_calls; i++) {
        free(a->calls[i].call.name);
        free(a->calls[i].call.arguments);
    }
    free(a->calls);
    toolcall_out_free(&a->tco);
    toolcall_parser_free(&a->tc);
}
