/* sha256.h: SHA-256 (FIPS 180-4), streamed, for checking downloaded files. */
#ifndef TESSERA_COMMON_SHA256_H
#define TESSERA_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;     /* message length so far */
    uint8_t block[64];  /* the partial block */
    size_t fill;        /* bytes in block */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
/* Adds len bytes of data (borrowed). */
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Writes the digest as 64 lowercase hex digits and a NUL; c must be re-initialised after. */
void sha256_final_hex(sha256_ctx *c, char out[65]);

#endif
