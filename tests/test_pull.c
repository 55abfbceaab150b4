/* test_pull.c: the pieces of `tessera pull` that need no network: SHA-256 against the
 * FIPS 180-4 examples, repository references, choosing the file from a hub listing (names
 * with control bytes, sizes past the bound), and checking a file against its listing.
 * The downloads themselves: tests/pull/pull.sh against a loopback hub. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/pull.h"
#include "common/sha256.h"
#include "util.h"

static void hex_of(const void *data, size_t len, size_t piece, char out[65])
{
    sha256_ctx c;
    sha256_init(&c);
    const char *p = data;
    for (size_t off = 0; off < len; off += piece)
        sha256_update(&c, p + off, len - off < piece ? len - off : piece);
    sha256_final_hex(&c, out);
}

static void test_sha256(void **state)
{
    (void)state;
    char h[65];
    hex_of("", 0, 1, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 56 bytes: the padding needs a second block */
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(two, strlen(two), 56, h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* fed in pieces that straddle blocks: the same digest */
    for (size_t piece = 1; piece < 70; piece += 3) {
        hex_of(two, strlen(two), piece, h);
        assert_string_equal(h,
                            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    }
    /* one million 'a' */
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    hex_of(a, 1000000, 4099, h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void test_refs(void **state)
{
    (void)state;
    char repo[64], quant[16];
    assert_true(pull_parse_ref("TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF", repo, sizeof repo,
                               quant, sizeof quant));
    assert_string_equal(repo, "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF");
    assert_string_equal(quant, "Q4_K_M");
    assert_true(pull_parse_ref("a/b:q8_0", repo, sizeof repo, quant, sizeof quant));
    assert_string_equal(repo, "a/b");
    assert_string_equal(quant, "q8_0");
    const char *bad[] = {"nope", "/b", "a/", "a/b/c", "a/b:", "a b/c", "a/b:Q4 K",
                         "a/../b", "a/b:x/y", "a/b?x=1",
                         "a/a-name-that-runs-past-the-end-of-the-sixty-four-byte-buffer-we-give-it"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (pull_parse_ref(bad[i], repo, sizeof repo, quant, sizeof quant))
            fail_msg("accepted '%s'", bad[i]);
}

#define SUM "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static void test_pick(void **state)
{
    (void)state;
    const char *list =
        "[{\"type\": \"file\", \"path\": \"README.md\", \"size\": 10},"
        " {\"type\": \"file\", \"path\": \"m.Q4_K.gguf\", \"size\": 5,"
        "  \"lfs\": {\"oid\": \"" SUM "\", \"size\": 7}},"
        " {\"type\": \"file\", \"path\": \"m.Q4_K_M.gguf\", \"size\": 134,"
        "  \"lfs\": {\"oid\": \"" SUM "\", \"size\": 668788096}},"
        " {\"type\": \"file\", \"path\": \"sub/m-q8_0.gguf\", \"size\": 9},"
        " {\"type\": \"file\", \"path\": \"m.Q4_K_M.gguf.txt\", \"size\": 9}]";
    pull_file f;
    ts_error err = {0};
    assert_int_equal(pull_pick(&f, list, strlen(list), "Q4_K_M", &err), TS_OK);
    assert_string_equal(f.path, "m.Q4_K_M.gguf");
    assert_true(f.size == 668788096ULL); /* the LFS object's size, not the pointer's */
    assert_string_equal(f.sha256, SUM);
    /* Q4_K is not Q4_K_M's prefix match; case does not matter; folders are kept */
    assert_int_equal(pull_pick(&f, list, strlen(list), "q4_k", &err), TS_OK);
    assert_string_equal(f.path, "m.Q4_K.gguf");
    assert_int_equal(pull_pick(&f, list, strlen(list), "Q8_0", &err), TS_OK);
    assert_string_equal(f.path, "sub/m-q8_0.gguf");
    assert_string_equal(f.sha256, ""); /* not an LFS file: no checksum to check */
    assert_int_equal(pull_pick(&f, list, strlen(list), "Q5_K_S", &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "m.Q4_K.gguf, m.Q4_K_M.gguf, m-q8_0.gguf"));
    assert_int_equal(pull_pick(&f, list, strlen(list), "K_M", &err), TS_ERR_NOT_FOUND);

    const char *two = "[{\"path\": \"a.Q8_0.gguf\", \"size\": 1},"
                      " {\"path\": \"b.Q8_0.gguf\", \"size\": 2}]";
    assert_int_equal(pull_pick(&f, two, strlen(two), "Q8_0", &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "2 files match"));
    const char *split = "[{\"path\": \"x-Q8_0-00001-of-00002.gguf\", \"size\": 1}]";
    assert_int_equal(pull_pick(&f, split, strlen(split), "Q8_0", &err), TS_ERR_UNSUPPORTED);
    const char *bad[] = {"{}", "[", "[{\"path\": \"a.Q8_0.gguf\"}]",
                         "[{\"path\": \"a.Q8_0.gguf\", \"size\": -4}]",
                         "[{\"path\": \"a.Q8_0.gguf\", \"size\": \"4\"}]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(pull_pick(&f, bad[i], strlen(bad[i]), "Q8_0", &err), TS_ERR_FORMAT);
}

/* Names are escaped in messages and a chosen name with control bytes is refused; a listed
 * size over PULL_MAX_SIZE is refused before anything is fetched. */
static void test_pick_hostile(void **state)
{
    (void)state;
    pull_file f;
    ts_error err = {0};
    const char *esc = "[{\"path\": \"x\\u001b[2J.Q4_K_M.gguf\", \"size\": 5},"
                      " {\"path\": \"y\\n.Q8_0.gguf\", \"size\": 5}]";
    assert_int_equal(pull_pick(&f, esc, strlen(esc), "Q5_0", &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "x\\x1b[2J.Q4_K_M.gguf, y\\x0a.Q8_0.gguf"));
    assert_null(strchr(err.msg, '\x1b'));
    assert_int_equal(pull_pick(&f, esc, strlen(esc), "Q4_K_M", &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "control characters"));
    assert_null(strchr(err.msg, '\x1b'));
    assert_int_equal(pull_pick(&f, esc, strlen(esc), "Q8_0", &err), TS_ERR_FORMAT);
    assert_null(strchr(err.msg, '\n'));
    const char *huge = "[{\"path\": \"a.Q8_0.gguf\", \"size\": 68719476737}]";
    assert_int_equal(pull_pick(&f, huge, strlen(huge), "Q8_0", &err), TS_ERR_TOO_LONG);
    const char *max = "[{\"path\": \"a.Q8_0.gguf\", \"size\": 68719476736}]";
    assert_int_equal(pull_pick(&f, max, strlen(max), "Q8_0", &err), TS_OK);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* pull_verify: the size, the GGUF magic, and the sha256 when one is listed; a file of the
 * right size but other bytes is not the file. */
static void test_verify(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("pull_verify.gguf"));
    char gguf[64] = "GGUF";
    pull_file f = {.size = sizeof gguf};
    ts_error err = {0};
    write_file(path, gguf, sizeof gguf);
    assert_int_equal(pull_verify(path, &f, &err), TS_OK); /* no checksum: size and magic */
    hex_of(gguf, sizeof gguf, 64, f.sha256);
    assert_int_equal(pull_verify(path, &f, &err), TS_OK);
    char other[64] = "GGUF";
    other[63] = 1; /* same size, same magic, other bytes */
    write_file(path, other, sizeof other);
    assert_int_equal(pull_verify(path, &f, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "sha256"));
    f.sha256[0] = '\0';
    char html[64] = "<html>";
    write_file(path, html, sizeof html);
    assert_int_equal(pull_verify(path, &f, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not a GGUF file"));
    write_file(path, gguf, 10);
    assert_int_equal(pull_verify(path, &f, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "10 bytes"));
    unlink(path);
    assert_int_equal(pull_verify(path, &f, &err), TS_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_pick_hostile),
        cmocka_unit_test(test_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
