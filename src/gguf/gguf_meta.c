/* gguf_meta.c: typed getters for a parsed GGUF file's metadata, which name the key when
 * it is missing or has the wrong type (the lookups they use are gguf_index.c's). */
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

static ts_status find_or_fail(const gguf_file *f, const char *key, const gguf_kv **kv,
                              ts_error *err)
{
    *kv = gguf_find_kv(f, key);
    if (!*kv)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    return TS_OK;
}

static ts_status wrong_type(const gguf_kv *kv, const char *key, const char *expected,
                            ts_error *err)
{
    return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s' has type %s, expected %s", key,
                        gguf_type_name(kv->val.type), expected);
}

ts_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, ts_error *err)
{
    const gguf_kv *kv;
    ts_status st = find_or_fail(f, key, &kv, err);
    if (st != TS_OK)
        return st;
    switch (kv->val.type) {
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        *out = kv->val.v.i64;
        return TS_OK;
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        if (kv->val.v.u64 > INT64_MAX)
            return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s': %llu is out of range",
                                key, (unsigned long long)kv->val.v.u64);
        *out = (int64_t)kv->val.v.u64;
        return TS_OK;
    default:
        return wrong_type(kv, key, "an integer", err);
    }
}

ts_status gguf_get_f64(const gguf_file *f, const char *key, double *out, ts_error *err)
{
    const gguf_kv *kv;
    ts_status st = find_or_fail(f, key, &kv, err);
    if (st != TS_OK)
        return st;
    if (kv->val.type != GGUF_TYPE_FLOAT32 && kv->val.type != GGUF_TYPE_FLOAT64)
        return wrong_type(kv, key, "float32 or float64", err);
    *out = kv->val.v.f64;
    return TS_OK;
}

ts_status gguf_get_bool(const gguf_file *f, const char *key, bool *out, ts_error *err)
{
    const gguf_kv *kv;
    ts_status st = find_or_fail(f, key, &kv, err);
    if (st != TS_OK)
        return st;
    if (kv->val.type != GGUF_TYPE_BOOL)
        return wrong_type(kv, key, "bool", err);
    *out = kv->val.v.b;
    return TS_OK;
}

ts_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, ts_error *err)
{
    const gguf_kv *kv;
    ts_status st = find_or_fail(f, key, &kv, err);
    if (st != TS_OK)
        return st;
    if (kv->val.type != GGUF_TYPE_STRING)
        return wrong_type(kv, key, "string", err);
    *out = kv->val.v.str;
    return TS_OK;
}

ts_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem,
                         const gguf_value **out, ts_error *err)
{
    const gguf_kv *kv;
    ts_status st = find_or_fail(f, key, &kv, err);
    if (st != TS_OK)
        return st;
    if (kv->val.type != GGUF_TYPE_ARRAY)
        return wrong_type(kv, key, "array", err);
    if (kv->val.v.arr.elem != elem)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "metadata key '%s' is an array of %s, expected an array of %s", key,
                            gguf_type_name(kv->val.v.arr.elem), gguf_type_name(elem));
    *out = &kv->val;
    return TS_OK;
}

float gguf_array_f32(const gguf_value *arr, uint64_t i)
{
    float x;
    memcpy(&x, arr->v.arr.raw + i * 4, 4);
    return x;
}

int32_t gguf_array_i32(const gguf_value *arr, uint64_t i)
{
    int32_t x;
    memcpy(&x, arr->v.arr.raw + i * 4, 4);
    return x;
}

gguf_str gguf_array_str(const gguf_value *arr, uint64_t i)
{
    return arr->v.arr.items[i].v.str;
}
