/* fuzz_template_render.c: libFuzzer target: whole chat templates rendered under the
 * production bounds, as a model file anyone can publish would be at load and per request.
 *
 * Input: the template text, then optionally a NUL and a JSON object of variables (else a
 * chat with a system, user, assistant tool-call and tool message, tools,
 * add_generation_prompt, bos_token and eos_token), as fuzz_jinja reads it. The limits are
 * jinja_limits_default's (tree height 256, 2048 nested evaluations: the C stack guard, here
 * under ASan's larger frames) except a work budget of 2 Mi units and smaller output and
 * memory caps, so each input stays fast. Checked: parsing fails only with a load-time
 * status and a message; a render ends with a text within max_output or a render-time
 * status and a message, within a CPU-time bound that only the work budget can keep
 * (operator chains, "" * 2**63, count/find on long strings, shared lists turned into JSON
 * or text, macros calling macros); two renders agree on status, text and message, so the
 * budget is charged deterministically; a render whose cancel flag is already set never
 * succeeds and reports TS_ERR_CANCELLED. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "template/jinja.h"

static const char default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"\","
    " \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": \"function\", \"function\": {\"name\": "
    "\"f\", \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"{}\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

/* 2 Mi units of work take well under a second even under ASan; a render that runs for
 * this long has escaped its budget (libFuzzer's -timeout would catch a true hang later). */
enum { MAX_WORK = 2 << 20 };
static const double MAX_CPU_SECONDS = 10.0;

static cJSON *fallback;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fallback = cJSON_Parse(default_vars);
    FUZZ_CHECK(fallback != NULL, "default variables do not parse");
    return 0;
}

typedef struct outcome {
    ts_status st;
    char *text;
    char msg[256];
} outcome;

static void render(const jinja_template *t, const jinja_limits *lim, const cJSON *vars,
                   const atomic_bool *cancel, outcome *o)
{
    ts_error e = {0};
    clock_t start = clock();
    o->text = NULL;
    o->st = jinja_render(t, vars, 1795564800, cancel, &o->text, &e);
    double cpu = (double)(clock() - start) / CLOCKS_PER_SEC;
    memcpy(o->msg, e.msg, sizeof o->msg);
    FUZZ_CHECK(cpu < MAX_CPU_SECONDS, "render took %.1f s of CPU within %zu units of work", cpu,
               lim->max_work);
    if (o->st == TS_OK) {
        FUZZ_CHECK(o->text != NULL, "rendered without a text");
        FUZZ_CHECK(strlen(o->text) <= lim->max_output, "output past its bound");
        return;
    }
    FUZZ_CHECK(o->st == TS_ERR_INVALID_ARG || o->st == TS_ERR_TOO_LONG ||
                   o->st == TS_ERR_UNSUPPORTED || o->st == TS_ERR_CANCELLED,
               "render failed with %s", ts_status_str(o->st));
    FUZZ_CHECK(o->text == NULL, "a failed render left a text");
    FUZZ_CHECK(e.status == o->st, "render error without its status");
    FUZZ_CHECK(e.msg[0] != '\0', "render failed without a message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t len = nul ? (size_t)(nul - data) : size;
    cJSON *vars = nul ? cJSON_ParseWithLength((const char *)nul + 1, size - len - 1) : NULL;
    const cJSON *use = cJSON_IsObject(vars) ? vars : fallback;

    jinja_limits lim;
    jinja_limits_default(&lim);
    lim.max_work = MAX_WORK;
    lim.max_output = 1 << 18;
    lim.max_memory = 16 << 20;
    jinja_template *t = NULL;
    ts_error err = {0};
    ts_status st = jinja_parse(&t, src, len, &lim, &err);
    if (st != TS_OK) {
        FUZZ_CHECK(st == TS_ERR_FORMAT || st == TS_ERR_UNSUPPORTED || st == TS_ERR_TOO_LONG,
                   "parse failed with %s", ts_status_str(st));
        FUZZ_CHECK(err.msg[0] && err.status == st, "parse failed without a message");
        FUZZ_CHECK(t == NULL, "a failed parse left a template");
        cJSON_Delete(vars);
        return 0;
    }

    atomic_bool go = false, stop = true;
    outcome a, b, c;
    render(t, &lim, use, &go, &a);
    FUZZ_CHECK(a.st != TS_ERR_CANCELLED, "cancelled without the flag set");
    render(t, &lim, use, &go, &b);
    FUZZ_CHECK(a.st == b.st, "two renders disagree on the status (%s, %s)", ts_status_str(a.st),
               ts_status_str(b.st));
    FUZZ_CHECK(a.st != TS_OK || !strcmp(a.text, b.text), "two renders disagree on the text");
    FUZZ_CHECK(a.st == TS_OK || !strcmp(a.msg, b.msg), "two renders disagree on the error");
    render(t, &lim, use, &stop, &c);
    FUZZ_CHECK(c.st == TS_ERR_CANCELLED, "a cancelled render ended with %s: %s",
               ts_status_str(c.st), c.msg);
    free(a.text);
    free(b.text);
    free(c.text);
    jinja_free(t);
    cJSON_Delete(vars);
    return 0;
}
