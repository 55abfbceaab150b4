/* json_exact.c: cJSON printing with numbers that read back exactly (json_exact.h). */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "common/json_exact.h"

/* d in the shortest %g form that reads back as d (buf of 32 bytes). */
static void exact_number(double d, char *buf)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, d);
        if (strtod(buf, NULL) == d)
            return;
    }
}

/* Replaces every number under item (its children, recursively) by raw exact text. */
static int exactify(cJSON *item)
{
    for (cJSON *c = item->child, *next; c; c = next) {
        next = c->next;
        if (cJSON_IsNumber(c)) {
            char buf[32];
            exact_number(c->valuedouble, buf);
            cJSON *raw = cJSON_CreateRaw(buf);
            if (!raw)
                return -1;
            raw->string = c->string; /* the member's name moves over */
            raw->type |= c->type & cJSON_StringIsConst;
            c->string = NULL;
            cJSON_ReplaceItemViaPointer(item, c, raw); /* cannot fail: c is item's child */
        } else if (exactify(c) < 0) {
            return -1;
        }
    }
    return 0;
}

char *json_print_exact(const cJSON *v)
{
    if (cJSON_IsNumber(v)) {
        char buf[32];
        exact_number(v->valuedouble, buf);
        cJSON *raw = cJSON_CreateRaw(buf);
        char *text = raw ? cJSON_PrintUnformatted(raw) : NULL;
        cJSON_Delete(raw);
        return text;
    }
    cJSON *copy = cJSON_Duplicate(v, 1);
    char *text = copy && exactify(copy) == 0 ? cJSON_PrintUnformatted(copy) : NULL;
    cJSON_Delete(copy);
    return text;
}
