/* l2norm.c: see l2norm.h. */
#include "common/l2norm.h"

#include <math.h>

void l2_normalize(float *v, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)v[i] * v[i];
    if (sum <= 0.0)
        return;
    float inv = (float)(1.0 / sqrt(sum));
    for (int i = 0; i < n; i++)
        v[i] *= inv;
}
