/* test_cli_operator.c: what an operator meets first: the model search path (models.c),
 * serve's -m NAME=PATH routes, serve --config files, the OpenMP defaults for a shared
 * host, and the built binary run from a fresh directory. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "cli/models.h"
#include "cli/table.h"
#include "cli/threads.h"
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

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    fclose(f);
}

/* The arguments of c joined by single spaces, argv[0] included (malloc'd). */
static char *joined(const cli_config *c)
{
    size_t len = 1;
    for (int i = 0; i < c->argc; i++)
        len += strlen(c->argv[i]) + 1;
    char *s = calloc(len, 1);
    assert_non_null(s);
    for (int i = 0; i < c->argc; i++) {
        if (i)
            strcat(s, " ");
        strcat(s, c->argv[i]);
    }
    return s;
}

static void test_config_file(void **state)
{
    (void)state;
    char *dir = make_dir("config"), path[PATH_MAX + 32], want[4 * PATH_MAX];
    snprintf(path, sizeof path, "%s/tessera.json", dir);
    write_text(path,
               "{\"host\": \"127.0.0.1\", \"port\": 9000,\n"
               " \"models\": [\"models/a.gguf\", {\"name\": \"tiny\", \"path\": \"/abs/t.gguf\"},\n"
               "            \"bare\", {\"path\": \"./b.gguf\"}],\n"
               " \"model_dir\": \"store\", \"api_keys\": \"/etc/tessera/keys.json\",\n"
               " \"protect_metrics\": true, \"chat_template\": \"chatml\",\n"
               " \"limits\": {\"max_body\": \"64K\", \"max_connections\": 32, \"max_buffered\": 4096,\n"
               "            \"grace\": 3},\n"
               " \"engine\": {\"threads\": 2, \"kv_mem\": \"16M\", \"kv_type\": \"f16\", \"kv_f16\": false,\n"
               "            \"max_seqs\": 8, \"aging\": 0.25, \"prefix_cache\": false,\n"
               "            \"spec\": \"ngram\", \"spec_max\": 4, \"spec_eager\": true,\n"
               "            \"draft_model\": \"d.gguf\"}}\n");
    cli_config c;
    ts_error err = {0};
    assert_int_equal(cli_config_load(&c, path, &err), TS_OK);
    char *got = joined(&c);
    snprintf(want, sizeof want,
             "serve --host 127.0.0.1 --port 9000 -m %s/models/a.gguf -m tiny=/abs/t.gguf -m bare "
             "-m %s/./b.gguf --model-dir %s/store --api-keys /etc/tessera/keys.json "
             "--protect-metrics --chat-template chatml --max-body 64K --max-connections 32 "
             "--max-buffered 4096 --grace 3 --threads 2 --kv-mem 16M --kv-type f16 --max-seqs 8 "
             "--aging 0.25 "
             "--no-prefix-cache --spec ngram --spec-max 4 --spec-eager --draft-model %s/d.gguf",
             dir, dir, dir, dir);
    assert_string_equal(got, want);
    free(got);
    cli_config_free(&c);

    /* The command line comes after the file's arguments, less --config FILE. */
    char *argv[] = {"serve", "--port", "0", "--config", path, "-m", "x.gguf"};
    assert_int_equal(cli_config_args(&c, 7, argv, &err), TS_OK);
    got = joined(&c);
    assert_non_null(strstr(got, "/d.gguf --port 0 -m x.gguf"));
    assert_null(strstr(got, "--config"));
    free(got);
    cli_config_free(&c);
    char *plain[] = {"serve", "--port", "0"};
    assert_int_equal(cli_config_args(&c, 3, plain, &err), TS_OK);
    assert_int_equal(c.argc, 3);
    assert_string_equal(c.argv[2], "0");
    cli_config_free(&c);
    char *twice[] = {"serve", "--config", path, "--config", path};
    assert_int_equal(cli_config_args(&c, 5, twice, &err), TS_ERR_INVALID_ARG);
    char *bare[] = {"serve", "--config"};
    assert_int_equal(cli_config_args(&c, 2, bare, &err), TS_ERR_INVALID_ARG);

    /* Each bad file is refused naming what is wrong. */
    static const struct {
        const char *json, *message;
    } bad[] = {
        {"{\"port\": 80, \"bogus\": 1}", "unknown key bogus"},
        {"{\"port\": \"80\"}", "port wants a number"},
        {"{\"limits\": {\"max_body\": true}}", "limits.max_body wants a size"},
        {"{\"limits\": {\"timeout\": 3}}", "unknown key limits.timeout"},
        {"{\"limits\": [1]}", "limits wants an object"},
        {"{\"engine\": {\"kv_f16\": 1}}", "engine.kv_f16 wants true or false"},
        {"{\"engine\": {\"kv_type\": 16}}", "engine.kv_type wants a string"},
        {"{\"models\": \"a.gguf\"}", "models wants a list"},
        {"{\"models\": [\"a\", {\"path\": \"b\", \"route\": \"c\"}]}", "unknown key models[1].route"},
        {"{\"models\": [{\"name\": \"x\"}]}", "models[0] wants a path"},
        {"{\"models\": [{\"name\": 3, \"path\": \"b\"}]}", "models[0].name wants a string"},
        {"[1, 2]", "not a JSON object"},
        {"{\"port\": 80", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(path, bad[i].json);
        memset(&err, 0, sizeof err);
        assert_int_equal(cli_config_load(&c, path, &err), TS_ERR_INVALID_ARG);
        if (!strstr(err.msg, bad[i].message))
            fail_msg("%s: '%s' does not say '%s'", bad[i].json, err.msg, bad[i].message);
        assert_null(c.argv);
    }
    snprintf(path, sizeof path, "%s/missing.json", dir);
    assert_int_equal(cli_config_load(&c, path, &err), TS_ERR_IO);
    free(dir);
}

/* serve --config with a NAME=PATH route and limits, then the command line overriding the
 * file's port: /v1/models lists the route. */
static void test_serve_config_routes(void **state)
{
    (void)state;
    char *dir = make_dir("serve-config"), path[PATH_MAX + 32], *out = NULL, builtin[PATH_MAX];
    assert_true(cli_builtin_model(builtin, sizeof builtin));
    snprintf(path, sizeof path, "%s/tessera.json", dir);
    char json[2 * PATH_MAX];
    snprintf(json, sizeof json,
             "{\"port\": 1, \"models\": [{\"name\": \"tiny\", \"path\": \"%s\"}],\n"
             " \"limits\": {\"grace\": 1}, \"engine\": {\"threads\": 1, \"kv_mem\": \"8M\"}}\n",
             builtin);
    write_text(path, json);
    int st = sh(&out,
                "d='%s'; %s/tessera serve --config \"$d/tessera.json\" --port 0 2>\"$d/log\" & "
                "pid=$!; port=; for i in $(seq 100); do "
                "port=$(sed -n 's#.*listening on http://127.0.0.1:\\([0-9]*\\).*#\\1#p' \"$d/log\"); "
                "[ -n \"$port\" ] && break; sleep 0.1; done; "
                "curl -s \"http://127.0.0.1:$port/v1/models\"; kill $pid; wait $pid",
                dir, TS_BUILD_DIR);
    if (st != 0 || !strstr(out, "\"id\":\"tiny\""))
        fail_msg("serve --config: exit %d, %s", st, out);
    free(out);
    free(dir);
}

/* A fake sysfs cpu directory: cpu i gets (package, core) = topo[i], or no topology when
 * topo[i][0] < 0. */
static char *fake_sysfs(const char *name, const int (*topo)[2], int n)
{
    char *dir = make_dir(name), path[PATH_MAX + 128];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/cpu%d", dir, i);
        assert_int_equal(mkdir(path, 0755), 0);
        if (topo[i][0] < 0)
            continue;
        snprintf(path, sizeof path, "%s/cpu%d/topology", dir, i);
        assert_int_equal(mkdir(path, 0755), 0);
        char v[32];
        snprintf(path, sizeof path, "%s/cpu%d/topology/physical_package_id", dir, i);
        snprintf(v, sizeof v, "%d\n", topo[i][0]);
        write_text(path, v);
        snprintf(path, sizeof path, "%s/cpu%d/topology/core_id", dir, i);
        snprintf(v, sizeof v, "%d\n", topo[i][1]);
        write_text(path, v);
    }
    return dir;
}

static void test_physical_cores(void **state)
{
    (void)state;
    /* two packages of two cores with two hardware threads each, then a CPU without
     * topology: core ids repeat across packages */
    static const int topo[9][2] = {{0, 0}, {0, 0}, {0, 1}, {0, 1}, {1, 0},
                                   {1, 0}, {1, 1}, {1, 1}, {-1, -1}};
    char *dir = fake_sysfs("sysfs", topo, 9);
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(cli_physical_cores(dir, &set), 0);
    for (int i = 0; i < 9; i++)
        CPU_SET(i, &set);
    assert_int_equal(cli_physical_cores(dir, &set), 5);
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CPU_SET(1, &set);
    assert_int_equal(cli_physical_cores(dir, &set), 1);
    CPU_SET(4, &set);
    CPU_SET(6, &set);
    assert_int_equal(cli_physical_cores(dir, &set), 3);
    CPU_SET(12, &set); /* not in sysfs at all: a core of its own */
    assert_int_equal(cli_physical_cores(dir, &set), 4);
    free(dir);
}

/* The binary sets the wait policy for the OpenMP runtime (re-executing itself) only where
 * the user set none, and serve says which it runs with. */
static void test_binary_openmp_defaults(void **state)
{
    (void)state;
    char *dir = make_dir("omp"), *out = NULL, notmodel[PATH_MAX + 32];
    snprintf(notmodel, sizeof notmodel, "%s/not-a-model.gguf", dir);
    write_text(notmodel, "not a model");
    const char *clean = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_NUM_THREADS "
                        "-u TESSERA_OMP_DEFAULTS";
    assert_int_equal(sh(&out, "%s %s/tessera serve -m %s --port 0", clean, TS_BUILD_DIR,
                        notmodel),
                     1);
    if (!strstr(out, "wait by GOMP_SPINCOUNT=" CLI_GOMP_SPINCOUNT " (tessera's defaults: "))
        fail_msg("no default wait policy: %s", out);
    free(out);
    assert_int_equal(sh(&out, "%s OMP_WAIT_POLICY=passive %s/tessera serve -m %s --port 0",
                        clean, TS_BUILD_DIR, notmodel),
                     1);
    if (!strstr(out, "wait by OMP_WAIT_POLICY=passive\n"))
        fail_msg("the user's policy not kept: %s", out);
    free(out);
    assert_int_equal(sh(&out, "%s GOMP_SPINCOUNT=5 OMP_NUM_THREADS=1 %s/tessera serve -m %s "
                              "--port 0",
                        clean, TS_BUILD_DIR, notmodel),
                     1);
    if (!strstr(out, "1 thread per step; idle OpenMP threads wait by GOMP_SPINCOUNT=5\n"))
        fail_msg("the user's spin count not kept: %s", out);
    free(out);
    /* -t, llama.cpp's spelling, is --threads */
    assert_int_equal(sh(&out, "%s %s/tessera serve -m %s --port 0 -t 3", clean, TS_BUILD_DIR,
                        notmodel),
                     1);
    if (!strstr(out, "3 threads per step"))
        fail_msg("-t 3 not taken as --threads 3: %s", out);
    free(out);
    free(dir);
}

/* A port in use is reported before the model loads: here the "model" is not one, so
 * loading first would fail with a different message. */
static void test_binds_before_loading(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    int port = ntohs(sa.sin_port);
    char *dir = make_dir("bind"), notmodel[PATH_MAX + 32], *out = NULL, want[96];
    snprintf(notmodel, sizeof notmodel, "%s/not-a-model.gguf", dir);
    write_text(notmodel, "not a model");
    assert_int_equal(sh(&out, "%s/tessera serve -m %s --port %d", TS_BUILD_DIR, notmodel, port),
                     1);
    snprintf(want, sizeof want, "cannot listen on 127.0.0.1 port %d: Address already in use",
             port);
    if (!strstr(out, want) || strstr(out, "not-a-model"))
        fail_msg("not bound first: %s", out);
    free(out);
    close(fd);
    free(dir);
}

static void test_table(void **state)
{
    (void)state;
    static const char *const heads[] = {"conc", "decode tok/s", "note"};
    cli_table t;
    cli_table_init(&t, 3, heads);
    cli_table_cell(&t, "%d", 1);
    cli_table_cell(&t, "%.1f", 123456.75);
    cli_table_cell(&t, "%s", "");
    cli_table_cell(&t, "%d", 64);
    cli_table_cell(&t, "%.1f", 5.0);
    cli_table_cell(&t, "%s", "*!");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_table_print(f, &t, "  ");
    fclose(f);
    /* right-aligned under headers as wide as their widest cell, two spaces apart, the
     * empty note leaving no trailing spaces */
    assert_string_equal(buf, "  conc  decode tok/s  note\n"
                             "     1      123456.8\n"
                             "    64           5.0    *!\n");
    free(buf);
}

/* convert takes a Hugging Face directory (the library's checks: test_hf_convert) */
static void test_convert_hf_cli(void **state)
{
    (void)state;
    char *dir = strdup(tu_shared("models/tinystories-656k")), *out = NULL;
    char *gguf = strdup(tu_tmp_path("hf-f16.gguf"));
    assert_int_equal(sh(&out, "%s/tessera convert -m %s --type f16 -o %s", TS_BUILD_DIR, dir,
                        gguf),
                     0);
    free(out);
    assert_int_equal(sh(&out, "%s/tessera generate -m %s -p 'Once upon a time' -n 8",
                        TS_BUILD_DIR, gguf),
                     0);
    if (!strstr(out, "Once upon a time") || !strstr(out, "tinystories-656k"))
        fail_msg("generate on the converted model: %s", out);
    free(out);
    assert_int_equal(sh(&out, "%s/tessera convert -m %s --type q9_9 -o %s", TS_BUILD_DIR, dir,
                        gguf),
                     2);
    assert_non_null(strstr(out, "f32, f16, bf16 or a type tessera quantize writes"));
    free(out);
    /* a quantize type: an F32 file first, quantized from there, and nothing left beside */
    assert_int_equal(sh(&out, "%s/tessera convert -m %s --type Q8_0 -o %s && %s/tessera info -m "
                              "%s | grep -c 'Q8_0' && ls %s.tmp-* 2>/dev/null | wc -l",
                        TS_BUILD_DIR, dir, gguf, TS_BUILD_DIR, gguf, gguf),
                     0);
    if (!strstr(out, "\n0\n"))
        fail_msg("convert --type Q8_0: %s", out);
    free(out);
    assert_int_equal(sh(&out, "%s/tessera generate -m %s -p 'Once upon a time' -n 8",
                        TS_BUILD_DIR, gguf),
                     0);
    assert_non_null(strstr(out, "Once upon a time"));
    free(out);
    free(gguf);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_search_order),
        cmocka_unit_test(test_route_args),
        cmocka_unit_test(test_binary_defaults),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_serve_config_routes),
        cmocka_unit_test(test_physical_cores),
        cmocka_unit_test(test_binary_openmp_defaults),
        cmocka_unit_test(test_binds_before_loading),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_convert_hf_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
