/* openai_error.c: the OpenAI-shaped error every request parser fills (openai.h), kept
 * below them all: the top-level parser (openai_parse.c) and the parsers it calls
 * (fields, tools, schema, chat variables) each report through it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/openai.h"

ts_status oai_error_set(oai_error *e, int http_status, const char *param, const char *code,
                        const char *fmt, ...)
{
    if (!e)
        return TS_ERR_INVALID_ARG;
    memset(e, 0, sizeof *e);
    e->http_status = http_status;
    const char *type = http_status == 401   ? "authentication_error"
                       : http_status == 429 ? "rate_limit_error"
                       : http_status >= 500 ? "server_error"
                                            : "invalid_request_error";
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return TS_ERR_INVALID_ARG;
}
