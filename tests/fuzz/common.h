/* common.h: what the libFuzzer targets share: finding ../shared, loading files once at
 * start-up, writing an input to a scratch file, and failing loudly on a broken property. */
#ifndef TESSERA_FUZZ_COMMON_H
#define TESSERA_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points, declared here so -Wmissing-prototypes stays quiet. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Path of rel inside the shared data folder: $TESSERA_SHARED, else ../shared beside the
 * source tree, else ../../shared from the executable's folder. Aborts when none holds
 * rel. Returns a static buffer overwritten by the next call. */
const char *fuzz_shared(const char *rel);

/* A property of the code under test does not hold: prints the message and aborts, which
 * libFuzzer reports as a crash and saves the input. */
_Noreturn void fuzz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#define FUZZ_CHECK(cond, ...)          \
    do {                               \
        if (!(cond))                   \
            fuzz_fail(__VA_ARGS__);    \
    } while (0)

/* Writes size bytes (borrowed) to this process's scratch file and returns its path (a
 * static buffer). The file lives in $TMPDIR (else /tmp) and is removed at exit. */
const char *fuzz_scratch_file(int slot, const void *data, size_t size);

/* The part of a message's text a chat rendering must keep: all of it, or without the
 * ASCII whitespace at its ends where the format trims (chat_template_trims). Returns
 * where it starts in text and sets *len. */
const char *fuzz_chat_core(const char *text, bool trims, size_t *len);

/* Reads input bytes as a little stream: each call takes the next byte or 0 at the end. */
typedef struct fuzz_reader {
    const uint8_t *p;
    size_t n;
} fuzz_reader;

uint8_t fuzz_u8(fuzz_reader *r);
uint16_t fuzz_u16(fuzz_reader *r);
/* The next up to n bytes; *len gets how many there were. */
const uint8_t *fuzz_bytes(fuzz_reader *r, size_t n, size_t *len);

#endif /* TESSERA_FUZZ_COMMON_H */
