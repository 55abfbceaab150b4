/* test_cli_operator.c: what an operator meets first: the model search path (models.c),
 * serve's -m NAME=PATH routes, and the built binary run from a fresh directory. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/cli.h"
#include "cli/models.h"
#include "util.h"

/* Runs the shell command (fmt, ...) with stderr joined to stdout; returns its exit status
 * and its output in *out (malloc'd). */
static int sh(char **out, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strcat(cmd, " 2>&1");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    while ((got = fread(buf + len, 1, cap - len, p)) > 0) {
        len += got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void touch(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fclose(f);
}

static char *make_dir(const char *name)
{
    char *d = strdup(tu_tmp_path(name));
    assert_non_null(d);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(mkdir(d, 0755), 0);
    return d;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

/* The order README promises: $TESSERA_MODEL, --model-dir, $TESSERA_MODELS, models/, the
 * built-in default; names are looked up in the same directories. */
static void test_model_search_order(void **state)
{
    (void)state;
    char cwd[PATH_MAX], out[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char *a = make_dir("dir-a"), *b = make_dir("dir-b"), *work = make_dir("work"),
         *empty = make_dir("dir-empty");
    touch(a, "b.gguf");
    touch(a, "a.gguf");
    touch(a, "notes.txt");
    touch(b, "c.gguf");
    char models[PATH_MAX];
    snprintf(models, sizeof models, "%s/models", work);
    assert_int_equal(mkdir(models, 0755), 0);
    touch(models, "d.gguf");
    assert_int_equal(chdir(work), 0);
    unsetenv("TESSERA_MODEL");
    unsetenv("TESSERA_MODELS");

    assert_true(cli_model_path(NULL, NULL, out, sizeof out));
    assert_string_equal(out, "models/d.gguf");
    setenv("TESSERA_MODELS", b, 1);
    assert_true(cli_model_path(NULL, NULL, out, sizeof out));
    assert_true(ends_with(out, "dir-b/c.gguf"));
    assert_true(cli_model_path(NULL, a, out, sizeof out));
    assert_true(ends_with(out, "dir-a/a.gguf")); /* name order, not creation order */
    setenv("TESSERA_MODEL", "/explicit/choice.gguf", 1);
    assert_true(cli_model_path(NULL, a, out, sizeof out));
    assert_string_equal(out, "/explicit/choice.gguf");
    unsetenv("TESSERA_MODEL");

    /* Names: NAME or NAME.gguf in the first directory holding one; paths stay paths. */
    assert_true(cli_model_path("c", a, out, sizeof out));
    assert_true(ends_with(out, "dir-b/c.gguf"));
    assert_true(cli_model_path("d.gguf", a, out, sizeof out));
    assert_string_equal(out, "models/d.gguf");
    assert_true(cli_model_path("models/d.gguf", NULL, out, sizeof out));
    assert_string_equal(out, "models/d.gguf");
    assert_false(cli_model_path("nope", a, out, sizeof out));
    assert_false(cli_model_path("x/c", a, out, sizeof out)); /* a path is not searched */
    assert_false(cli_model_path("", NULL, out, sizeof out));

    /* Nothing in the directories: the built-in default, here the source tree's copy. */
    setenv("TESSERA_MODELS", empty, 1);
    remove("models/d.gguf");
    assert_true(cli_model_path(NULL, empty, out, sizeof out));
    assert_true(ends_with(out, "models/default/stories260K.gguf"));
    char builtin[PATH_MAX];
    assert_true(cli_builtin_model(builtin, sizeof builtin));
    assert_string_equal(builtin, out);
    struct stat st;
    assert_int_equal(stat(builtin, &st), 0);
    assert_int_equal(st.st_size, 1185376);

    unsetenv("TESSERA_MODELS");
    assert_int_equal(chdir(cwd), 0);
    free(a);
    free(b);
    free(work);
    free(empty);
}

static void test_route_args(void **state)
{
    (void)state;
    char route[16];
    const char *path = NULL;
    assert_true(cli_route_arg("tiny=models/x.gguf", route, sizeof route, &path));
    assert_string_equal(route, "tiny");
    assert_string_equal(path, "models/x.gguf");
    assert_true(cli_route_arg("llama-3.2:1b=x", route, sizeof route, &path));
    assert_string_equal(route, "llama-3.2:1b");
    assert_string_equal(path, "x");
    assert_true(cli_route_arg("dir/a=b.gguf", route, sizeof route, &path));
    assert_string_equal(route, "");
    assert_string_equal(path, "dir/a=b.gguf");
    assert_true(cli_route_arg("plain.gguf", route, sizeof route, &path));
    assert_string_equal(route, "");
    assert_string_equal(path, "plain.gguf");
    assert_true(cli_route_arg("=x.gguf", route, sizeof route, &path));
    assert_string_equal(route, "");
    assert_string_equal(path, "=x.gguf");
    assert_false(cli_route_arg("a b=x.gguf", route, sizeof route, &path));
    assert_false(cli_route_arg("a-name-much-too-long=x", route, sizeof route, &path));
}

/* The binary, from a directory with no models/ and no ../shared, uses the built-in model;
 * a name it cannot find is refused naming every place looked at. */
static void test_binary_defaults(void **state)
{
    (void)state;
    char *dir = make_dir("fresh"), *out = NULL;
    assert_int_equal(sh(&out, "cd '%s' && env -u TESSERA_MODEL -u TESSERA_MODELS "
                              "%s/tessera generate -p 'Once upon a time' -n 8",
                        dir, TS_BUILD_DIR),
                     0);
    assert_non_null(strstr(out, "stories260K.gguf"));
    assert_non_null(strstr(out, "Once upon a time,"));
    free(out);
    assert_int_equal(sh(&out, "cd '%s' && TESSERA_MODELS=/no/such/dir %s/tessera generate "
                              "--model-dir /also/not -m tinyllama -p hi -n 2",
                        dir, TS_BUILD_DIR),
                     1);
    assert_non_null(strstr(out, "model 'tinyllama' not found"));
    assert_non_null(strstr(out, "/also/not/tinyllama[.gguf]: no such file"));
    assert_non_null(strstr(out, "/no/such/dir/tinyllama[.gguf]: no such file"));
    assert_non_null(strstr(out, "models/tinyllama[.gguf]: no such file"));
    free(out);
    assert_int_equal(sh(&out, "%s/tessera serve -m 'bad name=x.gguf'", TS_BUILD_DIR), 1);
    assert_non_null(strstr(out, "route name 'bad name'"));
    free(out);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_search_order),
        cmocka_unit_test(test_route_args),
        cmocka_unit_test(test_binary_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
