/* api_json.c: the JSON pieces api_responses.c and api_messages.c both build and read:
 * field tables, chat messages and tools, errors, the Server-Sent-Event writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/api.h"

void api__ignore(char *ignored, const char *name)
{
    size_t o = strlen(ignored);
    if (o + 4 >= OAI_IGNORED_LEN || (o >= 3 && !strcmp(ignored + o - 3, "...")))
        return;
    size_t n = strlen(name);
    if (o + 2 + n + 4 >= OAI_IGNORED_LEN) {
        snprintf(ignored + o, OAI_IGNORED_LEN - o, "%s...", o ? ", " : "");
        return;
    }
    if (o) {
        memcpy(ignored + o, ", ", 2);
        o += 2;
    }
    for (size_t i = 0; i < n; i++) { /* a name must not end the header line */
        char ch = name[i];
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("_-.$", ch);
        ignored[o++] = plain && ch ? ch : '_';
    }
    ignored[o] = '\0';
}

ts_status api__fields(const cJSON *root, const api_field *table, size_t n, cJSON *chat,
                      char *ignored, oai_error *err)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, root)
    {
        const api_field *row = NULL;
        for (size_t i = 0; i < n && !row; i++)
            if (!strcmp(table[i].name, f->string))
                row = &table[i];
        if (!row) {
            api__ignore(ignored, f->string);
            continue;
        }
        if (row->use == API_FIELD_REFUSED && !cJSON_IsNull(f) && !cJSON_IsFalse(f))
            return oai_error_set(err, 400, row->name, "unsupported_parameter",
                                 "'%s' is not supported: %s", row->name, row->to);
        if (row->use != API_FIELD_COPY || cJSON_IsNull(f))
            continue;
        cJSON *copy = cJSON_Duplicate(f, true);
        if (!copy || !cJSON_AddItemToObject(chat, row->to ? row->to : row->name, copy)) {
            cJSON_Delete(copy);
            return oai_error_set(err, 500, NULL, NULL, "out of memory");
        }
    }
    return TS_OK;
}

cJSON *api__add_message(cJSON *msgs, const char *role, cJSON *content)
{
    cJSON *m = cJSON_CreateObject();
    if (!content)
        content = cJSON_CreateNull();
    if (!m || !content || !cJSON_AddStringToObject(m, "role", role) ||
        !cJSON_AddItemToObject(m, "content", content)) {
        if (!cJSON_GetObjectItemCaseSensitive(m, "content"))
            cJSON_Delete(content);
        cJSON_Delete(m);
        return NULL;
    }
    if (!cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

bool api__sse(strbuf *out, const char *name, cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    bool ok = s && strbuf_addf(out, "event: %s\ndata: %s\n\n", name, s);
    free(s);
    return ok;
}

ts_status api__oom(oai_error *err)
{
    return oai_error_set(err, 500, NULL, NULL, "out of memory");
}

ts_status api__wrong_type(oai_error *err, const char *name, const char *want)
{
    return oai_error_set(err, 400, name, "invalid_type", "'%s' must be %s", name, want);
}

const char *api__string(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

cJSON *api__function_tool(cJSON *fn)
{
    cJSON *tool = fn ? cJSON_CreateObject() : NULL;
    if (!tool || !cJSON_AddStringToObject(tool, "type", "function") ||
        !cJSON_AddItemToObject(tool, "function", fn)) {
        cJSON_Delete(fn);
        cJSON_Delete(tool);
        return NULL;
    }
    return tool;
}

cJSON *api__function_choice(const char *name)
{
    cJSON *fn = cJSON_CreateObject();
    if (!fn || !cJSON_AddStringToObject(fn, "name", name)) {
        cJSON_Delete(fn);
        return NULL;
    }
    return api__function_tool(fn);
}

char *api__print(cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}
