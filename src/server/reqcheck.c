/* reqcheck.c: the request-line and header checks nginx makes (reqcheck.h). */
#include <stdint.h>
#include <string.h>

#include "server/reqcheck.h"

static bool name_byte(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

static bool ipv6_byte(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F') ||
           ch == ':' || ch == '.';
}

bool reqcheck_host_ok(const char *v, size_t len)
{
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t')) /* optional whitespace */
        len--;
    size_t i = 0;
    if (len && v[0] == '[') {
        for (i = 1; i < len && ipv6_byte((unsigned char)v[i]); i++)
            ;
        if (i == 1 || i >= len || v[i] != ']')
            return false;
        i++;
    } else {
        for (; i < len && name_byte((unsigned char)v[i]); i++)
            ;
        if (i == 0 || i > 255)
            return false;
    }
    if (i == len)
        return true;
    if (v[i] != ':')
        return false;
    size_t digits = len - i - 1;
    if (digits < 1 || digits > 5)
        return false;
    for (i++; i < len; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

bool reqcheck_field_ok(const char *name, size_t name_len, const char *value,
                       size_t value_len)
{
    if (!name_len || strlen(name) != name_len || strlen(value) != value_len)
        return false;
    for (size_t i = 0; i < name_len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch <= ' ' || ch >= 0x7f || ch == ':')
            return false;
    }
    return !memchr(value, '\r', value_len) && !memchr(value, '\n', value_len);
}

bool reqcheck_value_whole(const char *value, size_t len, const char *next_name)
{
    if (!len)
        return true;
    const char *after = value + len + 1;
    return *after == '\0' || after == next_name;
}

bool reqcheck_target_ok(const char *uri)
{
    for (; *uri; uri++)
        if ((unsigned char)*uri < 0x20 || *uri == 0x7f)
            return false;
    return true;
}

bool reqcheck_line_ok(const char *method, const char *uri, size_t uri_len,
                      const char *version, size_t max_line)
{
    uintptr_t m = (uintptr_t)method, u = (uintptr_t)uri, v = (uintptr_t)version;
    if (!method || !uri || !version || !(m < u && u < v) || v - m > max_line)
        return true;
    /* the method, its NUL (the space), maybe more spaces, then the target */
    const char *p = method + strlen(method) + 1;
    while (p < uri && *p == ' ')
        p++;
    /* the target's NUL is the space before the version */
    return p == uri && uri + uri_len + 1 == version;
}
