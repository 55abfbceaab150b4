/* ref_util.c: reading reference files: whole, line by line, and their hex byte strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ref_util.h"
#include "util.h"

char *ref_read(const char *path, size_t *len)
{
    size_t n = 0;
    char *text = tu_read_file(path, &n);
    if (!text)
        fail_msg("cannot read %s", path);
    if (n == 0 || text[n - 1] != '\n')
        fail_msg("%s does not end with a newline", path);
    if (len)
        *len = n;
    return text;
}

char *ref_next_line(char **cursor)
{
    char *line = *cursor;
    while (*line == '\n')
        line++;
    if (!*line) {
        *cursor = line;
        return NULL;
    }
    char *end = strchr(line, '\n');
    if (end) {
        *end = '\0';
        *cursor = end + 1;
    } else {
        *cursor = line + strlen(line);
    }
    return line;
}

size_t ref_unhex(const char *hex, char *dst, size_t cap)
{
    size_t n = 0;
    unsigned b;
    while (hex[0] && hex[0] != ' ' && hex[0] != '\n' && sscanf(hex, "%2x", &b) == 1) {
        assert_true(n < cap);
        dst[n++] = (char)b;
        hex += 2;
    }
    return n;
}

char *ref_unhex_dup(const char *hex, uint32_t *len)
{
    char buf[256];
    size_t n = ref_unhex(hex, buf, sizeof buf);
    char *s = malloc(n + 1);
    assert_non_null(s);
    memcpy(s, buf, n);
    s[n] = '\0';
    *len = (uint32_t)n;
    return s;
}

size_t ref_ids(const char *s, int32_t *out, size_t cap)
{
    char *p = NULL;
    long n = strtol(s, &p, 10);
    assert_true(n >= 0 && (size_t)n <= cap);
    for (long i = 0; i < n; i++)
        out[i] = (int32_t)strtol(p, &p, 10);
    return (size_t)n;
}

void ref_id_line(const char *line, int32_t *ids, size_t *n_ids, int32_t *plain,
                 size_t *n_plain, size_t cap)
{
    if (strncmp(line, "plain ", 6) == 0)
        *n_plain = ref_ids(line + 6, plain, cap);
    else if (strncmp(line, "ids ", 4) == 0)
        *n_ids = ref_ids(line + 4, ids, cap);
    else
        fail_msg("not an ids or plain line: %.60s", line);
}

void ref_expect_ids(const char *what, const int32_t *ids, size_t n, const int32_t *want,
                    size_t n_want)
{
    if (n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0))
        return;
    fprintf(stderr, "%s: %zu ids, the peer's %zu:", what, n, n_want);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, " / peer:");
    for (size_t i = 0; i < n_want; i++)
        fprintf(stderr, " %d", (int)want[i]);
    fprintf(stderr, "\n");
    fail();
}
