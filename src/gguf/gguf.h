/* gguf.h: reading GGUF files (v2, v3): metadata of every value type, tensor infos and
 * tensor data, with every count, length, offset and shape checked against the file size
 * and no two tensors' data overlapping; dequantising tensors to f32; and writing GGUF v3
 * files. */
#ifndef TESSERA_GGUF_GGUF_H
#define TESSERA_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

/* Metadata value types, as numbered in the file. */
typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* Tensor element types are simd/quant.h's qtype (ggml's numbering), whose table holds the
 * names and block layouts. These few names stay for the callers that use them. */
enum {
    GGUF_TENSOR_F32 = 0,
    GGUF_TENSOR_F16 = 1,
    GGUF_TENSOR_Q4_0 = 2,
    GGUF_TENSOR_Q8_0 = 8,
    GGUF_TENSOR_BF16 = 30,
};

enum {
    GGUF_DEFAULT_ALIGNMENT = 32,
    GGUF_MAX_DIMS = 4,
    GGUF_MAX_ARRAY_DEPTH = 8, /* arrays nested deeper than this are refused */
};

/* A string inside the file: not NUL-terminated, borrowed from the mapping. */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;

/* One metadata value. Scalars are decoded; arrays of fixed-size scalars point at their
 * little-endian bytes in the file (read them with gguf_array_*); arrays of strings or of
 * arrays have one decoded gguf_value per element in items. */
struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64; /* UINT8/16/32/64 */
        int64_t i64;  /* INT8/16/32/64 */
        double f64;   /* FLOAT32/64 */
        bool b;       /* BOOL */
        gguf_str str; /* STRING */
        struct {
            gguf_type elem;      /* element type */
            uint64_t n;          /* element count */
            const uint8_t *raw;  /* (n * size of elem) bytes, fixed-size elements only */
            gguf_value *items;   /* (n) owned, STRING and ARRAY elements only */
        } arr;
    } v;
};

typedef struct gguf_kv {
    gguf_str key;
    gguf_value val;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the fastest-varying (row length); unused = 1 */
    uint32_t type;              /* qtype: always one qtype_get() knows */
    uint64_t offset;            /* from the start of the data section */
    uint64_t n_elems;
    uint64_t nbytes;
    const uint8_t *data;        /* borrowed from the mapping: nbytes bytes */
} gguf_tensor;

typedef struct gguf_file {
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;          /* (n_kv) owned */
    uint64_t n_tensors;
    gguf_tensor *tensors; /* (n_tensors) owned */
    uint32_t alignment;   /* general.alignment, else 32 */
    uint64_t data_offset; /* start of the tensor data section in the file */
    const uint8_t *base;  /* the file's bytes (mapped, or borrowed from the caller) */
    size_t size;
    void *map;            /* the mapping when gguf_open() made one, else NULL */
    uint64_t *kv_order;     /* (n_kv) owned: indices of kv sorted by key, for lookups */
    uint64_t *tensor_order; /* (n_tensors) owned: indices of tensors sorted by name */
} gguf_file;

/* ---- reading ---- */

/* Maps and parses the file at path (borrowed). On success *out is owned by the caller:
 * close it with gguf_close(). On failure *out is NULL and err names what was wrong. */
ts_status gguf_open(const char *path, gguf_file **out, ts_error *err);

/* Parses size bytes at data (borrowed: must outlive the returned file). */
ts_status gguf_open_buffer(const void *data, size_t size, gguf_file **out, ts_error *err);

/* Accepts NULL and half-built files. */
void gguf_close(gguf_file *f);

/* Lookups by NUL-terminated name; NULL when absent. Results are borrowed from f. */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters. Integers accept any integer type whose value fits; floats accept
 * FLOAT32 and FLOAT64. TS_ERR_NOT_FOUND when the key is absent, TS_ERR_FORMAT when it
 * has the wrong type or an out-of-range value; err names the key either way. */
ts_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, ts_error *err);
ts_status gguf_get_f64(const gguf_file *f, const char *key, double *out, ts_error *err);
ts_status gguf_get_bool(const gguf_file *f, const char *key, bool *out, ts_error *err);
ts_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, ts_error *err);
/* An array whose elements have type elem; *out is borrowed from f. */
ts_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem,
                         const gguf_value **out, ts_error *err);

/* Element i of an array value (i < n, element type as named; unchecked). */
float gguf_array_f32(const gguf_value *arr, uint64_t i);
int32_t gguf_array_i32(const gguf_value *arr, uint64_t i);
gguf_str gguf_array_str(const gguf_value *arr, uint64_t i);

/* True when s holds exactly the NUL-terminated string c. */
bool gguf_str_eq(gguf_str s, const char *c);

/* Bytes of one element of a fixed-size type; 0 for STRING, ARRAY and unknown types. */
size_t gguf_type_size(gguf_type type);
const char *gguf_type_name(gguf_type type); /* "unknown" for unknown types */

/* ---- tensor types ---- */

/* "F32", "Q4_K", "IQ2_XXS", ...; NULL for a number ggml never used (qtype_name). */
const char *gguf_tensor_type_name(uint32_t type);
/* Elements per block and bytes per block of a type tessera computes on (qtype_get); false
 * for any other type. Files holding tensors of other types are refused at open with
 * TS_ERR_UNSUPPORTED naming the tensor and the type. */
bool gguf_tensor_type_layout(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);

/* Dequantises tensor t into out (n floats, n == t->n_elems): every type of simd/quant.h's
 * table, exactly as llama.cpp does. A tensor whose row is not a whole number of blocks or
 * whose byte size disagrees with its type and shape gives TS_ERR_FORMAT, an unsupported
 * type TS_ERR_UNSUPPORTED, each naming the tensor. */
ts_status gguf_tensor_to_f32(float *out, const gguf_tensor *t, size_t n, ts_error *err);

float gguf_f16_to_f32(uint16_t h);
uint16_t gguf_f32_to_f16(float f); /* round to nearest even */

/* ---- writing ---- */

typedef struct gguf_writer gguf_writer;

/* A writer for a GGUF v3 file with the given alignment (0 means 32; must be a power of
 * two). Errors from the add functions are sticky: gguf_writer_finish() reports the first. */
ts_status gguf_writer_create(uint32_t alignment, gguf_writer **out, ts_error *err);
void gguf_writer_free(gguf_writer *w); /* accepts NULL */

/* key and string values are copied. */
ts_status gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v);
ts_status gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v);
ts_status gguf_writer_add_f32(gguf_writer *w, const char *key, float v);
ts_status gguf_writer_add_bool(gguf_writer *w, const char *key, bool v);
ts_status gguf_writer_add_str(gguf_writer *w, const char *key, const char *v);
/* An array of n fixed-size elements of type elem at data (copied, host order). */
ts_status gguf_writer_add_array(gguf_writer *w, const char *key, gguf_type elem,
                                const void *data, uint64_t n);
/* n strings (copied) of lens[i] bytes each, or NUL-terminated when lens is NULL. */
ts_status gguf_writer_add_str_array(gguf_writer *w, const char *key,
                                    const char *const *strs, const uint32_t *lens, uint64_t n);
/* A value of any type already encoded as GGUF bytes (copied): for nested arrays. */
ts_status gguf_writer_add_raw(gguf_writer *w, const char *key, gguf_type type,
                              const void *bytes, size_t len);

/* A tensor of shape ne[0..n_dims) and type; data (nbytes, borrowed) must stay valid
 * until gguf_writer_finish(). */
ts_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                                 uint32_t n_dims, const uint64_t *ne, const void *data,
                                 uint64_t nbytes);

/* Produces rows [row0, row0 + n_rows) of a tensor into dst (n_rows * the tensor's row bytes,
 * a row being ne[0] elements), at write time. The writer asks for the rows in order, in
 * chunks of a few MiB, so a tensor need never exist whole in memory. */
typedef ts_status (*gguf_tensor_fill)(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                                      ts_error *err);

/* A tensor like gguf_writer_add_tensor()'s whose bytes come from fill(user, ...) when the
 * file is written; user is borrowed and must stay valid until then. */
ts_status gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *ne,
                                      gguf_tensor_fill fill, void *user);

/* Lays out the file in memory: *out (malloc'd, owned by the caller) holds *len bytes. */
ts_status gguf_writer_finish(gguf_writer *w, uint8_t **out, size_t *len, ts_error *err);
/* Writes the file to path (borrowed). */
ts_status gguf_writer_write_file(gguf_writer *w, const char *path, ts_error *err);

#endif /* TESSERA_GGUF_GGUF_H */
