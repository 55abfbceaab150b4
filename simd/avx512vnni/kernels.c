/* kernels.c: the AVX-512 table once more, built with VNNI so the quantized GEMM's dots are
 * vpdpbusd / vpdpwssd (qdot_x86.h); a CPU without VNNI (Skylake-X) runs the plain table. */
#define SIMD_TABLE simd_avx512vnni_table
#define SIMD_NAME "avx512vnni"
#include "../avx512/kernels.c"
