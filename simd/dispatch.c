/* dispatch.c: picks the kernel table for this CPU once at start-up. */
#include "simd.h"

void simd_init(void)
{
}
