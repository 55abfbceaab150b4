/* safetensors.h: a Hugging Face .safetensors file, mapped read-only: an 8-byte
 * little-endian header length, a JSON header {NAME: {"dtype", "shape", "data_offsets":
 * [begin, end]}, "__metadata__": {...}}, then the tensor bytes. */
#ifndef TESSERA_MODEL_SAFETENSORS_H
#define TESSERA_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

typedef enum st_dtype { ST_F32, ST_F16, ST_BF16 } st_dtype;

enum { ST_MAX_DIMS = 4, ST_MAX_HEADER = 100 << 20 };

typedef struct st_tensor {
    char *name;                /* owned */
    st_dtype dtype;
    int n_dims;
    uint64_t shape[ST_MAX_DIMS]; /* row-major, as PyTorch: shape[0] rows */
    const uint8_t *data;       /* into the mapping */
    uint64_t n_elems;
} st_tensor;

typedef struct st_file {
    void *map;          /* the mapping; NULL for st_open_buffer */
    size_t size;
    st_tensor *tensors; /* (n_tensors) owned */
    int n_tensors;
} st_file;

/* Maps and checks path (borrowed): a header within the file and under ST_MAX_HEADER, valid
 * JSON, every tensor F32, F16 or BF16 (others refused by name) with at most ST_MAX_DIMS
 * dimensions whose element count matches its byte range, every range inside the data
 * section. On failure f is left closed. */
ts_status st_open(st_file *f, const char *path, ts_error *err);

/* As st_open, over size bytes at data (borrowed; must outlive f), for fuzzing. */
ts_status st_open_buffer(st_file *f, const void *data, size_t size, ts_error *err);

/* Accepts a zeroed or closed file. */
void st_close(st_file *f);

/* The tensor named name, or NULL. Borrowed from f. */
const st_tensor *st_find(const st_file *f, const char *name);

/* Element i of t as f32. */
float st_get(const st_tensor *t, uint64_t i);

#endif
