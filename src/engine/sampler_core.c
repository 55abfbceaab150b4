/* sampler_core.c: what every sampling stage builds on: the request's generator, the
 * canonical order and selection in it, and the softmax numerators. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "engine/sampler_core.h"

/* ---------------------------------------------------------------- generator */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman and Vigna). */
static uint64_t rng_next(uint64_t s[4])
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void sampler__seed(uint64_t rng[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng[i] = splitmix64(&seed);
}

double sampler_uniform(sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53; }

/* ---------------------------------------------------------------- selection */

int sampler__cand_cmp(const void *pa, const void *pb)
{
    const sampler_cand *a = pa, *b = pb;
    return sampler__cand_before(a, b) ? -1 : sampler__cand_before(b, a) ? 1 : 0;
}

static inline void cand_swap(sampler_cand *a, sampler_cand *b)
{
    sampler_cand t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges c (n) so that c[0..k) are the first k in canonical order (unsorted).
 * Quickselect with a median-of-three pivot; past a depth limit it sorts the remaining
 * range, so the worst case is O(n log n). */
void sampler__select_first(sampler_cand *c, int n, int k)
{
    int lo = 0, hi = n - 1, depth = 0, limit = 2;
    for (int m = n; m > 1; m >>= 1)
        limit += 2;
    while (lo < hi) {
        if (++depth > limit) {
            qsort(c + lo, (size_t)(hi - lo + 1), sizeof *c, sampler__cand_cmp);
            return;
        }
        int mid = lo + (hi - lo) / 2;
        if (sampler__cand_before(&c[mid], &c[lo]))
            cand_swap(&c[mid], &c[lo]);
        if (sampler__cand_before(&c[hi], &c[lo]))
            cand_swap(&c[hi], &c[lo]);
        if (sampler__cand_before(&c[hi], &c[mid]))
            cand_swap(&c[hi], &c[mid]);
        sampler_cand pivot = c[mid];
        int i = lo, j = hi;
        while (i <= j) { /* Hoare partition around pivot */
            while (sampler__cand_before(&c[i], &pivot))
                i++;
            while (sampler__cand_before(&pivot, &c[j]))
                j--;
            if (i <= j) {
                cand_swap(&c[i], &c[j]);
                i++;
                j--;
            }
        }
        /* now c[lo..j] come before c[i..hi]; elements between equal the pivot */
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

/* Restores the heap h (k) below i: each entry comes before its children in the reverse
 * canonical order, so the root is the canonical last of the kept tokens. */
static void heap_sift_down(sampler_cand *h, int k, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && sampler__cand_before(&h[w], &h[l]))
            w = l;
        if (r < k && sampler__cand_before(&h[w], &h[r]))
            w = r;
        if (w == i)
            return;
        cand_swap(&h[i], &h[w]);
        i = w;
    }
}

/* c[0..k) = the first k of logits (n) in canonical order, unsorted; 0 < k < n. Ids come
 * in increasing order, so a logit equal to the root's never displaces it. */
void sampler__top_k_heap(sampler_cand *c, const float *logits, int n, int k)
{
    for (int i = 0; i < k; i++)
        c[i] = (sampler_cand){ .id = i, .logit = sampler__clean_logit(logits[i]), .p = 0.0f };
    for (int i = k / 2 - 1; i >= 0; i--)
        heap_sift_down(c, k, i);
    for (int i = k; i < n; i++) {
        const float l = sampler__clean_logit(logits[i]);
        if (l > c[0].logit) {
            c[0] = (sampler_cand){ .id = i, .logit = l, .p = 0.0f };
            heap_sift_down(c, k, 0);
        }
    }
}

/* The shortest canonical prefix of c (n, p unnormalised, summing to total) whose mass
 * reaches top_p * total. Sorts that prefix in place, growing it in doubling chunks so a
 * peaked distribution over a large vocabulary costs O(n). Returns its length. */
int sampler__top_p_prefix(sampler_cand *c, int n, double total, float top_p)
{
    const double target = (double)top_p * total;
    double cum = 0.0;
    int done = 0, chunk = 64;
    while (done < n) {
        int m = n - done < chunk ? n - done : chunk;
        if (m < n - done)
            sampler__select_first(c + done, n - done, m);
        qsort(c + done, (size_t)m, sizeof *c, sampler__cand_cmp);
        for (int i = done; i < done + m; i++) {
            cum += c[i].p;
            if (cum >= target)
                return i + 1;
        }
        done += m;
        chunk *= 2;
    }
    return n;
}

/* Largest cleaned logit of x (n); -inf when none. */
float sampler__max_logit(const float *x, int n)
{
    float m[SAMPLER_LANES];
    for (int j = 0; j < SAMPLER_LANES; j++)
        m[j] = -INFINITY;
    int i = 0;
    for (; i + SAMPLER_LANES <= n; i += SAMPLER_LANES)
        for (int j = 0; j < SAMPLER_LANES; j++) {
            float v = sampler__clean_logit(x[i + j]);
            m[j] = v > m[j] ? v : m[j];
        }
    for (; i < n; i++) {
        float v = sampler__clean_logit(x[i]);
        m[0] = v > m[0] ? v : m[0];
    }
    for (int j = 1; j < SAMPLER_LANES; j++)
        m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}

/* First maximal index, as llama2.c's sampler__argmax (NaN never wins, +inf counts as FLT_MAX):
 * the maximum in one vectorized pass, then the first index holding it. */
int32_t sampler__argmax(const float *x, int n)
{
    const float m = sampler__max_logit(x, n);
    for (int i = 0; i < n; i++)
        if (sampler__clean_logit(x[i]) == m)
            return i;
    return 0; /* unreachable: some cleaned logit equals the maximum */
}

/* e^x for x in [-87.1, 0] times keep (an all-ones or all-zero mask): Cephes expf.
 * x = n ln2 + r with |r| <= ln2/2, e^r by a degree-7 polynomial, 2^n by building the
 * exponent bits. No float conditionals: under -ftrapping-math they keep loops scalar. */
static inline float exp_core(float x, int32_t keep)
{
    /* round to nearest by the 1.5 * 2^23 trick (floorf would also keep the loop scalar) */
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const union { int32_t i; float f; } scale = { .i = (((int32_t)n + 127) << 23) & keep };
    return p * scale.f; /* a scale of +0.0 when keep is 0 */
}

float sampler_expf(float x)
{
    const float xc = x < -87.0f ? -87.0f : (x > 0.0f ? 0.0f : x);
    return exp_core(xc, -(int32_t)(x >= -87.0f));
}

/* out[i] = e^((clean(x[i]) - lmax) * inv_t) for i < n (lmax finite, >= every clean x);
 * returns their sum, in float within blocks of SAMPLER_LANES * 16 terms and in double across
 * blocks. A term whose exponent falls under -87 contributes exactly 0. The clamp is on
 * the scaled exponent itself: a bound on the logit (lmax - 87 / inv_t) rounds in float,
 * and at temperatures near 1e-8 let exponents past exp_core's range through, whose
 * weights came out negative. */
double sampler__exp_sum(float *out, const float *x, int n, float lmax, float inv_t)
{
    /* -87 (lmax is finite), worked out from lmax so that GCC takes it for a variable:
     * against a constant it keeps the clamp a branch and the loop scalar */
    const float lo = (lmax - lmax) - 87.0f;
    double total = 0.0;
    int i = 0;
    for (; i + SAMPLER_LANES * 16 <= n; i += SAMPLER_LANES * 16) {
        float acc[SAMPLER_LANES] = { 0 };
        for (int k = 0; k < SAMPLER_LANES * 16; k += SAMPLER_LANES)
            for (int j = 0; j < SAMPLER_LANES; j++) {
                const float z = (sampler__clean_logit(x[i + k + j]) - lmax) * inv_t;
                const int32_t keep = -(int32_t)(z >= lo);
                const float e = exp_core(z > lo ? z : lo, keep);
                out[i + k + j] = e;
                acc[j] += e;
            }
        float b = 0.0f;
        for (int j = 0; j < SAMPLER_LANES; j++)
            b += acc[j];
        total += b;
    }
    for (; i < n; i++) {
        out[i] = sampler_expf((sampler__clean_logit(x[i]) - lmax) * inv_t);
        total += out[i];
    }
    return total;
}
