/* test_quant_formats.c: the tensor type table, hand-made blocks decoded to hand-computed
 * values, and every tensor of every stories260K-k file decoded bit for bit as llama.cpp
 * decodes it (the archive's dequant/ files). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "quant.h"

/* Where tests/CMakeLists.txt extracts ../shared/models/stories260K-k.tar.xz. */
#define K_DIR TS_BUILD_DIR "/stories260K-k"

static void test_type_table(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        const char *name;
        uint32_t elems, bytes;
        qact act;
        double bpw;
    } want[] = {
        {QT_F32, "F32", 1, 4, QACT_F32, 32.0},
        {QT_F16, "F16", 1, 2, QACT_F32, 16.0},
        {QT_BF16, "BF16", 1, 2, QACT_F32, 16.0},
        {QT_Q4_0, "Q4_0", 32, 18, QACT_Q8_32, 4.5},
        {QT_Q4_1, "Q4_1", 32, 20, QACT_Q8_32, 5.0},
        {QT_Q5_0, "Q5_0", 32, 22, QACT_Q8_32, 5.5},
        {QT_Q5_1, "Q5_1", 32, 24, QACT_Q8_32, 6.0},
        {QT_Q8_0, "Q8_0", 32, 34, QACT_Q8_32, 8.5},
        {QT_IQ4_NL, "IQ4_NL", 32, 18, QACT_Q8_32, 4.5},
        {QT_Q2_K, "Q2_K", 256, 84, QACT_Q8_K, 2.625},
        {QT_Q3_K, "Q3_K", 256, 110, QACT_Q8_K, 3.4375},
        {QT_Q4_K, "Q4_K", 256, 144, QACT_Q8_K, 4.5},
        {QT_Q5_K, "Q5_K", 256, 176, QACT_Q8_K, 5.5},
        {QT_Q6_K, "Q6_K", 256, 210, QACT_Q8_K, 6.5625},
        {QT_IQ4_XS, "IQ4_XS", 256, 136, QACT_Q8_K, 4.25},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const qtype_info *t = qtype_get(want[i].type);
        assert_non_null(t);
        assert_string_equal(t->name, want[i].name);
        assert_string_equal(qtype_name(want[i].type), want[i].name);
        assert_int_equal(t->block_elems, want[i].elems);
        assert_int_equal(t->block_bytes, want[i].bytes);
        assert_int_equal(t->act, want[i].act);
        assert_true(qtype_bits_per_weight(want[i].type) == want[i].bpw);
        assert_int_equal(qtype_row_bytes(want[i].type, 512), 512 / want[i].elems * want[i].bytes);
        if (want[i].elems > 1)
            assert_int_equal(qtype_row_bytes(want[i].type, 512 + 16), 0);
        assert_int_equal(qtype_row_bytes(want[i].type, 0), 0);
    }
    /* numbers ggml used for types tessera does not compute on: named, without a layout */
    static const struct {
        uint32_t type;
        const char *name;
    } other[] = {{4, "Q4_2"},     {9, "Q8_1"},   {15, "Q8_K"},  {16, "IQ2_XXS"}, {17, "IQ2_XS"},
                 {18, "IQ3_XXS"}, {19, "IQ1_S"}, {21, "IQ3_S"}, {22, "IQ2_S"},   {26, "I32"},
                 {28, "F64"},     {29, "IQ1_M"}, {34, "TQ1_0"}, {35, "TQ2_0"},   {39, "MXFP4"}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        assert_string_equal(qtype_name(other[i].type), other[i].name);
        assert_null(qtype_get(other[i].type));
        assert_int_equal(qtype_row_bytes(other[i].type, 256), 0);
        assert_true(qtype_bits_per_weight(other[i].type) == 0.0);
    }
    assert_null(qtype_name(40));
    assert_null(qtype_name(UINT32_MAX));
    assert_null(qtype_get(40));

    assert_int_equal(qact_row_bytes(QACT_F32, 100), 400);
    assert_int_equal(qact_row_bytes(QACT_Q8_32, 64), 2 * sizeof(qa_q8_32));
    assert_int_equal(qact_row_bytes(QACT_Q8_32, 48), 0);
    assert_int_equal(qact_row_bytes(QACT_Q8_K, 512), 2 * sizeof(qa_q8_k));
    assert_int_equal(qact_row_bytes(QACT_Q8_K, 288), 0);
}

static void put_half(uint16_t *dst, float f)
{
    *dst = gguf_f32_to_f16(f);
}

/* Q4_K: d 1, dmin 0.5. Sub-block 0 (elements 0-31): scale 1, min 2 from the plain 6-bit
 * bytes. Sub-block 5 (160-191): scale 26 = 0xa | 1 << 4, min 35 = 3 | 2 << 4 from byte 9's
 * nibbles and the top bits of bytes 1 and 5. */
static void test_q4_k_by_hand(void **state)
{
    (void)state;
    qb_q4_k b;
    memset(&b, 0, sizeof b);
    put_half(&b.d, 1.0f);
    put_half(&b.dmin, 0.5f);
    b.scales[0] = 1;
    b.scales[4] = 2;
    b.scales[9] = 0x3a;
    b.scales[1] = 0x40; /* sub-block 1's own scale stays 0 */
    b.scales[5] = 0x80; /* sub-block 1's own min stays 0 */
    b.qs[0] = 0x07;     /* element 0 = 7; element 32 (high nibble) = 0 */
    b.qs[64 + 3] = 0xf0; /* element 163 = 15; element 131 (low nibble) = 0 */
    float out[QK_K];
    qtype_dequant_row(out, &b, QT_Q4_K, QK_K);
    assert_true(out[0] == 1.0f * 7 - 0.5f * 2);     /* 6 */
    assert_true(out[1] == -1.0f);                   /* q 0, min 2 * 0.5 */
    assert_true(out[32] == 0.0f);
    assert_true(out[131] == 0.0f);                  /* sub-block 4: scale 0, min 0 */
    assert_true(out[163] == 26.0f * 15 - 0.5f * 35); /* 372.5 */
    assert_true(out[160] == -17.5f);
    assert_true(out[191] == -17.5f);
    assert_true(out[192] == 0.0f);
}

/* Q6_K: d 0.5; element 0 = (5 | 2 << 4) - 32 = 5 with scale -2; element 64 takes the high
 * nibble of ql[0] (0) and bits 4-5 of qh[0] (0): -32 with scale 1; element 224 (second
 * half, fourth run) = (3 | 1 << 4) - 32 = -13 with scale 3. */
static void test_q6_k_by_hand(void **state)
{
    (void)state;
    qb_q6_k b;
    memset(&b, 0, sizeof b);
    put_half(&b.d, 0.5f);
    b.ql[0] = 0x05;
    b.qh[0] = 0x02;
    b.scales[0] = -2;
    b.scales[4] = 1;
    b.ql[96] = 0x30;
    b.qh[32] = 0x40;
    b.scales[14] = 3;
    float out[QK_K];
    qtype_dequant_row(out, &b, QT_Q6_K, QK_K);
    assert_true(out[0] == -5.0f);
    assert_true(out[64] == -16.0f);
    assert_true(out[224] == -19.5f);
    assert_true(out[1] == 0.5f * -2 * -32);
}

/* Q3_K: d 1. Scale 0 = (1 | 2 << 4) - 32 = 1 and scale 8 = (2 | 2 << 4) - 32 = 2 share byte
 * 0's nibbles and byte 8's bits; the other scales are -32. Element 0: q 3, high bit set;
 * element 128: q 1, high bit (bit 4 of hmask[0]) clear, so 1 - 4; element 16: 0 - 4. */
static void test_q3_k_by_hand(void **state)
{
    (void)state;
    qb_q3_k b;
    memset(&b, 0, sizeof b);
    put_half(&b.d, 1.0f);
    b.scales[0] = 0x21;
    b.scales[8] = 0x22;
    b.qs[0] = 0x03;
    b.qs[32] = 0x01;
    b.hmask[0] = 0x01;
    float out[QK_K];
    qtype_dequant_row(out, &b, QT_Q3_K, QK_K);
    assert_true(out[0] == 3.0f);
    assert_true(out[128] == -6.0f);
    assert_true(out[16] == 128.0f);
}

/* Q5_0, two blocks: element 17 of the second takes qh bit 17; IQ4_XS: sub-block 3's scale
 * (3 | 1 << 4) - 32 = -13 comes from scales_l[1]'s high nibble and bits 6-7 of scales_h. */
static void test_q5_0_and_iq4_xs_by_hand(void **state)
{
    (void)state;
    qb_q5_0 q5[2];
    memset(q5, 0, sizeof q5);
    put_half(&q5[1].d, 0.25f);
    q5[1].qs[1] = 0x90;     /* element 17's low 4 bits: 9 */
    q5[1].qh[2] = 0x02;     /* bit 17 */
    float out[QK_K];
    qtype_dequant_row(out, q5, QT_Q5_0, 64);
    assert_true(out[32 + 17] == 0.25f * (25 - 16));
    assert_true(out[32 + 1] == 0.25f * -16);
    assert_true(out[0] == 0.0f);

    qb_iq4_xs x;
    memset(&x, 0, sizeof x);
    put_half(&x.d, 2.0f);
    x.scales_l[1] = 0x30;
    x.scales_h = 1 << 6;
    x.qs[3 * 16 + 2] = 0x0f; /* element 96 + 2: value 113; element 96 + 18: value -127 */
    qtype_dequant_row(out, &x, QT_IQ4_XS, QK_K);
    assert_true(out[98] == 2.0f * -13 * 113);
    assert_true(out[114] == 2.0f * -13 * -127);
    assert_true(out[0] == 2.0f * -32 * -127); /* scale 0 - 32, nibble 0 */
}

/* Fails with the first element where ours and llama.cpp's differ. */
static void compare_tensor(const char *file, const gguf_tensor *t, const gguf_tensor *ref)
{
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
    if (ref->type != QT_F32 || ref->n_elems != t->n_elems || ref->ne[0] != t->ne[0])
        fail_msg("%s: tensor %s: the dequantized file's tensor has another type or shape",
                 file, name);
    float *out = malloc(t->n_elems * sizeof(float));
    assert_non_null(out);
    ts_error err = {0};
    if (gguf_tensor_to_f32(out, t, t->n_elems, &err) != TS_OK)
        fail_msg("%s: %s", file, err.msg);
    if (memcmp(out, ref->data, t->n_elems * sizeof(float)) != 0) {
        size_t i = 0;
        while (!memcmp(&out[i], ref->data + 4 * i, 4))
            i++;
        float want;
        memcpy(&want, ref->data + 4 * i, 4);
        fail_msg("%s: tensor %s of type %s: element %zu is %a, llama.cpp's %a", file, name,
                 qtype_name(t->type), i, (double)out[i], (double)want);
    }
    free(out);
}

static void test_stories260k_k_bit_exact(void **state)
{
    (void)state;
    static const char *const types[] = {"F16",    "BF16",   "Q8_0",   "Q4_0",   "Q4_1",
                                        "Q5_0",   "Q5_1",   "Q2_K",   "Q3_K_M", "Q4_K_S",
                                        "Q4_K_M", "Q5_K_M", "Q6_K",   "IQ4_NL", "IQ4_XS"};
    bool seen[64] = {0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char path[512], ref_path[512];
        snprintf(path, sizeof path, K_DIR "/stories260K-k-%s.gguf", types[i]);
        snprintf(ref_path, sizeof ref_path, K_DIR "/dequant/stories260K-k-%s.dequant-f32.gguf",
                 types[i]);
        gguf_file *f = NULL, *ref = NULL;
        ts_error err = {0};
        if (gguf_open(path, &f, &err) != TS_OK || gguf_open(ref_path, &ref, &err) != TS_OK)
            fail_msg("%s (is stories260K-k extracted into the build folder?)", err.msg);
        assert_int_equal(f->n_tensors, ref->n_tensors);
        for (uint64_t j = 0; j < f->n_tensors; j++) {
            const gguf_tensor *t = &f->tensors[j];
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            const gguf_tensor *r = gguf_find_tensor(ref, name);
            if (!r)
                fail_msg("%s: tensor %s is missing from the dequantized file", types[i], name);
            compare_tensor(types[i], t, r);
            seen[t->type] = true;
        }
        gguf_close(f);
        gguf_close(ref);
    }
    /* the files between them hold every type tessera computes on */
    for (uint32_t type = 0; type < 64; type++)
        if (qtype_get(type) && !seen[type])
            fail_msg("no stories260K-k file has a tensor of type %s", qtype_name(type));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_q4_k_by_hand),
        cmocka_unit_test(test_q6_k_by_hand),
        cmocka_unit_test(test_q3_k_by_hand),
        cmocka_unit_test(test_q5_0_and_iq4_xs_by_hand),
        cmocka_unit_test(test_stories260k_k_bit_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
