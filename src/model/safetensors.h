/* safetensors.h: a Hugging Face .safetensors file, mapped read-only: an 8-byte
 * little-endian header length, a JSON header {NAME: {"dtype", "shape", "data_offsets":
 * [begin, end]}, "__metadata__": {...}}, then the tensor bytes. */
#ifndef TESSERA_MODEL_SAFETENSORS_H
#define TESSERA_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

typedef enum safetensors_dtype {
    SAFETENSORS_F32,
    SAFETENSORS_F16,
    SAFETENSORS_BF16
} safetensors_dtype;

enum { SAFETENSORS_MAX_DIMS = 4, SAFETENSORS_MAX_HEADER = 100 << 20 };

typedef struct safetensors_tensor {
    char *name; /* owned */
    safetensors_dtype dtype;
    int n_dims;
    uint64_t shape[SAFETENSORS_MAX_DIMS]; /* row-major, as PyTorch: shape[0] rows */
    const uint8_t *data;                  /* into the mapping */
    uint64_t n_elems;
} safetensors_tensor;

typedef struct safetensors_file {
    void *map; /* the mapping; NULL for safetensors_open_buffer */
    size_t size;
    safetensors_tensor *tensors; /* (n_tensors) owned */
    int n_tensors;
} safetensors_file;

/* Maps and checks path (borrowed): a header within the file and under
 * SAFETENSORS_MAX_HEADER, valid JSON, every tensor F32, F16 or BF16 (others refused by
 * name) with at most SAFETENSORS_MAX_DIMS dimensions whose element count matches its byte
 * range, every range inside the data section. On failure f is left closed. */
ts_status safetensors_open(safetensors_file *f, const char *path, ts_error *err);

/* As safetensors_open, over size bytes at data (borrowed; must outlive f), for fuzzing. */
ts_status safetensors_open_buffer(safetensors_file *f, const void *data, size_t size,
                                  ts_error *err);

/* Accepts a zeroed or closed file. */
void safetensors_close(safetensors_file *f);

/* The tensor named name, or NULL. Borrowed from f. */
const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);

/* Element i of t as f32. */
float safetensors_get(const safetensors_tensor *t, uint64_t i);

#endif
