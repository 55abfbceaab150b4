/* fuzz_safetensors.c: libFuzzer target: whole .safetensors files through the reader
 * (safetensors_open_buffer), every tensor of what parses read at its first and last element.
 *
 * Checked: every failure carries a message and its own status and leaves no tensors;
 * each tensor's bytes lie inside the buffer and match its shape and type; lookups find
 * every tensor. */
#include <string.h>

#include "common.h"
#include "model/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void check_error(ts_status st, const ts_error *err, const char *what)
{
    FUZZ_CHECK(err->msg[0] != '\0', "%s failed (%s) without a message", what, ts_status_str(st));
    FUZZ_CHECK(err->status == st, "%s returned %s but its error says %s", what,
               ts_status_str(st), ts_status_str(err->status));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    safetensors_file f;
    ts_error err = {0};
    ts_status st = safetensors_open_buffer(&f, data, size, &err);
    if (st != TS_OK) {
        check_error(st, &err, "safetensors_open_buffer");
        FUZZ_CHECK(f.tensors == NULL && f.n_tensors == 0, "a failed open kept tensors");
    } else {
        static const unsigned bytes[] = {4, 2, 2};
        volatile float sink = 0;
        for (int i = 0; i < f.n_tensors; i++) {
            const safetensors_tensor *t = &f.tensors[i];
            uint64_t n = t->n_elems * bytes[t->dtype];
            FUZZ_CHECK(t->data >= data && (uint64_t)(t->data - data) + n <= size,
                       "tensor %s lies outside the buffer", t->name);
            uint64_t elems = 1;
            for (int d = 0; d < t->n_dims; d++)
                elems *= t->shape[d];
            FUZZ_CHECK(elems == t->n_elems, "tensor %s: shape and count disagree", t->name);
            FUZZ_CHECK(safetensors_find(&f, t->name) != NULL, "tensor %s not found", t->name);
            if (t->n_elems)
                sink += safetensors_get(t, 0) + safetensors_get(t, t->n_elems - 1);
        }
        (void)sink;
        safetensors_close(&f);
    }
    return 0;
}
