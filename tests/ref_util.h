/* ref_util.h: readers for the reference files tests compare with: text files of whole
 * lines, written by a make_ref.py script or kept in the shared data folder, whose byte
 * strings are written as hex. */
#ifndef TESSERA_TESTS_REF_UTIL_H
#define TESSERA_TESTS_REF_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The file at path, whole and NUL-terminated (malloc'd; the caller frees it); *len (when
 * len is not NULL) gets its size. Fails the test unless the file can be read and ends with
 * a newline (a file of whole lines). */
char *ref_read(const char *path, size_t *len);

/* The next non-empty line at *cursor, its newline overwritten with NUL, or NULL at the
 * end; *cursor moves past it. Walks a ref_read() buffer in place, as strtok(text, "\n")
 * would:
 *     char *text = ref_read(path, NULL), *cursor = text;
 *     for (char *line; (line = ref_next_line(&cursor)) != NULL;) ...  */
char *ref_next_line(char **cursor);

/* Decodes the hex digit pairs at hex, up to the first space, newline, NUL or non-hex
 * character, into dst (cap bytes; not NUL-terminated). Returns the byte count; fails the
 * test when the bytes do not fit. */
size_t ref_unhex(const char *hex, char *dst, size_t cap);

/* The same bytes in a malloc'd, NUL-terminated copy (the caller frees it); *len gets the
 * byte count. Fails the test on more than 256 bytes or when out of memory. */
char *ref_unhex_dup(const char *hex, uint32_t *len);

/* Reads a count N and then N decimal ids from text s ("N id_1 ... id_N") into out (cap
 * ids). Returns N; fails the test when N is negative or over cap. */
size_t ref_ids(const char *s, int32_t *out, size_t cap);

/* Reads a reference line "ids N id..." into ids (*n_ids) or "plain N id..." into plain
 * (*n_plain), at most cap each; fails the test on any other line. */
void ref_id_line(const char *line, int32_t *ids, size_t *n_ids, int32_t *plain,
                 size_t *n_plain, size_t cap);

/* Fails, printing what (which text, which form) and both lists, unless ids (n) equal the
 * peer's want (n_want). */
void ref_expect_ids(const char *what, const int32_t *ids, size_t n, const int32_t *want,
                    size_t n_want);

#endif
