/* quant_fit.c: least-squares scale searches for one block and for the K types' two-level
 * super-blocks. Each tries a small set of candidate scales around the one that maps the
 * largest value onto an end level, refits the scale (and offset) by least squares for the
 * rounding each candidate gives, and keeps the candidate of least plain squared error. */
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant_internal.h"

enum {
    N_CANDIDATES = 8, /* candidate scales per end level */
    N_LLOYD = 2,       /* round-then-refit passes after the best candidate */
    MAX_SUB = 16,      /* sub-blocks per super-block (Q2_K, Q3_K, Q6_K) */
    MAX_SUPER = 256,
};

float quant__f16_round(float x)
{
    return gguf_f16_to_f32(gguf_f32_to_f16(x));
}

void quant__grid_uniform(quant_grid *g, int qmin, int qmax)
{
    memset(g, 0, sizeof *g);
    g->n = qmax - qmin + 1;
    g->lo = (float)qmin;
}

void quant__grid_codebook(quant_grid *g, const int8_t *vals, int n)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->vals = vals;
    for (int i = 0; i + 1 < n; i++)
        g->mid[i] = 0.5f * ((float)vals[i] + (float)vals[i + 1]);
    for (int c = -128, k = 0; c < 128; c++) {
        while (k + 1 < n && (float)c > g->mid[k])
            k++;
        g->near[c + 128] = (uint8_t)k;
    }
}

/* v held to [lo, hi] in two compares (fminf / fmaxf are calls, for their NaN rules); a
 * NaN (from non-finite input) comes out as lo, so indices made from it stay in range. */
static inline float clampf(float v, float lo, float hi)
{
    v = v > lo ? v : lo;
    return v < hi ? v : hi;
}

static inline float grid_value(const quant_grid *g, int i)
{
    return g->vals ? (float)g->vals[i] : g->lo + (float)i;
}

/* The codebook index nearest v: the table gives the nearest level to floor(v), and as
 * levels are more than one unit apart at most one step corrects it. */
static inline int codebook_index(const quant_grid *g, float v)
{
    float c = clampf(floorf(v), -128.0f, 127.0f);
    int k = g->near[(int)c + 128];
    if (k + 1 < g->n && v > g->mid[k])
        k++;
    else if (k > 0 && v <= g->mid[k - 1])
        k--;
    return k;
}

/* The index of the level nearest v (in scale units). */
static inline int grid_index(const quant_grid *g, float v)
{
    if (g->vals)
        return codebook_index(g, v);
    return (int)clampf(nearbyintf(v - g->lo), 0.0f, (float)(g->n - 1));
}

/* Rounds x / d onto the grid (q), and returns the least-squares scale for those indices
 * and its error through *err; sxx is the sum of x^2. */
static float round_and_refit(uint8_t *q, float *err, const float *x, int n, float d,
                             const quant_grid *g, float sxx)
{
    float sxv = 0.0f, svv = 0.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    if (g->vals) {
        for (int i = 0; i < n; i++) {
            int k = codebook_index(g, x[i] * id);
            float v = (float)g->vals[k];
            q[i] = (uint8_t)k;
            sxv += x[i] * v;
            svv += v * v;
        }
    } else {
        float hi = (float)(g->n - 1);
        for (int i = 0; i < n; i++) {
            float r = clampf(nearbyintf(x[i] * id - g->lo), 0.0f, hi), v = r + g->lo;
            q[i] = (uint8_t)r;
            sxv += x[i] * v;
            svv += v * v;
        }
    }
    if (svv <= 0.0f) {
        *err = sxx;
        return 0.0f;
    }
    *err = fmaxf(sxx - sxv * sxv / svv, 0.0f);
    return sxv / svv;
}

float quant__fit_sym(uint8_t *q, float *d, const float *x, int n, const quant_grid *g)
{
    float xm = 0.0f, sxx = 0.0f;
    for (int i = 0; i < n; i++) {
        sxx += x[i] * x[i];
        if (fabsf(x[i]) > fabsf(xm))
            xm = x[i];
    }
    memset(q, grid_index(g, 0.0f), (size_t)n); /* what stays if every error is NaN */
    if (xm == 0.0f) {
        *d = 0.0f;
        return 0.0f;
    }
    uint8_t tmp[MAX_SUPER];
    float best = INFINITY, best_d = 0.0f;
    /* The largest value lands near either end level; a scale a little smaller clips it,
     * a little larger leaves room. Steps are in fractions of the end level's spacing. */
    const float ends[2] = {grid_value(g, 0), grid_value(g, g->n - 1)};
    const float gaps[2] = {grid_value(g, 1) - ends[0], ends[1] - grid_value(g, g->n - 2)};
    for (int e = 0; e < 2; e++) {
        for (int t = 0; t < N_CANDIDATES; t++) {
            float level = ends[e] + (e ? 1.0f : -1.0f) * gaps[e] * (-0.5f + 1.5f * (float)t /
                                                                   (float)(N_CANDIDATES - 1));
            float err, dd = round_and_refit(tmp, &err, x, n, xm / level, g, sxx);
            if (err < best) {
                best = err;
                best_d = dd;
                memcpy(q, tmp, (size_t)n);
            }
        }
    }
    for (int it = 0; it < N_LLOYD && best_d != 0.0f; it++) {
        float err, dd = round_and_refit(tmp, &err, x, n, best_d, g, sxx);
        if (!(err < best))
            break;
        best = err;
        best_d = dd;
        memcpy(q, tmp, (size_t)n);
    }
    *d = best_d;
    return best;
}

/* Rounds (x - b) / a into [0, nmax], then refits a and b by least squares (b kept <= 0
 * when b_nonpos, a kept >= 0); the error of the refit through *err. */
static void affine_round_refit(uint8_t *q, float *a, float *b, float *err, const float *x,
                               int n, int nmax, bool b_nonpos)
{
    float ia = *a > 0.0f ? 1.0f / *a : 0.0f, b0 = *b;
    float fsq = 0.0f, fsqq = 0.0f, fsx = 0.0f, fsxq = 0.0f, fsxx = 0.0f;
    for (int i = 0; i < n; i++) {
        float k = clampf(nearbyintf((x[i] - b0) * ia), 0.0f, (float)nmax);
        q[i] = (uint8_t)k;
        fsq += k;
        fsqq += k * k;
        fsx += x[i];
        fsxq += x[i] * k;
        fsxx += x[i] * x[i];
    }
    double sq = fsq, sqq = fsqq, sx = fsx, sxq = fsxq, sxx = fsxx;
    double det = (double)n * sqq - sq * sq, na, nb;
    if (det > 0.0) {
        na = ((double)n * sxq - sq * sx) / det;
        nb = (sx - na * sq) / n;
    } else { /* every q equal: the mean is the offset */
        na = 0.0;
        nb = sx / n;
    }
    if (b_nonpos && nb > 0.0) { /* the offset pinned at 0: the scale alone */
        nb = 0.0;
        na = sqq > 0.0 ? sxq / sqq : 0.0;
    }
    if (na < 0.0) { /* a falling fit: flat at the mean instead */
        na = 0.0;
        nb = b_nonpos ? fmin(sx / n, 0.0) : sx / n;
    }
    *a = (float)na;
    *b = (float)nb;
    double e = sxx + na * na * sqq + (double)n * nb * nb - 2.0 * na * sxq - 2.0 * nb * sx +
               2.0 * na * nb * sq;
    *err = (float)fmax(e, 0.0);
}

float quant__fit_affine(uint8_t *q, float *a, float *b, const float *x, int n, int nmax,
                        bool b_nonpos)
{
    float mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    if (b_nonpos)
        mn = fminf(mn, 0.0f);
    memset(q, 0, (size_t)n); /* what stays if every error is NaN */
    if (mx <= mn) { /* constant block */
        *a = 0.0f;
        *b = mn;
        if (b_nonpos && mx > 0.0f) {
            memset(q, nmax, (size_t)n);
            *a = mx / (float)nmax;
            *b = 0.0f;
        }
        return 0.0f;
    }
    uint8_t tmp[MAX_SUPER];
    float best = INFINITY, best_a = 0.0f, best_b = mn;
    for (int t = 0; t < N_CANDIDATES; t++) {
        /* the range spread over nmax levels, give or take: -0.5 .. +1.5 levels */
        float steps = (float)nmax - 0.5f + 2.0f * (float)t / (float)(N_CANDIDATES - 1);
        float ca = (mx - mn) / steps, cb = mn, err;
        affine_round_refit(tmp, &ca, &cb, &err, x, n, nmax, b_nonpos);
        if (err < best) {
            best = err;
            best_a = ca;
            best_b = cb;
            memcpy(q, tmp, (size_t)n);
        }
    }
    for (int it = 0; it < N_LLOYD; it++) {
        float ca = best_a, cb = best_b, err;
        affine_round_refit(tmp, &ca, &cb, &err, x, n, nmax, b_nonpos);
        if (!(err < best))
            break;
        best = err;
        best_a = ca;
        best_b = cb;
        memcpy(q, tmp, (size_t)n);
    }
    *a = best_a;
    *b = best_b;
    return best;
}

/* ---- two-level super-blocks ---- */

float quant__grid_round(uint8_t *q, const float *x, int len, float s, const quant_grid *g)
{
    float is = s != 0.0f ? 1.0f / s : 0.0f, err = 0.0f;
    for (int i = 0; i < len; i++) {
        int k = grid_index(g, x[i] * is);
        float r = x[i] - s * grid_value(g, k);
        q[i] = (uint8_t)k;
        err += r * r;
    }
    return err;
}

/* With super-scale d fixed: each sub-block's integer scale (the rounding of its own best
 * scale s[k] / d, or a neighbour if that does better) and its indices. */
static float ksym_pass(uint8_t *q, int *sc, const float *x, const float *s, int n_sub, int len,
                       const quant_grid *g, int smin, int smax, float d)
{
    float total = 0.0f;
    uint8_t tmp[MAX_SUPER / 8];
    for (int k = 0; k < n_sub; k++) {
        const float *xk = x + k * len;
        float r = d != 0.0f ? nearbyintf(s[k] / d) : 0.0f;
        int c0 = (int)clampf(r, (float)smin, (float)smax);
        float best = INFINITY;
        for (int c = c0 - 1; c <= c0 + 1; c++) {
            if (c < smin || c > smax)
                continue;
            float err = quant__grid_round(tmp, xk, len, d * (float)c, g);
            if (err < best) {
                best = err;
                sc[k] = c;
                memcpy(q + k * len, tmp, (size_t)len);
            }
        }
        total += best;
    }
    return total;
}

/* The least-squares super-scale for fixed sub-block scales and indices. */
static float ksym_refit(const uint8_t *q, const int *sc, const float *x, int n_sub, int len,
                        const quant_grid *g)
{
    double sxu = 0.0, suu = 0.0;
    for (int i = 0; i < n_sub * len; i++) {
        double u = (double)sc[i / len] * grid_value(g, q[i]);
        sxu += x[i] * u;
        suu += u * u;
    }
    return suu > 0.0 ? (float)(sxu / suu) : 0.0f;
}

float quant__ksym(uint8_t *q, int *sc, float *d, const float *x, int n_sub, int len,
                  const quant_grid *g, int smin, int smax)
{
    float s[MAX_SUB], sm = 0.0f;
    uint8_t tq[MAX_SUPER] = {0};
    int tsc[MAX_SUB] = {0}; /* a pass whose errors are all inf (values past f16) sets none */
    for (int k = 0; k < n_sub; k++) {
        quant__fit_sym(tq + k * len, &s[k], x + k * len, len, g);
        if (fabsf(s[k]) > fabsf(sm))
            sm = s[k];
    }
    float best = INFINITY;
    *d = 0.0f;
    const float ends[2] = {(float)smin, (float)smax};
    for (int e = 0; e < 2 && sm != 0.0f; e++) {
        float dd = quant__f16_round(sm / ends[e]);
        for (int it = 0; it < 2 && dd != 0.0f; it++) {
            float err = ksym_pass(tq, tsc, x, s, n_sub, len, g, smin, smax, dd);
            if (err < best) {
                best = err;
                *d = dd;
                memcpy(q, tq, (size_t)(n_sub * len));
                memcpy(sc, tsc, (size_t)n_sub * sizeof *sc);
            }
            dd = quant__f16_round(ksym_refit(tq, tsc, x, n_sub, len, g));
        }
    }
    if (best == INFINITY) { /* all zero */
        memset(q, grid_index(g, 0.0f), (size_t)(n_sub * len));
        for (int k = 0; k < n_sub; k++)
            sc[k] = 0;
        best = 0.0f;
    }
    return best;
}

/* Squared error of one affine sub-block with scale a and subtracted minimum m. */
static float sub_affine(uint8_t *q, const float *x, int len, int nmax, float a, float m)
{
    float ia = a > 0.0f ? 1.0f / a : 0.0f, err = 0.0f;
    for (int i = 0; i < len; i++) {
        float r = nearbyintf((x[i] + m) * ia);
        int k = (int)clampf(r, 0.0f, (float)nmax);
        float e = x[i] - (a * (float)k - m);
        q[i] = (uint8_t)k;
        err += e * e;
    }
    return err;
}

static int clamp_round(float v, int hi)
{
    float r = nearbyintf(v);
    return (int)clampf(r, 0.0f, (float)hi);
}

static float kaffine_pass(uint8_t *q, int *sc, int *mn, const float *x, const float *a,
                          const float *m, int n_sub, int len, int nmax, int smax, float d,
                          float dmin)
{
    float total = 0.0f;
    uint8_t tmp[MAX_SUPER / 8];
    for (int k = 0; k < n_sub; k++) {
        const float *xk = x + k * len;
        int c0 = d > 0.0f ? clamp_round(a[k] / d, smax) : 0;
        int m0 = dmin > 0.0f ? clamp_round(m[k] / dmin, smax) : 0;
        /* the scale's neighbours at the rounded minimum, then the minimum's neighbours
         * at the best scale */
        static const int8_t dc[5] = {0, -1, 1, 0, 0}, dm[5] = {0, 0, 0, -1, 1};
        float best = INFINITY;
        for (int t = 0; t < 5; t++) {
            int c = (t < 3 ? c0 : sc[k]) + dc[t], mm = m0 + dm[t];
            if (c < 0 || c > smax || mm < 0 || mm > smax || (dmin <= 0.0f && mm != 0))
                continue;
            float err = sub_affine(tmp, xk, len, nmax, d * (float)c, dmin * (float)mm);
            if (err < best) {
                best = err;
                sc[k] = c;
                mn[k] = mm;
                memcpy(q + k * len, tmp, (size_t)len);
            }
        }
        total += best;
    }
    return total;
}

/* Least-squares d and dmin for fixed integers: x ~ d * (sc q) - dmin * mn. */
static void kaffine_refit(float *d, float *dmin, const uint8_t *q, const int *sc, const int *mn,
                          const float *x, int n_sub, int len)
{
    double suu = 0.0, suw = 0.0, sww = 0.0, sxu = 0.0, sxw = 0.0;
    for (int i = 0; i < n_sub * len; i++) {
        double u = (double)sc[i / len] * q[i], w = -(double)mn[i / len];
        suu += u * u;
        suw += u * w;
        sww += w * w;
        sxu += x[i] * u;
        sxw += x[i] * w;
    }
    double det = suu * sww - suw * suw, nd, nm;
    if (det > 1e-12 * suu * sww && sww > 0.0) {
        nd = (sxu * sww - sxw * suw) / det;
        nm = (suu * sxw - suw * sxu) / det;
    } else {
        nd = suu > 0.0 ? sxu / suu : 0.0;
        nm = 0.0;
    }
    if (nm < 0.0) {
        nm = 0.0;
        nd = suu > 0.0 ? sxu / suu : 0.0;
    }
    *d = (float)fmax(nd, 0.0);
    *dmin = (float)nm;
}

float quant__kaffine(uint8_t *q, int *sc, int *mn, float *d, float *dmin, const float *x,
                     int n_sub, int len, int nmax, int smax)
{
    float a[MAX_SUB], m[MAX_SUB], amax = 0.0f, mmax = 0.0f;
    uint8_t tq[MAX_SUPER] = {0};
    int tsc[MAX_SUB] = {0}, tmn[MAX_SUB] = {0}; /* a pass whose errors are all inf (values
                                                  * past f16's range) sets none */
    for (int k = 0; k < n_sub; k++) {
        float b;
        quant__fit_affine(tq + k * len, &a[k], &b, x + k * len, len, nmax, true);
        m[k] = -b;
        amax = fmaxf(amax, a[k]);
        mmax = fmaxf(mmax, m[k]);
    }
    float cd = quant__f16_round(amax / (float)smax), cm = quant__f16_round(mmax / (float)smax);
    float best = INFINITY;
    *d = *dmin = 0.0f; /* what stays if every error is NaN (non-finite input) */
    memset(q, 0, (size_t)(n_sub * len));
    memset(sc, 0, (size_t)n_sub * sizeof *sc);
    memset(mn, 0, (size_t)n_sub * sizeof *mn);
    for (int it = 0; it < 3; it++) {
        float err = kaffine_pass(tq, tsc, tmn, x, a, m, n_sub, len, nmax, smax, cd, cm);
        if (err < best) {
            best = err;
            *d = cd;
            *dmin = cm;
            memcpy(q, tq, (size_t)(n_sub * len));
            memcpy(sc, tsc, (size_t)n_sub * sizeof *sc);
            memcpy(mn, tmn, (size_t)n_sub * sizeof *mn);
        } else if (it > 0) {
            break;
        }
        kaffine_refit(&cd, &cm, tq, tsc, tmn, x, n_sub, len);
        cd = quant__f16_round(cd);
        cm = quant__f16_round(cm);
    }
    return best;
}
