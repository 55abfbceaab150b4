/* fuzz_jinja.c: libFuzzer target: the Jinja interpreter's parser and evaluator on
 * arbitrary templates and variables.
 *
 * Input: the template text, then optionally a NUL and a JSON object of variables (else a
 * small chat: messages, tools, add_generation_prompt, bos_token, eos_token). Checked:
 * parsing either succeeds or fails with a load-time status (format, unsupported, too long)
 * and a message; a parsed template renders to a NUL-terminated text within the output
 * bound or fails with a render-time status and a message; rendering twice gives the same
 * result. Small bounds keep every input fast; ASan finds leaks, overflows and misuse. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "template/jinja.h"

static const char default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"\","
    " \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": \"function\", \"function\": {\"name\": "
    "\"f\","
    " \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"{}\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static cJSON *fallback;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fallback = cJSON_Parse(default_vars);
    FUZZ_CHECK(fallback != NULL, "default variables do not parse");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t len = nul ? (size_t)(nul - data) : size;
    cJSON *vars = nul ? cJSON_ParseWithLength((const char *)nul + 1, size - len - 1) : NULL;
    const cJSON *use = cJSON_IsObject(vars) ? vars : fallback;

    jinja_limits lim = {.max_steps = 200000, .max_output = 1 << 16, .max_memory = 8 << 20};
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
    char *out[2] = {NULL, NULL};
    ts_status rs[2];
    char msg[2][256];
    for (int k = 0; k < 2; k++) {
        ts_error e = {0};
        rs[k] = jinja_render(t, use, 1795564800, NULL, &out[k], &e);
        memcpy(msg[k], e.msg, sizeof msg[k]);
        if (rs[k] == TS_OK) {
            FUZZ_CHECK(out[k] != NULL, "rendered without a text");
            FUZZ_CHECK(strlen(out[k]) <= lim.max_output, "output past its bound");
        } else {
            FUZZ_CHECK(rs[k] == TS_ERR_INVALID_ARG || rs[k] == TS_ERR_TOO_LONG ||
                           rs[k] == TS_ERR_UNSUPPORTED,
                       "render failed with %s", ts_status_str(rs[k]));
            FUZZ_CHECK(out[k] == NULL, "a failed render left a text");
            FUZZ_CHECK(e.status == rs[k], "render error without its status");
        }
    }
    FUZZ_CHECK(rs[0] == rs[1], "two renders disagree on the status");
    FUZZ_CHECK(rs[0] != TS_OK || !strcmp(out[0], out[1]), "two renders disagree on the text");
    FUZZ_CHECK(rs[0] == TS_OK || !strcmp(msg[0], msg[1]), "two renders disagree on the error");
    free(out[0]);
    free(out[1]);
    jinja_free(t);
    cJSON_Delete(vars);
    return 0;
}
