/* common.c: helpers shared by the libFuzzer targets (see common.h). */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TS_SHARED_DIR
#define TS_SHARED_DIR "../shared"
#endif

_Noreturn void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\n== fuzz property violated: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

const char *fuzz_shared(const char *rel)
{
    static char path[4096];
    const char *env = getenv("TESSERA_SHARED");
    if (env && *env) {
        snprintf(path, sizeof path, "%s/%s", env, rel);
        if (readable(path))
            return path;
    }
    snprintf(path, sizeof path, "%s/%s", TS_SHARED_DIR, rel);
    if (readable(path))
        return path;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(path, sizeof path, "%s/../../shared/%s", exe, rel);
        if (readable(path))
            return path;
    }
    fuzz_fail("shared file %s not found: set TESSERA_SHARED to the shared data folder", rel);
}

enum { SCRATCH_SLOTS = 2 };
static char scratch_path[SCRATCH_SLOTS][4096];

static void remove_scratch(void)
{
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch_path[i][0])
            unlink(scratch_path[i]);
}

const char *fuzz_scratch_file(int slot, const void *data, size_t size)
{
    if (slot < 0 || slot >= SCRATCH_SLOTS)
        fuzz_fail("scratch slot %d out of range", slot);
    char *path = scratch_path[slot];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof scratch_path[slot], "%s/tessera-fuzz-%ld-%d",
                 dir && *dir ? dir : "/tmp", (long)getpid(), slot);
        static bool registered;
        if (!registered)
            atexit(remove_scratch);
        registered = true;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fuzz_fail("cannot write the scratch file %s", path);
    return path;
}

uint8_t fuzz_u8(fuzz_reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

uint16_t fuzz_u16(fuzz_reader *r)
{
    uint16_t lo = fuzz_u8(r);
    return (uint16_t)(lo | (uint16_t)fuzz_u8(r) << 8);
}

const uint8_t *fuzz_bytes(fuzz_reader *r, size_t n, size_t *len)
{
    const uint8_t *p = r->p;
    *len = n < r->n ? n : r->n;
    r->p += *len;
    r->n -= *len;
    return p;
}

static bool ascii_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

const char *fuzz_chat_core(const char *text, bool trims, size_t *len)
{
    size_t n = strlen(text);
    while (trims && n > 0 && ascii_space(*text)) {
        text++;
        n--;
    }
    while (trims && n > 0 && ascii_space(text[n - 1]))
        n--;
    *len = n;
    return text;
}
