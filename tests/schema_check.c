/* schema_check.c: the JSON-schema tests' validator, schema generator and automaton walk
 * (schema_check.h). The validator shares no code with src/grammar: patterns go through
 * POSIX extended regular expressions (the table below pairs each generated pattern with
 * its ERE spelling), formats are checked by hand, lengths count UTF-8 characters. */
#include <arpa/inet.h>
#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"
#include "schema_check.h"

uint64_t sc_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

void sc_init(void)
{
    if (!setlocale(LC_CTYPE, "C.UTF-8"))
        setlocale(LC_CTYPE, "en_US.UTF-8");
}

/* Generated patterns (JSON Schema spelling) and the same language in POSIX ERE, for a
 * search (JSON Schema's semantics: the pattern may match anywhere). */
const char *const sc_patterns[][2] = {
    {"^[a-z]{2,5}$", "^[a-z]{2,5}$"},
    {"[A-Z][a-z]*", "[A-Z][a-z]*"},
    {"^\\d{3}-\\d{4}$", "^[0-9]{3}-[0-9]{4}$"},
    {"^(ab|cd)+x?$", "^(ab|cd)+x?$"},
    {"^\\w+@\\w+\\.com$", "^[A-Za-z0-9_]+@[A-Za-z0-9_]+\\.com$"},
    {"^[^\"\\\\]{1,8}$", "^[^\"\\]{1,8}$"},
    {"^\\s?[0-9a-f]{4}$", "^[[:space:]]?[0-9a-f]{4}$"},
    {"^.{3}$", "^.{3}$"},
    {"^é+ü?$", "^é+ü?$"},
    {"^[α-ω]{2}[0-9]*$", "^[αβγδεζηθικλμνξοπρςστυφχψω]{2}[0-9]*$"}, /* glibc refuses
                                                                  * multibyte ranges */
    {"(?:x|y)z", "(x|y)z"},
    {"^a{0}b\\.?$", "^b\\.?$"},
    {"^[\\-+]?\\d+(\\.\\d{1,2})?$", "^[-+]?[0-9]+(\\.[0-9]{1,2})?$"},
    {"^\\S\\W\\D$", "^[^[:space:]][^A-Za-z0-9_][^0-9]$"},
    {"^(a|ab|ac|b)$", "^(a|ab|ac|b)$"}, /* small languages: a few values in all */
    {"^a(b|c)?$", "^a(b|c)?$"},
};

const char *const sc_formats[SC_N_FORMATS] = {"date", "time", "date-time", "uuid", "ipv4",
                                              "ipv6", "hostname", "email", "uri"};
const int sc_n_patterns = (int)(sizeof sc_patterns / sizeof sc_patterns[0]);

/* ---- validating */

typedef struct val {
    const cJSON *root;
    char *why;
    size_t why_size;
} val;

static bool no(val *v, const char *what, const cJSON *at)
{
    char *text = cJSON_PrintUnformatted(at);
    snprintf(v->why, v->why_size, "%s: %.120s", what, text ? text : "?");
    free(text);
    return false;
}

static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int num(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + s[i] - '0';
    return v;
}

static bool is_date(const char *s)
{
    if (strlen(s) < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' ||
        !digits(s + 8, 2))
        return false;
    int y = num(s, 4), m = num(s + 5, 2), d = num(s + 8, 2);
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] + (m == 2 && leap);
}

static bool is_time(const char *s)
{
    if (!digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' || !digits(s + 6, 2) ||
        num(s, 2) > 23 || num(s + 3, 2) > 59 || num(s + 6, 2) > 59)
        return false;
    s += 8;
    if (*s == '.') {
        int n = 0;
        while (s[1 + n] >= '0' && s[1 + n] <= '9')
            n++;
        if (n == 0)
            return false;
        s += 1 + n;
    }
    if (*s == 'Z' || *s == 'z')
        return s[1] == '\0';
    return (*s == '+' || *s == '-') && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2) &&
           num(s + 1, 2) <= 23 && num(s + 4, 2) <= 59 && s[6] == '\0';
}

/* RFC 1123 host name: dot-separated labels of 1-63 letters, digits and hyphens, neither
 * first nor last a hyphen; 253 bytes at most. */
static bool is_hostname(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (const char *label = s;;) {
        size_t len = strcspn(label, ".");
        if (len == 0 || len > 63 || label[0] == '-' || label[len - 1] == '-')
            return false;
        for (size_t i = 0; i < len; i++)
            if (!isalnum((unsigned char)label[i]) && label[i] != '-')
                return false;
        if (!label[len])
            return true;
        label += len + 1;
    }
}

/* local@domain: a dot-atom local part (RFC 5322 atext, no leading, trailing or double
 * dot) and a host name of two labels or more. */
static bool is_email(const char *s)
{
    const char *at = strchr(s, '@');
    if (!at || at == s || at - s > 64 || strchr(at + 1, '@') || !strchr(at + 1, '.'))
        return false;
    for (const char *p = s; p < at; p++) {
        bool dot = *p == '.';
        if (dot && (p == s || p + 1 == at || p[1] == '.'))
            return false;
        if (!dot && !isalnum((unsigned char)*p) && !strchr("!#$%&'*+/=?^_`{|}~-", *p))
            return false;
    }
    return is_hostname(at + 1);
}

/* RFC 3986 URI with an authority: scheme "://" host [":" port] then path, query and
 * fragment characters (unreserved, sub-delims, ':', '@', '/', '?', and %XX). */
static bool is_uri(const char *s)
{
    size_t k = 0;
    if (!isalpha((unsigned char)s[0]))
        return false;
    while (isalnum((unsigned char)s[k]) || s[k] == '+' || s[k] == '-' || s[k] == '.')
        k++;
    if (strncmp(s + k, "://", 3))
        return false;
    s += k + 3;
    size_t host = strcspn(s, ":/?#");
    char name[256];
    if (host == 0 || host >= sizeof name)
        return false;
    memcpy(name, s, host);
    name[host] = '\0';
    if (!is_hostname(name))
        return false;
    s += host;
    if (*s == ':')
        for (s++; isdigit((unsigned char)*s); s++) {}
    for (; *s; s++) {
        if (*s == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2]))
            s += 2;
        else if (!isalnum((unsigned char)*s) && !strchr("-._~!$&'()*+,;=:@/?#", *s))
            return false;
    }
    return true;
}

static bool is_format(const char *f, const char *s)
{
    if (!strcmp(f, "hostname"))
        return is_hostname(s);
    if (!strcmp(f, "email"))
        return is_email(s);
    if (!strcmp(f, "uri"))
        return is_uri(s);
    if (!strcmp(f, "ipv6")) {
        unsigned char addr[16];
        return !strchr(s, '%') && inet_pton(AF_INET6, s, addr) == 1;
    }
    if (!strcmp(f, "date"))
        return strlen(s) == 10 && is_date(s);
    if (!strcmp(f, "time"))
        return is_time(s);
    if (!strcmp(f, "date-time"))
        return strlen(s) > 11 && is_date(s) && (s[10] == 'T' || s[10] == 't') && is_time(s + 11);
    if (!strcmp(f, "uuid")) {
        if (strlen(s) != 36)
            return false;
        for (int i = 0; i < 36; i++)
            if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]) || !s[i])
                return false;
        return true;
    }
    /* ipv4: four decimal octets, no leading zeros */
    for (int part = 0; part < 4; part++) {
        int n = 0;
        while (s[n] >= '0' && s[n] <= '9')
            n++;
        if (n == 0 || n > 3 || (n > 1 && s[0] == '0') || num(s, n) > 255)
            return false;
        s += n;
        if (part < 3 && *s++ != '.')
            return false;
    }
    return *s == '\0';
}

static bool pattern_ok(val *v, const char *pattern, const char *s, const cJSON *at)
{
    const char *ere = NULL;
    for (int i = 0; i < sc_n_patterns && !ere; i++)
        if (!strcmp(sc_patterns[i][0], pattern))
            ere = sc_patterns[i][1];
    if (!ere)
        return no(v, "a pattern the test does not know", at);
    regex_t re;
    if (regcomp(&re, ere, REG_EXTENDED | REG_NOSUB))
        return no(v, "the test's ERE does not compile", at);
    bool ok = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return ok || no(v, "pattern", at);
}

static const cJSON *resolve(const val *v, const char *ref)
{
    const cJSON *at = v->root;
    const char *p = ref + 1;
    while (at && *p == '/') {
        char seg[128];
        size_t n = 0;
        for (p++; *p && *p != '/' && n + 1 < sizeof seg; p++)
            seg[n++] = *p;
        seg[n] = '\0';
        at = cJSON_GetObjectItemCaseSensitive(at, seg);
    }
    return at;
}

static bool check(val *v, const cJSON *sch, const cJSON *x, int depth);

static bool type_ok(const char *t, const cJSON *x)
{
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble);
    return (!strcmp(t, "number") && cJSON_IsNumber(x)) || (!strcmp(t, "string") && cJSON_IsString(x)) ||
           (!strcmp(t, "boolean") && cJSON_IsBool(x)) || (!strcmp(t, "null") && cJSON_IsNull(x)) ||
           (!strcmp(t, "object") && cJSON_IsObject(x)) || (!strcmp(t, "array") && cJSON_IsArray(x));
}

static bool check_object(val *v, const cJSON *sch, const cJSON *x, int depth)
{
    const cJSON *props = cJSON_GetObjectItem(sch, "properties"), *m, *r;
    const cJSON *add = cJSON_GetObjectItem(sch, "additionalProperties");
    cJSON_ArrayForEach(m, x) {
        for (const cJSON *k = x->child; k != m; k = k->next)
            if (!strcmp(k->string, m->string))
                return no(v, "a key twice", x);
        const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
        if (ps && !check(v, ps, m, depth + 1))
            return false;
        if (!ps && cJSON_IsFalse(add))
            return no(v, "an additional property", x);
        if (!ps && add && !check(v, add, m, depth + 1))
            return false;
    }
    const cJSON *k;
    int n = cJSON_GetArraySize(x);
    if ((k = cJSON_GetObjectItem(sch, "minProperties")) && n < (int)k->valuedouble)
        return no(v, "minProperties", x);
    if ((k = cJSON_GetObjectItem(sch, "maxProperties")) && n > (int)k->valuedouble)
        return no(v, "maxProperties", x);
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(sch, "required"))
        if (!cJSON_GetObjectItemCaseSensitive(x, r->valuestring))
            return no(v, "a required property is missing", x);
    return true;
}

static bool check_typed(val *v, const cJSON *sch, const cJSON *x, int depth)
{
    const cJSON *k;
    if (cJSON_IsString(x)) {
        size_t n = utf8_len(x->valuestring);
        if ((k = cJSON_GetObjectItem(sch, "minLength")) && n < (size_t)k->valuedouble)
            return no(v, "minLength", x);
        if ((k = cJSON_GetObjectItem(sch, "maxLength")) && n > (size_t)k->valuedouble)
            return no(v, "maxLength", x);
        if ((k = cJSON_GetObjectItem(sch, "pattern")) && !pattern_ok(v, k->valuestring, x->valuestring, x))
            return false;
        if ((k = cJSON_GetObjectItem(sch, "format")) && !is_format(k->valuestring, x->valuestring))
            return no(v, "format", x);
    }
    if (cJSON_IsNumber(x)) {
        double d = x->valuedouble;
        if ((k = cJSON_GetObjectItem(sch, "minimum")) && !(d >= k->valuedouble))
            return no(v, "minimum", x);
        if ((k = cJSON_GetObjectItem(sch, "maximum")) && !(d <= k->valuedouble))
            return no(v, "maximum", x);
        if ((k = cJSON_GetObjectItem(sch, "exclusiveMinimum")) && !(d > k->valuedouble))
            return no(v, "exclusiveMinimum", x);
        if ((k = cJSON_GetObjectItem(sch, "exclusiveMaximum")) && !(d < k->valuedouble))
            return no(v, "exclusiveMaximum", x);
    }
    if (cJSON_IsArray(x)) {
        int n = cJSON_GetArraySize(x);
        if ((k = cJSON_GetObjectItem(sch, "minItems")) && n < (int)k->valuedouble)
            return no(v, "minItems", x);
        if ((k = cJSON_GetObjectItem(sch, "maxItems")) && n > (int)k->valuedouble)
            return no(v, "maxItems", x);
        const cJSON *items = cJSON_GetObjectItem(sch, "items"), *e;
        const cJSON *prefix = cJSON_GetObjectItem(sch, "prefixItems");
        if (cJSON_IsArray(items)) /* the older spelling of prefixItems */
            prefix = items, items = NULL;
        int i = 0, n_prefix = prefix ? cJSON_GetArraySize(prefix) : 0;
        cJSON_ArrayForEach(e, x) {
            const cJSON *under = i < n_prefix ? cJSON_GetArrayItem(prefix, i) : items;
            i++;
            if (under && !check(v, under, e, depth + 1))
                return false;
        }
        if ((k = cJSON_GetObjectItem(sch, "uniqueItems")) && cJSON_IsTrue(k))
            for (const cJSON *a = x->child; a; a = a->next)
                for (const cJSON *b = a->next; b; b = b->next)
                    if (cJSON_Compare(a, b, true))
                        return no(v, "uniqueItems", x);
    }
    if (cJSON_IsObject(x) && !check_object(v, sch, x, depth))
        return false;
    return true;
}

static bool check(val *v, const cJSON *sch, const cJSON *x, int depth)
{
    if (depth > 200)
        return no(v, "nested too deep to check", x);
    if (cJSON_IsBool(sch))
        return cJSON_IsTrue(sch) || no(v, "the false schema", x);
    const cJSON *k, *e;
    if ((k = cJSON_GetObjectItem(sch, "$ref")))
        return check(v, resolve(v, k->valuestring), x, depth + 1);
    if ((k = cJSON_GetObjectItem(sch, "anyOf"))) {
        char keep[256];
        snprintf(keep, sizeof keep, "%s", v->why);
        cJSON_ArrayForEach(e, k)
            if (check(v, e, x, depth + 1))
                return true;
        return no(v, "anyOf: no alternative", x);
    }
    if ((k = cJSON_GetObjectItem(sch, "oneOf"))) {
        int n = 0;
        cJSON_ArrayForEach(e, k)
            n += check(v, e, x, depth + 1);
        return n == 1 || no(v, n ? "oneOf: several alternatives" : "oneOf: none", x);
    }
    if ((k = cJSON_GetObjectItem(sch, "allOf"))) {
        cJSON_ArrayForEach(e, k)
            if (!check(v, e, x, depth + 1))
                return false;
        return true;
    }
    if ((k = cJSON_GetObjectItem(sch, "not"))) {
        char keep[300];
        snprintf(keep, sizeof keep, "%s", v->why);
        if (check(v, k, x, depth + 1))
            return no(v, "not", x);
        snprintf(v->why, v->why_size, "%s", keep);
    }
    if ((k = cJSON_GetObjectItem(sch, "const")) && !cJSON_Compare(k, x, true))
        return no(v, "const", x);
    if ((k = cJSON_GetObjectItem(sch, "enum"))) {
        bool any = false;
        cJSON_ArrayForEach(e, k)
            any = any || cJSON_Compare(e, x, true);
        if (!any)
            return no(v, "enum", x);
    }
    if ((k = cJSON_GetObjectItem(sch, "type"))) {
        bool any = false;
        if (cJSON_IsString(k))
            any = type_ok(k->valuestring, x);
        else
            cJSON_ArrayForEach(e, k)
                any = any || type_ok(e->valuestring, x);
        if (!any)
            return no(v, "type", x);
    }
    return check_typed(v, sch, x, depth);
}

bool sc_validate(const cJSON *root, const cJSON *value, char *why, size_t why_size)
{
    val v = {root, why, why_size};
    why[0] = '\0';
    return check(&v, root, value, 0);
}
