/* chat_vars.c: a chat request's variables as a Jinja chat template reads them (messages,
 * tools, add_generation_prompt and the chat_template_kwargs, as vLLM and llama-server
 * pass them), from the request's JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/openai.h"

/* Text parts ([{"type": "text", "text": ...}]) joined into one string; the parser has
 * checked their shape. */
static cJSON *joined_text(const cJSON *parts)
{
    size_t total = 0, o = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, parts) total +=
        strlen(cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    char *s = malloc(total + 1);
    if (!s)
        return NULL;
    cJSON_ArrayForEach(p, parts)
    {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        memcpy(s + o, t, strlen(t));
        o += strlen(t);
    }
    s[o] = '\0';
    cJSON *j = cJSON_CreateString(s);
    free(s);
    return j;
}

/* tool_calls[k].function.arguments: the OpenAI API sends a JSON string, templates want
 * the object it holds. */
static ts_status parse_arguments(cJSON *calls, int msg, oai_error *err)
{
    int k = 0;
    cJSON *call;
    cJSON_ArrayForEach(call, calls)
    {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        cJSON *args = fn ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        if (cJSON_IsString(args)) {
            cJSON *obj = cJSON_Parse(args->valuestring);
            if (!obj) {
                char name[96];
                snprintf(name, sizeof name, "messages[%d].tool_calls[%d].function.arguments", msg,
                         k);
                return oai_error_set(err, 400, name, "invalid_value", "'%s' is not valid JSON",
                                     name);
            }
            cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
        }
        k++;
    }
    return TS_OK;
}

ts_status oai_chat_vars(const struct cJSON *root, struct cJSON **out, oai_error *err)
{
    cJSON *vars = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(vars, "messages");
    const cJSON *m, *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    *out = NULL;
    if (!msgs)
        goto oom;
    int i = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(root, "messages"))
    {
        cJSON *c = cJSON_Duplicate(m, true);
        if (!c)
            goto oom;
        cJSON_AddItemToArray(msgs, c);
        cJSON *role = cJSON_GetObjectItemCaseSensitive(c, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "developer"))
            cJSON_SetValuestring(role, "system");
        cJSON *content = cJSON_GetObjectItemCaseSensitive(c, "content");
        if (cJSON_IsArray(content)) {
            cJSON *s = joined_text(content);
            if (!s)
                goto oom;
            cJSON_ReplaceItemInObjectCaseSensitive(c, "content", s);
        }
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(c, "tool_calls");
        if (cJSON_IsArray(calls) && parse_arguments(calls, i, err) != TS_OK) {
            cJSON_Delete(vars);
            return TS_ERR_INVALID_ARG;
        }
        i++;
    }
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) {
            cJSON_Delete(vars);
            return oai_error_set(err, 400, "tools", "invalid_type", "'tools' must be an array");
        }
        if (!cJSON_AddItemToObject(vars, "tools", cJSON_Duplicate(tools, true)))
            goto oom;
    }
    if (agp && !cJSON_IsBool(agp)) {
        cJSON_Delete(vars);
        return oai_error_set(err, 400, "add_generation_prompt", "invalid_type",
                             "'add_generation_prompt' must be a boolean");
    }
    if (!cJSON_AddBoolToObject(vars, "add_generation_prompt", !agp || cJSON_IsTrue(agp)))
        goto oom;
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw)) {
        cJSON_Delete(vars);
        return oai_error_set(err, 400, "chat_template_kwargs", "invalid_type",
                             "'chat_template_kwargs' must be an object");
    }
    /* The keyword arguments come last and win, as in vLLM, except over the messages. */
    const cJSON *k;
    cJSON_ArrayForEach(k, kw)
    {
        if (!strcmp(k->string, "messages"))
            continue;
        cJSON *v = cJSON_Duplicate(k, true);
        if (!v)
            goto oom;
        cJSON_DeleteItemFromObjectCaseSensitive(vars, k->string);
        cJSON_AddItemToObject(vars, k->string, v);
    }
    *out = vars;
    return TS_OK;
oom:
    cJSON_Delete(vars);
    return oai_error_set(err, 500, NULL, NULL, "out of memory");
}
