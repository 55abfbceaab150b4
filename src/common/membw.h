/* membw.h: the machine's memory read bandwidth, the yardstick every benchmark compares
 * against (bench_kernels, bench_gemm, `tessera bench`). */
#ifndef TESSERA_COMMON_MEMBW_H
#define TESSERA_COMMON_MEMBW_H

#include <stddef.h>

/* Best of `passes` parallel reads (every OpenMP thread) of a `bytes` buffer, in bytes per
 * second; 0 when bytes is 0 or the buffer cannot be allocated. */
double membw_read(size_t bytes, int passes);

#endif
