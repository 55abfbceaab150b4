/* models.c: the model search path of the CLI (models.h): explicit paths, model names in
 * the model directories, and the built-in default installed with the binary. */
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/models.h"

/* CMake defines these on this file (CMakeLists.txt); the fallbacks keep it building
 * alone. */
#ifndef TS_DEFAULT_MODEL_REL
#define TS_DEFAULT_MODEL_REL "share/tessera/models/stories260K.gguf"
#endif
#ifndef TS_DEFAULT_MODEL_INSTALLED
#define TS_DEFAULT_MODEL_INSTALLED "/usr/local/" TS_DEFAULT_MODEL_REL
#endif
#ifndef TS_DEFAULT_MODEL_SOURCE
#define TS_DEFAULT_MODEL_SOURCE "models/default/stories260K.gguf"
#endif

enum { MAX_DIRS = 16, MAX_PLACES = 24 };

/* What was looked at, for the message when nothing is found. */
typedef struct search_log {
    char places[MAX_PLACES][PATH_MAX + 64];
    int n;
} search_log;

static void note(search_log *log, const char *fmt, const char *a, const char *b)
{
    if (log->n < MAX_PLACES)
        snprintf(log->places[log->n++], sizeof log->places[0], fmt, a, b);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool copy_out(char *out, size_t cap, const char *path)
{
    return (size_t)snprintf(out, cap, "%s", path) < cap;
}

/* Splits model_dir, $TESSERA_MODELS and models/ into dirs (pointers into buf). */
static int model_dirs(const char *model_dir, char *buf, size_t cap, const char **dirs,
                      search_log *log)
{
    int n = 0;
    if (model_dir && *model_dir)
        dirs[n++] = model_dir;
    else
        note(log, "--model-dir: not given%s%s", "", "");
    const char *env = getenv("TESSERA_MODELS");
    if (env && *env && strlen(env) < cap) {
        memcpy(buf, env, strlen(env) + 1);
        for (char *save = NULL, *d = strtok_r(buf, ":", &save); d && n < MAX_DIRS - 1;
             d = strtok_r(NULL, ":", &save))
            dirs[n++] = d;
    } else {
        note(log, "$TESSERA_MODELS: not set%s%s", "", "");
    }
    dirs[n++] = "models";
    return n;
}

/* The first *.gguf of dir in name order into out. */
static bool first_gguf(const char *dir, char *out, size_t cap, search_log *log)
{
    char pattern[PATH_MAX];
    glob_t g;
    bool found = false;
    snprintf(pattern, sizeof pattern, "%s/*.gguf", dir);
    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc && !found; i++)
            found = is_file(g.gl_pathv[i]) && copy_out(out, cap, g.gl_pathv[i]);
    globfree(&g);
    if (!found)
        note(log, "%s: no .gguf file%s", pattern, "");
    return found;
}

/* dir/name, then dir/name.gguf, into out. */
static bool named_in(const char *dir, const char *name, char *out, size_t cap,
                     search_log *log)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (is_file(path))
        return copy_out(out, cap, path);
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    if (is_file(path))
        return copy_out(out, cap, path);
    note(log, "%s/%s[.gguf]: no such file", dir, name);
    return false;
}

/* The installed default beside the binary: PREFIX/bin/tessera -> PREFIX/share/... */
static bool beside_binary(char *path, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            return false;
        *slash = '\0';
    }
    return (size_t)snprintf(path, cap, "%s/%s", exe, TS_DEFAULT_MODEL_REL) < cap;
}

static bool builtin(char *out, size_t cap, search_log *log)
{
    char path[PATH_MAX];
    if (beside_binary(path, sizeof path)) {
        if (is_file(path))
            return copy_out(out, cap, path);
        note(log, "%s (the default beside the binary): %s", path, "no such file");
    }
    const char *fixed[] = {TS_DEFAULT_MODEL_INSTALLED, TS_DEFAULT_MODEL_SOURCE};
    const char *what[] = {"the installed default", "the source tree's default"};
    for (int i = 0; i < 2; i++) {
        if (is_file(fixed[i]))
            return copy_out(out, cap, fixed[i]);
        note(log, "%s (%s): no such file", fixed[i], what[i]);
    }
    return false;
}

bool cli_builtin_model(char *out, size_t cap)
{
    search_log log = {.n = 0};
    return builtin(out, cap, &log);
}

static void report(const search_log *log, const char *arg)
{
    if (arg)
        fprintf(stderr, "tessera: model '%s' not found; looked at:\n", arg);
    else
        fprintf(stderr, "tessera: no model given (-m) and none found; looked at:\n");
    for (int i = 0; i < log->n; i++)
        fprintf(stderr, "  %s\n", log->places[i]);
    fprintf(stderr, "Name a file with -m PATH, or see README.md, \"Getting a model\".\n");
}

bool cli_model_path(const char *arg, const char *model_dir, char *out, size_t cap)
{
    search_log log = {.n = 0};
    char buf[PATH_MAX * 4];
    const char *dirs[MAX_DIRS];
    if (arg) {
        if (is_file(arg))
            return copy_out(out, cap, arg);
        note(&log, "%s: no such file%s", arg, "");
        if (!strchr(arg, '/') && *arg) {
            int n = model_dirs(model_dir, buf, sizeof buf, dirs, &log);
            for (int i = 0; i < n; i++)
                if (named_in(dirs[i], arg, out, cap, &log))
                    return true;
        }
        report(&log, arg);
        return false;
    }
    const char *env = getenv("TESSERA_MODEL");
    if (env && *env)
        return copy_out(out, cap, env);
    note(&log, "$TESSERA_MODEL: not set%s%s", "", "");
    int n = model_dirs(model_dir, buf, sizeof buf, dirs, &log);
    for (int i = 0; i < n; i++)
        if (first_gguf(dirs[i], out, cap, &log))
            return true;
    if (builtin(out, cap, &log))
        return true;
    report(&log, NULL);
    return false;
}

const char *cli_default_model(void)
{
    static char path[PATH_MAX];
    return cli_model_path(NULL, NULL, path, sizeof path) ? path : NULL;
}
