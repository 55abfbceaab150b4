/* status.c: status strings from the TS_STATUS_MAP table, and the error record setter. */
#include <stdarg.h>
#include <stdio.h>

#include "tessera/status.h"

const char *ts_status_str(ts_status status)
{
    static const char *const messages[] = {
#define TS_STATUS_MSG(name, msg) msg,
        TS_STATUS_MAP(TS_STATUS_MSG)
#undef TS_STATUS_MSG
    };
    if ((unsigned)status >= TS_STATUS_COUNT)
        return "unknown status";
    return messages[status];
}

ts_status ts_error_set(ts_error *err, ts_status status, const char *fmt, ...)
{
    if (!err)
        return status;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return status;
}
