/* l2norm.h: scaling a vector to unit length, as an embedding is answered (the engine's
 * pooled vector, and the server's after `dimensions` cuts it). */
#ifndef TESSERA_COMMON_L2NORM_H
#define TESSERA_COMMON_L2NORM_H

/* v (n) scaled to unit L2 norm, summed in double; left as it is when all zero. */
void l2_normalize(float *v, int n);

#endif
