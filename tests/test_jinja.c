/* test_jinja.c: the Jinja interpreter, construct by construct: statements, whitespace
 * control as Hugging Face sets it, expressions, every filter, test, method and global,
 * errors with their line and column, and the sandbox's bounds. Each expected text is what
 * Python's jinja2 (trim_blocks, lstrip_blocks, loopcontrols) renders. */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "template/jinja.h"

typedef struct tcase {
    const char *src;
    const char *want;
} tcase;

/* Renders src with the JSON object vars (NULL: none) and bounds lim (NULL: defaults). */
static ts_status render_with(const char *src, const char *vars, const jinja_limits *lim, char **out,
                             ts_error *err)
{
    jinja_template *t = NULL;
    *out = NULL;
    ts_status st = jinja_parse(&t, src, strlen(src), lim, err);
    if (st != TS_OK)
        return st;
    cJSON *v = vars ? cJSON_Parse(vars) : NULL;
    if (vars && !v)
        fail_msg("bad test JSON: %s", vars);
    st = jinja_render(t, v, 1795564800, NULL, out, err);
    cJSON_Delete(v);
    jinja_free(t);
    return st;
}

static void expect_all(const tcase *cases, size_t n, const char *vars)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char *got = NULL;
        ts_error err = {0};
        ts_status st = render_with(cases[i].src, vars, NULL, &got, &err);
        if (st != TS_OK || strcmp(got, cases[i].want)) {
            print_error("%s\n  want [%s]\n  got  [%s]\n", cases[i].src, cases[i].want,
                        st == TS_OK ? got : err.msg);
            failed++;
        }
        free(got);
    }
    assert_int_equal(failed, 0);
}

#define EXPECT_ALL(cases, vars) expect_all(cases, sizeof cases / sizeof cases[0], vars)

/* src fails with status st and a message holding each of the NULL-terminated strings. */
static void expect_error(const char *src, const char *vars, const jinja_limits *lim, ts_status st,
                         ...)
{
    char *got = NULL;
    ts_error err = {0};
    ts_status s = render_with(src, vars, lim, &got, &err);
    if (s != st)
        fail_msg("%s: want status %d, got %d (%s)", src, st, s, s ? err.msg : got);
    va_list ap;
    va_start(ap, st);
    for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *))
        if (!strstr(err.msg, w))
            fail_msg("%s: message '%s' lacks '%s'", src, err.msg, w);
    va_end(ap);
    free(got);
}

static const char *const VARS =
    "{\"msgs\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
    "\"U\"},"
    " {\"role\": \"assistant\", \"content\": \"A\"}], \"d\": {\"b\": 2, \"a\": 1, \"C\": 3},"
    " \"n\": 7, \"f\": 2.5, \"s\": \"Hello World\", \"e\": \"\", \"z\": null, \"t\": true,"
    " \"words\": [\"b\", \"A\", \"a\", \"c\"], \"u\": \"h\\u00e9llo\"}";

static void test_statements(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}", "big"},
        {"{% if n > 9 %}big{% elif n > 2 %}mid{% else %}small{% endif %}", "mid"},
        {"{% if n > 9 %}big{% elif n > 8 %}mid{% else %}small{% endif %}", "small"},
        {"{% if z %}x{% endif %}.", "."},
        {"{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
         "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
         "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
        {"{% for m in msgs %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>"
         "{{ loop.nextitem.role if loop.nextitem is defined else '-' }} {% endfor %}",
         "->user system>assistant user>- "},
        {"{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
        {"{% for x in [1] %}a{% else %}empty{% endfor %}", "a"},
        {"{% for m in msgs if m.role != 'system' %}{{ loop.index }}{{ m.content }}{% endfor %}",
         "1U2A"},
        {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}"
         "{% break %}{% endif %}{{ i }}{% endfor %}",
         "013"},
        {"{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", "b=2;a=1;C=3;"},
        {"{% for k in d %}{{ k }}{% endfor %}", "baC"},
        {"{% for c in 'h\xc3\xa9y' %}[{{ c }}]{% endfor %}", "[h][\xc3\xa9][y]"},
        {"{% for x in undefined_thing %}x{% endfor %}ok", "ok"},
        {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1"},
        {"{% set ns = namespace(x=1, y='a') %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
         "{% endfor %}{{ ns.x }}{{ ns.y }}",
         "4a"},
        {"{% set ns = namespace() %}{% set ns.k = 'v' %}{{ ns.k }}", "v"},
        {"{% set b %}in {{ n }}{% endset %}[{{ b }}]", "[in 7]"},
        {"{% if true %}{% set scoped = 1 %}{% endif %}{{ scoped }}", "1"},
        {"{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
         "{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=3) }}",
         "1BNone|12None|1B3"},
        {"{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1) | int }}{% endif %}"
         "{% endmacro %}{{ fact(5) }}",
         "120"},
        {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
         "{% call wrap('b') %}bold {{ n }}{% endcall %}",
         "<b>bold 7</b>"},
        {"{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
         "{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}",
         "<1><2>"},
        {"{% filter upper %}abc {{ s }}{% endfilter %}", "ABC HELLO WORLD"},
        {"{% filter trim | replace('a', 'o') %}  banana  {% endfilter %}", "bonono"},
        {"{# a comment #}x{# another\nline #}y", "xy"},
    };
    EXPECT_ALL(cases, VARS);
}

static void test_whitespace_control(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"{% if true %}\nA\n{% endif %}\nB", "A\nB"},         /* trim_blocks */
        {"  {% if true %}\n  A\n  {% endif %}\nB", "  A\nB"}, /* lstrip_blocks */
        {"x  {% if true %}y{% endif %}", "x  y"},             /* not at a line start */
        {"  {{ 'v' }}\n", "  v"},                             /* {{ }} untouched; last \n goes */
        {"a\n\n", "a\n"},                                     /* only one trailing newline */
        {"a  {%- if true -%}  \n b  {%- endif %}", "ab"},
        {"a  {{- 'x' -}}  b", "axb"},
        {"{% if true +%}\nA{% endif %}", "\nA"}, /* +%} keeps the newline */
        {"  {%+ if true %}A{% endif %}", "  A"}, /* {%+ keeps the indent */
        {"  {# c #}\nA", "A"},                   /* comments trim as blocks */
        {"a {#- c -#} b", "ab"},
        {"x\r\n{% if true %}\r\ny{% endif %}", "x\ny"}, /* newlines normalized */
        {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}", "  1\n  2\n"},
        {"{{ 'a' }}\n{{ 'b' }}", "a\nb"},
    };
    EXPECT_ALL(cases, NULL);
}

static void test_expressions(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}",
         "7 9 3 -4 1 2"},
        {"{{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 + 1 }} {{ -n }} {{ +n }}",
         "3.5 2.0 1024 0.5 2.5 -7 7"},
        {"{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'n=' ~ n ~ z }}",
         "abcd ababab [1, 2] n=7None"},
        {"{{ 'x' 'y' }} {{ \"it's\" }} {{ 'a\\tb\\n' | length }} {{ '\\u00e9' }} {{ 'q\\'' }}",
         "xy it's 4 \xc3\xa9 q'"},
        {"{{ none }} {{ True }} {{ false }} {{ [1, 'a', none, 1.0] }} {{ {'k': 'v', 1: [2]} }}",
         "None True False [1, 'a', None, 1.0] {'k': 'v', 1: [2]}"},
        {"{{ (1, 2) }} {{ \"it's\" | list | first }} {{ [\"it's\"] }} {{ 1e3 }} {{ 0.1 + 0.2 }}",
         "(1, 2) i [\"it's\"] 1000.0 0.30000000000000004"},
        {"{{ 1e16 }} {{ 1e-5 }} {{ 123456789.125 }} {{ 0.0001 }} {{ 1.5e300 }} {{ -0.0 }} {{ 1/3 "
         "}}",
         "1e+16 1e-05 123456789.125 0.0001 1.5e+300 -0.0 0.3333333333333333"},
        {"{{ msgs[1].content }} {{ msgs[-1]['role'] }} {{ d.a }} {{ d['C'] }} {{ msgs.0.role }}",
         "U assistant 1 3 system"},
        {"{{ s[1:3] }}|{{ s[:-6] }}|{{ s[6:] }}|{{ s[::-1] }}|{{ s[::4] }}|{{ u[1:2] }}|{{ u[-1] "
         "}}",
         "el|Hello|World|dlroW olleH|Hor|\xc3\xa9|o"},
        {"{{ msgs[1:] | length }} {{ msgs[:-1][-1].role }} {{ [1, 2, 3][::-1] }} {{ [1,2][5:] }}",
         "2 user [3, 2, 1] []"},
        {"{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'a' > 'B' }} {{ 3 >= 4 }} {{ 1 == 1.0 }} {{ 'a' != 'a' }}",
         "True True True False True False"},
        {"{{ [1, 2] == [1, 2] }} {{ d == {'a': 1, 'b': 2, 'C': 3} }} {{ [1, 2] < [1, 3] }}",
         "True True True"},
        {"{{ 'ell' in s }} {{ 'x' not in s }} {{ 2 in [1, 2] }} {{ 'a' in d }} {{ 'q' in nope }}",
         "True True True True False"},
        {"{{ not e }} {{ not not n }} {{ e or 'dflt' }} {{ n and 'yes' }} {{ z or e or 0 }}",
         "True True dflt yes 0"},
        {"{{ 'y' if t else 'n' }} {{ 'y' if z else 'n' }} [{{ 'y' if z }}]", "y n []"},
        {"{{ undefined_thing }}|{{ d.missing }}|{{ s.content }}|{{ msgs[9] }}", "|||"},
        {"{{ not t == false }} {{ 1 ~ 2 + 3 ~ 4 }} {{ 'a' ~ 1 * 2 }}", "True 1234 a2"},
    };
    EXPECT_ALL(cases, VARS);
}

static void test_filters(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"[{{ '  a b \\n' | trim }}] [{{ 'xxaxx' | trim('x') }}] {{ s | upper }} {{ s | lower }}",
         "[a b] [a] HELLO WORLD hello world"},
        {"{{ 'hello wORLD-x (y' | title }} {{ 'hELLO there' | capitalize }}",
         "Hello World-X (Y Hello there"},
        {"{{ s | length }} {{ u | length }} {{ msgs | length }} {{ d | count }} {{ nope | length "
         "}}",
         "11 5 3 3 0"},
        {"{{ msgs | first | tojson }} {{ (msgs | last).role }} {{ s | first }} {{ [] | first }}",
         "{\"role\": \"system\", \"content\": \"S\"} assistant H "},
        {"{{ words | join }} {{ words | join(', ') }} {{ msgs | join('/', attribute='role') }}",
         "bAac b, A, a, c system/user/assistant"},
        {"{{ s | replace('o', '0') }} {{ 'aaa' | replace('a', 'b', 2) }}", "Hell0 W0rld bba"},
        {"{{ nope | default('d') }} {{ e | default('d') }} {{ e | default('d', true) }} {{ z | "
         "d(1) }}",
         "d  d None"},
        {"{{ d | tojson }} {{ [1, 'é', none, true, 2.5] | tojson }} {{ 'q\"\\n' | tojson }}",
         "{\"b\": 2, \"a\": 1, \"C\": 3} [1, \"\xc3\xa9\", null, true, 2.5] \"q\\\"\\n\""},
        {"{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}",
         "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"},
        {"{{ d | tojson(separators=(',', ':'), sort_keys=true) }}", "{\"C\":3,\"a\":1,\"b\":2}"},
        {"{{ n | string ~ 'x' }} {{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | "
         "int(9) }} {{ f | int }}",
         "7x 43 4 0 9 2"},
        {"{{ 'ab' | list }} {{ d | list }} {{ d | items | list }}",
         "['a', 'b'] ['b', 'a', 'C'] [('b', 2), ('a', 1), ('C', 3)]"},
        {"{{ msgs | map(attribute='role') | join(',') }} {{ ['a', 'B'] | map('upper') | list }}",
         "system,user,assistant ['A', 'B']"},
        {"{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }}"
         " {{ [0, 1, '', 'x'] | select | list }} {{ [3, 5, 6] | select('divisibleby', 3) | list }}",
         "[1, 3] [2, 4] [1, 'x'] [3, 6]"},
        {"{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | first }}"
         " {{ msgs | rejectattr('role', 'in', ['user', 'system']) | list | length }}"
         " {{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list | length }}",
         "U 1 1"},
        {"{{ words | unique | list }} {{ words | unique(case_sensitive=true) | list }}",
         "['b', 'A', 'c'] ['b', 'A', 'a', 'c']"},
        {"{{ words | sort }} {{ words | sort(reverse=true) }} {{ words | sort(case_sensitive=true) "
         "}}",
         "['A', 'a', 'b', 'c'] ['c', 'b', 'A', 'a'] ['A', 'a', 'b', 'c']"},
        {"{{ msgs | sort(attribute='role') | map(attribute='content') | join }} {{ [3, 1.5, 2] | "
         "sort }}",
         "ASU [1.5, 2, 3]"},
        {"{{ d | dictsort }} {{ d | dictsort(by='value', reverse=true) }}",
         "[('a', 1), ('b', 2), ('C', 3)] [('C', 3), ('b', 2), ('a', 1)]"},
        {"{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }}",
         "[[1, 2], [3, 4], [5]] [[1, 2], [3, 0]]"},
        {"{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | "
         "indent('>', blank=true) }}",
         "a\n    b\n\n    c|  a\n  b|a\n>\n>b"},
        {"{{ [1, 2.5] | sum }} {{ [{'k': 2}, {'k': 3}] | sum(attribute='k', start=1) }} {{ words | "
         "min }}"
         " {{ words | max }} {{ words | max(case_sensitive=true) }} {{ [] | min }}|",
         "3.5 6 A c c |"},
        {"{{ '<b>' | safe }} {{ -3 | abs }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }}",
         "<b> 3 [2, 1] cba"},
    };
    EXPECT_ALL(cases, VARS);
}

static void test_tests(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"{{ n is defined }}{{ nope is defined }}{{ nope is undefined }}{{ z is none }}{{ n is "
         "none }}",
         "TrueFalseTrueTrueFalse"},
        {"{{ s is string }}{{ n is string }}{{ d is mapping }}{{ msgs is mapping }}",
         "TrueFalseTrueFalse"},
        {"{{ s is iterable }}{{ msgs is iterable }}{{ d is iterable }}{{ n is iterable }}{{ s is "
         "sequence }}",
         "TrueTrueTrueFalseTrue"},
        {"{{ n is number }}{{ f is number }}{{ s is number }}{{ n is integer }}{{ f is float }}{{ "
         "t is boolean }}",
         "TrueTrueFalseTrueTrueTrue"},
        {"{{ t is true }}{{ t is false }}{{ n is equalto 7 }}{{ n is eq(8) }}{{ n is ne 8 }}{{ 'a' "
         "is in 'cat' }}",
         "TrueFalseTrueFalseTrueTrue"},
        {"{{ n is odd }}{{ n is even }}{{ 9 is divisibleby 3 }}{{ 'ab' is lower }}{{ 'AB' is upper "
         "}}",
         "TrueFalseTrueTrueTrue"},
        {"{{ n is gt 3 }}{{ n is lt 3 }}{{ n is ge 7 }}{{ n is le 6 }}{{ z is sameas none }}{{ n "
         "is not none }}",
         "TrueFalseTrueFalseTrueTrue"},
        {"{% macro m() %}{% endmacro %}{{ m is callable }}{{ n is callable }}", "TrueFalse"},
    };
    EXPECT_ALL(cases, VARS);
}

static void test_methods_and_globals(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"[{{ '  x '.strip() }}][{{ '  x '.lstrip() }}][{{ '  x '.rstrip() }}][{{ 'xyx'.strip('x') "
         "}}]",
         "[x][x ][  x][y]"},
        {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}",
         "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']"},
        {"{{ s.startswith('He') }}{{ s.endswith('xx') }}{{ s.startswith(('x', 'Hell')) }}",
         "TrueFalseTrue"},
        {"{{ s.upper() }} {{ s.lower() }} {{ 'ab cd'.title() }} {{ 'aB'.capitalize() }}",
         "HELLO WORLD hello world Ab Cd Ab"},
        {"{{ s.replace('l', 'L') }} {{ s.find('o') }} {{ s.find('q') }} {{ s.count('l') }} {{ "
         "'-'.join(['a', 'b']) }}",
         "HeLLo WorLd 4 -1 3 a-b"},
        {"{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }}",
         "[('b', 2), ('a', 1), ('C', 3)] ['b', 'a', 'C'] [2, 1, 3]"},
        {"{{ d.get('a') }} {{ d.get('q') }} {{ d.get('q', 5) }}", "1 None 5"},
        {"{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}",
         "[0, 1, 2] [1, 3, 5] [3, 2, 1]"},
        {"{{ strftime_now('%Y-%m-%d %B') }} {{ dict(a=1) }} {{ namespace(x=1).x }}",
         "2026-11-25 November {'a': 1} 1"},
    };
    EXPECT_ALL(cases, VARS);
    /* Hugging Face's immutable sandbox refuses these two; llama.cpp's engine and this one
     * let templates build lists with them. */
    static const tcase mutating[] = {
        {"{% set l = [1] %}{{ l.append(2) }}{{ l }} {{ l.pop() }}{{ l }}", "None[1, 2] 2[1]"},
    };
    EXPECT_ALL(mutating, NULL);
    expect_error("{{ raise_exception('no ' ~ n) }}", VARS, NULL, TS_ERR_INVALID_ARG, "no 7", NULL);
}

static void test_errors_name_line_and_column(void **state)
{
    (void)state;
    /* Load time: syntax, then constructs outside the subset. */
    expect_error("a\n{{ 1 + }}", NULL, NULL, TS_ERR_FORMAT, "line 2 col 8", NULL);
    expect_error("{% if x %}a", NULL, NULL, TS_ERR_FORMAT, "line 1 col 4", "endif", NULL);
    expect_error("{% for x in y %}{% endif %}", NULL, NULL, TS_ERR_FORMAT, "line 1 col 20",
                 "unexpected {% endif %}", NULL);
    expect_error("{{ 'abc }}", NULL, NULL, TS_ERR_FORMAT, "line 1 col 4", "unterminated", NULL);
    expect_error("{# never closed", NULL, NULL, TS_ERR_FORMAT, "unclosed comment", NULL);
    expect_error("{{ x", NULL, NULL, TS_ERR_FORMAT, "missing }}", NULL);
    expect_error("{{ x $ y }}", NULL, NULL, TS_ERR_FORMAT, "line 1 col 6", NULL);
    expect_error("{% break %}", NULL, NULL, TS_ERR_FORMAT, "outside a loop", NULL);
    expect_error("\n  {% extends 'base' %}", NULL, NULL, TS_ERR_UNSUPPORTED, "line 2 col 6",
                 "unsupported statement 'extends'", NULL);
    expect_error("{{ x | wordcount }}", NULL, NULL, TS_ERR_UNSUPPORTED, "line 1 col 8",
                 "unsupported filter 'wordcount'", NULL);
    expect_error("{{ x is escaped }}", NULL, NULL, TS_ERR_UNSUPPORTED, "line 1 col 9",
                 "unsupported test 'escaped'", NULL);
    expect_error("{{ x.format(1) }}", NULL, NULL, TS_ERR_UNSUPPORTED, "line 1 col 6",
                 "unsupported method 'format'", NULL);
    expect_error("{{ lipsum(2) }}", NULL, NULL, TS_ERR_UNSUPPORTED, "line 1 col 4",
                 "unsupported function 'lipsum'", NULL);
    expect_error("{% raw %}x{% endraw %}", NULL, NULL, TS_ERR_UNSUPPORTED, "'raw'", NULL);
    expect_error("{% for x in y recursive %}{% endfor %}", NULL, NULL, TS_ERR_UNSUPPORTED,
                 "recursive", NULL);
    expect_error("{{ f(*a) }}", NULL, NULL, TS_ERR_UNSUPPORTED, "*args", NULL);
    /* Render time: the value's problem, where it happened. */
    expect_error("ok\n  {{ 1 + 'a' }}", NULL, NULL, TS_ERR_INVALID_ARG, "line 2 col 8",
                 "int and string", NULL);
    expect_error("{{ nope.attr }}", NULL, NULL, TS_ERR_INVALID_ARG, "line 1 col 9", "undefined",
                 NULL);
    expect_error("{{ 1 // 0 }}", NULL, NULL, TS_ERR_INVALID_ARG, "division by zero", NULL);
    expect_error("{% set x = 1 %}{% set x.y = 2 %}", NULL, NULL, TS_ERR_INVALID_ARG,
                 "not a namespace", NULL);
    expect_error("{{ 1 < 'a' }}", NULL, NULL, TS_ERR_INVALID_ARG, "cannot compare", NULL);
    expect_error("{% for x in 5 %}{% endfor %}", NULL, NULL, TS_ERR_INVALID_ARG, "not iterable",
                 NULL);
    expect_error("{{ 9223372036854775807 + 1 }}", NULL, NULL, TS_ERR_INVALID_ARG, "overflow", NULL);
}

static void test_bounds(void **state)
{
    (void)state;
    jinja_limits lim = {0};
    lim.max_steps = 10000;
    expect_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                 NULL, &lim, TS_ERR_TOO_LONG, "steps", NULL);
    lim = (jinja_limits){.max_output = 100};
    expect_error("{% for i in range(1000) %}xx{% endfor %}", NULL, &lim, TS_ERR_TOO_LONG,
                 "output over 100 bytes", NULL);
    lim = (jinja_limits){.max_output = 100};
    expect_error("{{ 'x' * 1000 }}", NULL, &lim, TS_ERR_TOO_LONG, "too large", NULL);
    expect_error("{% macro r(k) %}{{ r(k + 1) }}{% endmacro %}{{ r(0) }}", NULL, NULL,
                 TS_ERR_TOO_LONG, "nested over 64 deep", NULL);
    lim = (jinja_limits){.max_memory = 1 << 16};
    expect_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                 "{% set ns.l = ns.l + [i] %}{% endfor %}",
                 NULL, &lim, TS_ERR_TOO_LONG, "memory", NULL);
    lim = (jinja_limits){.max_nodes = 20};
    expect_error("{{ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 }}", NULL, &lim, TS_ERR_TOO_LONG,
                 "nodes", NULL);
    char deep[400];
    memset(deep, 0, sizeof deep);
    strcpy(deep, "{{ ");
    for (int i = 0; i < 150; i++)
        strcat(deep, "(");
    strcat(deep, "1");
    for (int i = 0; i < 150; i++)
        strcat(deep, ")");
    strcat(deep, " }}");
    expect_error(deep, NULL, NULL, TS_ERR_TOO_LONG, "nested more than 64 deep", NULL);
    /* A list that holds itself: printing and comparing it stop at a depth. */
    expect_error("{% set l = [] %}{{ l.append(l) }}{{ l == [l] }}{{ l }}", NULL, NULL,
                 TS_ERR_INVALID_ARG, "cannot print", NULL);
    /* Many string literals in a large template: each takes only its own bytes. */
    size_t n = 20000, len = 0;
    char *big = malloc(n * 16 + 1);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(big + len, "{{ 'abcdef' }}\n");
    char *out = NULL;
    ts_error err = {0};
    assert_int_equal(render_with(big, NULL, NULL, &out, &err), TS_OK);
    assert_int_equal(strlen(out), 7 * n - 1);
    free(out);
    free(big);
    lim = (jinja_limits){.max_source = 10};
    expect_error("{{ 'more than ten bytes' }}", NULL, &lim, TS_ERR_TOO_LONG, "over the limit",
                 NULL);
}

/* "{{ 'a'" + op repeated n times + " }}", malloc'd. */
static char *chain(const char *op, int n)
{
    size_t len = 0, cap = strlen(op) * (size_t)n + 16;
    char *s = malloc(cap);
    assert_non_null(s);
    len += (size_t)sprintf(s, "{{ 'a'");
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(s + len, "%s", op);
    strcpy(s + len, " }}");
    return s;
}

/* Chains of 20,000 operators (about 120 KB) used to overflow the C stack while rendering
 * (ASan: stack-overflow): each kind is now refused at parse, with where it went over. */
static void test_operator_chains_refused(void **state)
{
    (void)state;
    static const char *const ops[] = {"|upper", ".x",    " + 'a'", " ~ 'a'", " and 1",
                                      " == 1",  " or 1", "[0]",    " * 1",   " is string"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char *src = chain(ops[i], 20000);
        jinja_template *t = NULL;
        ts_error err = {0};
        ts_status st = jinja_parse(&t, src, strlen(src), NULL, &err);
        if (st != TS_ERR_TOO_LONG || !strstr(err.msg, "nested more than 256 deep") ||
            !strstr(err.msg, "line 1 col "))
            fail_msg("chain of '%s': status %d, message '%s'", ops[i], st, err.msg);
        jinja_free(t);
        free(src);
    }
    /* The bound is a parse bound: with a larger one the chain renders, one frame a level. */
    char *src = chain("|upper", 250);
    char *out = NULL;
    ts_error err = {0};
    assert_int_equal(render_with(src, NULL, NULL, &out, &err), TS_OK);
    assert_string_equal(out, "A");
    free(out);
    free(src);
    jinja_limits lim = {.max_tree_depth = 100};
    src = chain(" ~ 'a'", 120);
    expect_error(src, NULL, &lim, TS_ERR_TOO_LONG, "nested more than 100 deep", NULL);
    free(src);
}

/* Macros calling macros stack their trees: the run-time count of nested evaluations
 * stops them before the 64 macro calls would (each level here is a 200-operator chain). */
static char *macro_tower(int levels)
{
    size_t len = 0;
    char *src = malloc(8192);
    assert_non_null(src);
    len += (size_t)sprintf(src, "{%% macro r(k) %%}{{ (r(k + 1) if k < %d else '')", levels);
    for (int i = 0; i < 200; i++)
        len += (size_t)sprintf(src + len, " ~ 'a'");
    sprintf(src + len, " }}{%% endmacro %%}{{ r(0)|length }}");
    return src;
}

static void test_eval_depth_bounded(void **state)
{
    (void)state;
    char *src = macro_tower(60);
    expect_error(src, NULL, NULL, TS_ERR_TOO_LONG, "nested over 2048 evaluations deep", "line 1",
                 NULL);
    free(src);
    src = macro_tower(5); /* 6 levels of 200: within the bound */
    char *out = NULL;
    ts_error err = {0};
    assert_int_equal(render_with(src, NULL, NULL, &out, &err), TS_OK);
    assert_string_equal(out, "1200");
    free(out);
    free(src);
}

/* Repetition of nothing is nothing, at once: "" * 2**63-1 used to loop 2**63 times. */
static void test_empty_repetition(void **state)
{
    (void)state;
    static const tcase cases[] = {
        {"[{{ '' * 9223372036854775807 }}]", "[]"},
        {"{{ ([] * 9223372036854775807)|length }}", "0"},
        {"{{ (-1) ** 9223372036854775807 }} {{ (-1) ** 4 }} {{ (-1) ** 3 }}", "-1 1 -1"},
    };
    EXPECT_ALL(cases, NULL);
}

/* String operations charge the bytes they scan inside their loops: one call on a long
 * string is refused by the work bound, where it counted a single step before. */
static void test_string_work_charged(void **state)
{
    (void)state;
    jinja_limits lim = {.max_work = 1000000};
    static const char *const ops[] = {
        "{{ s.count('b') }}",  "{{ s.find('b') }}",  "{{ s.replace('b', 'c')|length }}",
        "{{ 'b' in s }}",      "{{ s.split('b')|length }}", "{{ s.upper()|length }}",
        "{{ s|length }}",      "{{ s.strip('b')|length }}", "{{ (s ~ '')|length }}",
        "{{ s[1:]|length }}",  "{{ s == s ~ '' }}",  "{{ [s]|tojson|length }}",
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char src[200];
        snprintf(src, sizeof src, "{%% set s = 'a' * 2000000 %%}%s", ops[i]);
        expect_error(src, NULL, &lim, TS_ERR_TOO_LONG, "units of work", NULL);
    }
    /* count/find of a near-miss pattern cost the product of the lengths before: now
     * linear, so the default budget covers 2 MB against 1 MB. */
    char *out = NULL;
    ts_error err = {0};
    assert_int_equal(render_with("{% set a = 'a' * 2000000 %}{% set b = 'a' * 999999 + 'b' %}"
                                 "{{ a.count(b) }} {{ a.find(b) }} {{ (a ~ b).find(b) }}",
                                 NULL, NULL, &out, &err),
                     TS_OK);
    assert_string_equal(out, "0 -1 2000000");
    free(out);
}

/* Lists sharing items stand for huge values: printing, joining or serialising them stops
 * at the byte bound, and comparing them at the work bound. */
static void test_shared_values_bounded(void **state)
{
    (void)state;
    const char *big = "{% set a = ['xxxxxxxxxx'] * 1000 %}{% set b = [a] * 1000 %}"
                      "{% set c = [b] * 100 %}";
    static const char *const uses[] = {"{{ c|tojson }}", "{{ c }}", "{{ c|string }}",
                                       "{{ c ~ '' }}", "{{ c|join(',') }}"};
    for (size_t i = 0; i < sizeof uses / sizeof *uses; i++) {
        char src[300];
        snprintf(src, sizeof src, "%s%s", big, uses[i]);
        expect_error(src, NULL, NULL, TS_ERR_TOO_LONG, "over 4194304 bytes", NULL);
    }
    expect_error("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}"
                 "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l == ns.l }}",
                 NULL, NULL, TS_ERR_TOO_LONG, "units of work", NULL);
    expect_error("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}"
                 "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ [ns.l, ns.l]|sort }}",
                 NULL, NULL, TS_ERR_TOO_LONG, "units of work", NULL);
}

/* A NUL in a template would cut its rendering short: refused at parse, naming where. */
static void test_nul_refused(void **state)
{
    (void)state;
    static const char src[] = "ab\ncd\0{{ 1 }}";
    jinja_template *t = NULL;
    ts_error err = {0};
    assert_int_equal(jinja_parse(&t, src, sizeof src - 1, NULL, &err), TS_ERR_FORMAT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "line 2 col 3: a NUL byte"));
}

/* A render stops when the caller's flag is set, with its own status. */
static void test_render_cancelled(void **state)
{
    (void)state;
    const char *src = "{% for i in range(100) %}x{% endfor %}";
    jinja_template *t = NULL;
    ts_error err = {0};
    assert_int_equal(jinja_parse(&t, src, strlen(src), NULL, &err), TS_OK);
    atomic_bool cancel = true;
    char *out = NULL;
    assert_int_equal(jinja_render(t, NULL, 0, &cancel, &out, &err), TS_ERR_CANCELLED);
    assert_null(out);
    assert_non_null(strstr(err.msg, "cancelled"));
    atomic_store(&cancel, false);
    assert_int_equal(jinja_render(t, NULL, 0, &cancel, &out, &err), TS_OK);
    assert_int_equal(strlen(out), 100);
    free(out);
    jinja_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_whitespace_control),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_tests),
        cmocka_unit_test(test_methods_and_globals),
        cmocka_unit_test(test_errors_name_line_and_column),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_operator_chains_refused),
        cmocka_unit_test(test_eval_depth_bounded),
        cmocka_unit_test(test_empty_repetition),
        cmocka_unit_test(test_string_work_charged),
        cmocka_unit_test(test_shared_values_bounded),
        cmocka_unit_test(test_render_cancelled),
        cmocka_unit_test(test_nul_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
