/* test_template_shared.c: every real template in ../shared/chat-templates, rendered by the
 * Jinja interpreter for the six conversations, gives the expected text byte for byte, or
 * raises the expected error's message. */
#include <dirent.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "template/jinja.h"
#include "template_cases.h"
#include "util.h"

/* The expected rendering (or, with *is_error, the expected error's message after the
 * exception's type name) of template name for case, or NULL when there is none. */
static char *expected(const char *dir, const char *name, const char *cs, bool *is_error)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/expected/%s.%s.txt", dir, name, cs);
    char *t = tu_read_file(path, &len);
    *is_error = false;
    if (t)
        return t;
    snprintf(path, sizeof path, "%s/expected/%s.%s.error", dir, name, cs);
    if (!(t = tu_read_file(path, &len)))
        return NULL;
    *is_error = true;
    char *msg = strstr(t, ": ");
    memmove(t, msg ? msg + 2 : t, strlen(msg ? msg + 2 : t) + 1);
    if (*t && t[strlen(t) - 1] == '\n')
        t[strlen(t) - 1] = '\0';
    return t;
}

static void test_every_shared_template(void **state)
{
    (void)state;
    const char *dir = tu_shared("chat-templates");
    DIR *d = opendir(dir);
    if (!d) {
        skip();
        return;
    }
    int templates = 0, checked = 0, failed = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (n < 7 || strcmp(de->d_name + n - 6, ".jinja"))
            continue;
        char path[1024], name[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(n - 6), de->d_name);
        size_t len;
        char *src = tu_read_file(path, &len);
        assert_non_null(src);
        jinja_template *t = NULL;
        ts_error err = {0};
        if (jinja_parse(&t, src, len, NULL, &err) != TS_OK)
            fail_msg("%s: %s", name, err.msg);
        templates++;
        for (size_t c = 0; c < N_TEMPLATE_CASES; c++) {
            bool is_error;
            char *want = expected(dir, name, template_cases[c].name, &is_error);
            if (!want)
                continue;
            cJSON *vars = cJSON_Parse(template_cases[c].body);
            assert_non_null(vars);
            cJSON_AddStringToObject(vars, "bos_token", "<s>");
            cJSON_AddStringToObject(vars, "eos_token", "</s>");
            char *got = NULL;
            ts_status st = jinja_render(t, vars, TEMPLATE_CASES_EPOCH, NULL, &got, &err);
            if (is_error) {
                if (st == TS_OK || strcmp(err.msg, want))
                    print_error("%s.%s: want error '%s', got %d '%s'\n", name,
                                template_cases[c].name, want, st, st ? err.msg : got),
                        failed++;
            } else if (st != TS_OK || strcmp(got, want)) {
                print_error("%s.%s: %s\n--- got ---\n%s\n--- want ---\n%s\n", name,
                            template_cases[c].name, st ? err.msg : "differs", got ? got : "", want);
                failed++;
            }
            checked++;
            free(got);
            free(want);
            cJSON_Delete(vars);
        }
        jinja_free(t);
        free(src);
    }
    closedir(d);
    print_message("%d templates, %d renderings checked\n", templates, checked);
    assert_int_equal(failed, 0);
    assert_true(templates >= 9);
    assert_true(checked >= 54);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_shared_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
