/* simd.h: the kernel dispatch table. Filled once by simd_init() from CPUID/HWCAP. */
#ifndef TESSERA_SIMD_H
#define TESSERA_SIMD_H

/* Chooses the kernels for this CPU; cheap and idempotent. */
void simd_init(void);

#endif
