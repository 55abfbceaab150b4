/* safetensors.c: reading .safetensors files (safetensors.h). */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/safetensors.h"

static ts_status parse_tensor(safetensors_tensor *t, const cJSON *e, const uint8_t *data,
                              uint64_t data_len, const char *path, ts_error *err)
{
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: tensor %s: malformed entry", path,
                            e->string);
    static const char *const names[] = {"F32", "F16", "BF16"};
    static const unsigned sizes[] = {4, 2, 2};
    int k = 0;
    while (k < 3 && strcmp(dtype->valuestring, names[k]))
        k++;
    if (k == 3)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s (F32, F16 "
                            "and BF16 are converted)", path, e->string, dtype->valuestring);
    t->dtype = (safetensors_dtype)k;
    t->n_dims = cJSON_GetArraySize(shape);
    if (t->n_dims > SAFETENSORS_MAX_DIMS)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: tensor %s has %d dimensions", path,
                            e->string, t->n_dims);
    t->n_elems = 1;
    for (int d = 0; d < t->n_dims; d++) {
        const cJSON *v = cJSON_GetArrayItem(shape, d);
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e12 ||
            v->valuedouble != (double)(uint64_t)v->valuedouble)
            return ts_error_set(err, TS_ERR_FORMAT, "%s: tensor %s: bad shape", path, e->string);
        t->shape[d] = (uint64_t)v->valuedouble;
        if (t->shape[d] && t->n_elems > UINT64_MAX / 4 / t->shape[d])
            return ts_error_set(err, TS_ERR_FORMAT, "%s: tensor %s is too large", path,
                                e->string);
        t->n_elems *= t->shape[d];
    }
    const cJSON *b = cJSON_GetArrayItem(offs, 0), *en = cJSON_GetArrayItem(offs, 1);
    if (!cJSON_IsNumber(b) || !cJSON_IsNumber(en) || b->valuedouble < 0 ||
        en->valuedouble < b->valuedouble || en->valuedouble > (double)data_len ||
        (uint64_t)(en->valuedouble - b->valuedouble) != t->n_elems * sizes[k])
        return ts_error_set(err, TS_ERR_FORMAT, "%s: tensor %s: its bytes do not fit its "
                            "shape or the file", path, e->string);
    t->data = data + (uint64_t)b->valuedouble;
    if (!(t->name = strdup(e->string)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", path);
    return TS_OK;
}

/* The header and tensors of size bytes at p (borrowed) into f->tensors. */
static ts_status parse(safetensors_file *f, const uint8_t *p, size_t size, const char *path,
                       ts_error *err)
{
    cJSON *root = NULL;
    ts_status st = TS_OK;
    if (size < 8)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: too short for a safetensors file", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | p[i];
    if (hlen > SAFETENSORS_MAX_HEADER || hlen > size - 8) {
        st = ts_error_set(err, TS_ERR_FORMAT, "%s: header of %llu bytes does not fit", path,
                          (unsigned long long)hlen);
        goto fail;
    }
    root = cJSON_ParseWithLength((const char *)p + 8, (size_t)hlen);
    if (!cJSON_IsObject(root)) {
        st = ts_error_set(err, TS_ERR_FORMAT, "%s: the header is not a JSON object", path);
        goto fail;
    }
    int n = cJSON_GetArraySize(root);
    if (!(f->tensors = calloc((size_t)n + 1, sizeof *f->tensors))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", path);
        goto fail;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__"))
            continue;
        st = parse_tensor(&f->tensors[f->n_tensors], e, p + 8 + hlen, size - 8 - hlen, path,
                          err);
        if (st != TS_OK)
            goto fail;
        f->n_tensors++;
    }
fail:
    cJSON_Delete(root);
    return st;
}

ts_status safetensors_open_buffer(safetensors_file *f, const void *data, size_t size, ts_error *err)
{
    memset(f, 0, sizeof *f);
    ts_status st = parse(f, data, size, "buffer", err);
    if (st != TS_OK)
        safetensors_close(f);
    return st;
}

ts_status safetensors_open(safetensors_file *f, const char *path, ts_error *err)
{
    memset(f, 0, sizeof *f);
    ts_status st = TS_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        st = ts_error_set(err, TS_ERR_IO, "cannot open %s", path);
        goto fail;
    }
    if (sb.st_size < 8) {
        st = ts_error_set(err, TS_ERR_FORMAT, "%s: too short for a safetensors file", path);
        goto fail;
    }
    f->size = (size_t)sb.st_size;
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        st = ts_error_set(err, TS_ERR_IO, "cannot map %s", path);
        goto fail;
    }
    st = parse(f, f->map, f->size, path, err);
fail:
    if (fd >= 0)
        close(fd);
    if (st != TS_OK)
        safetensors_close(f);
    return st;
}

void safetensors_close(safetensors_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    if (f->map)
        munmap(f->map, f->size);
    memset(f, 0, sizeof *f);
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

float safetensors_get(const safetensors_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case SAFETENSORS_F32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case SAFETENSORS_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return gguf_f16_to_f32(h);
    }
    case SAFETENSORS_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        uint32_t bits = (uint32_t)h << 16;
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    }
    return 0.0f;
}
