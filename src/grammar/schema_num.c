/* schema_num.c: integers and numbers between bounds. A value is written without exponent,
 * with at most sch_node.num.frac fraction digits, so every value is N / 10^frac for an
 * integer N, and the bounds become a range [lo, hi] of N. A prefix is allowed only while
 * some value it can still become lies in that range, so no value out of range is ever
 * written and no prefix is a dead end. For numbers, lo and hi are chosen so that what a
 * validator reads (the text as a double, correctly rounded) is within the schema's double
 * bounds; integers stay within +-(2^53 - 1), where a double holds them exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"

enum { INT_DIGITS = 16, NUM_INT_DIGITS = 12 };
#define INT_LIMIT 9007199254740991LL    /* 2^53 - 1 */
#define NUM_LIMIT 999999999999999999LL  /* 10^18 - 1: |value| < 10^12 at 6 fraction digits */

typedef enum num_phase { NUM_SIGN, NUM_ZERO, NUM_INT, NUM_DOT, NUM_FRAC } num_phase;

static int64_t pow10i(int k)
{
    int64_t p = 1;
    while (k-- > 0)
        p *= 10;
    return p;
}

/* The double a validator reads from N / 10^frac written out. */
static double value_of(int64_t n, int frac)
{
    char buf[48];
    int64_t p = pow10i(frac), a = n < 0 ? -n : n;
    if (frac)
        snprintf(buf, sizeof buf, "%s%lld.%0*lld", n < 0 ? "-" : "", (long long)(a / p), frac,
                 (long long)(a % p));
    else
        snprintf(buf, sizeof buf, "%lld", (long long)n);
    return strtod(buf, NULL);
}

/* The least N in [lo, hi] whose value is >= m (hi + 1 when none). */
static int64_t least_at_least(double m, int frac, int64_t lo, int64_t hi)
{
    long double g = ceill((long double)m * (long double)pow10i(frac));
    if (g <= (long double)lo)
        return lo;
    if (g > (long double)hi)
        return hi + 1;
    int64_t n = (int64_t)g;
    while (n > lo && value_of(n - 1, frac) >= m)
        n--;
    while (n <= hi && value_of(n, frac) < m)
        n++;
    return n;
}

/* The greatest N in [lo, hi] whose value is <= m (lo - 1 when none). */
static int64_t greatest_at_most(double m, int frac, int64_t lo, int64_t hi)
{
    long double g = floorl((long double)m * (long double)pow10i(frac));
    if (g >= (long double)hi)
        return hi;
    if (g < (long double)lo)
        return lo - 1;
    int64_t n = (int64_t)g;
    while (n < hi && value_of(n + 1, frac) <= m)
        n++;
    while (n >= lo && value_of(n, frac) > m)
        n--;
    return n;
}

bool schema__number_bounds(sch_node *n, bool integer, const double *min, const double *max,
                           const double *xmin, const double *xmax, double *lo_out,
                           double *hi_out)
{
    int frac = integer ? 0 : SCH_NUM_FRAC;
    int64_t lo = integer ? -INT_LIMIT : -NUM_LIMIT, hi = -lo;
    n->u.num.frac = (uint8_t)frac;
    n->u.num.int_digits = integer ? INT_DIGITS : NUM_INT_DIGITS;
    /* An exclusive bound b is the inclusive one just past it: a double above b is at
     * least nextafter(b). */
    double lo_d = -INFINITY, hi_d = INFINITY;
    if (min)
        lo_d = *min;
    if (xmin && nextafter(*xmin, INFINITY) > lo_d)
        lo_d = nextafter(*xmin, INFINITY);
    if (max)
        hi_d = *max;
    if (xmax && nextafter(*xmax, -INFINITY) < hi_d)
        hi_d = nextafter(*xmax, -INFINITY);
    *lo_out = lo_d;
    *hi_out = hi_d;
    int64_t a = lo_d == -INFINITY ? lo : least_at_least(lo_d, frac, lo, hi);
    int64_t b = hi_d == INFINITY ? hi : greatest_at_most(hi_d, frac, lo, hi);
    n->u.num.lo = a;
    n->u.num.hi = b;
    return a <= b;
}

/* Whether some value the number in l can still become lies in [lo, hi]. */
static bool reachable(const sch_node *n, const sch_leaf *l)
{
    int frac = n->u.num.frac;
    int64_t p = pow10i(frac), m = (int64_t)l->u.num.mag;
    int64_t lo_m, hi_m; /* magnitudes reachable, for one count of digits still to come */
    for (int j = 0;; j++) {
        switch ((num_phase)l->u.num.phase) {
        case NUM_SIGN: lo_m = 1, hi_m = pow10i(n->u.num.int_digits) * p - 1; break;
        case NUM_ZERO: lo_m = 0, hi_m = p - 1; break;
        case NUM_INT: {
            if (l->u.num.digits + j > n->u.num.int_digits)
                return false;
            int64_t s = pow10i(j);
            lo_m = m * s;
            hi_m = (m + p) * s - 1;
            break;
        }
        default: lo_m = m, hi_m = m + pow10i(frac - l->u.num.fd) - 1; break;
        }
        if (l->u.num.neg && lo_m == 0)
            lo_m = 1; /* no "-0" */
        if (lo_m <= hi_m) {
            int64_t a = l->u.num.neg ? -hi_m : lo_m, b = l->u.num.neg ? -lo_m : hi_m;
            if (a <= n->u.num.hi && b >= n->u.num.lo)
                return true;
        }
        if (l->u.num.phase != NUM_INT)
            return false;
    }
}

bool schema__num_can_end(const sch_node *n, const sch_leaf *l)
{
    num_phase ph = (num_phase)l->u.num.phase;
    if (ph != NUM_ZERO && ph != NUM_INT && ph != NUM_FRAC)
        return false;
    int64_t v = (int64_t)l->u.num.mag;
    if (l->u.num.neg) {
        if (v == 0)
            return false;
        v = -v;
    }
    return v >= n->u.num.lo && v <= n->u.num.hi;
}

bool schema__num_step(const sch_node *n, sch_leaf *l, uint8_t c)
{
    sch_leaf was = *l;
    int frac = n->u.num.frac;
    bool digit = c >= '0' && c <= '9';
    uint64_t d = digit ? (uint64_t)(c - '0') : 0, p = (uint64_t)pow10i(frac);
    switch ((num_phase)l->u.num.phase) {
    case NUM_SIGN:
        if (!digit)
            return false;
        l->u.num.phase = d ? NUM_INT : NUM_ZERO;
        l->u.num.mag = d * p;
        l->u.num.digits = 1;
        break;
    case NUM_ZERO:
    case NUM_INT:
        if (c == '.' && frac > 0) {
            l->u.num.phase = NUM_DOT;
            break;
        }
        if (!digit || l->u.num.phase == NUM_ZERO || l->u.num.digits >= n->u.num.int_digits)
            return false;
        l->u.num.mag = l->u.num.mag * 10 + d * p;
        l->u.num.digits++;
        break;
    default: /* NUM_DOT, NUM_FRAC */
        if (!digit || l->u.num.fd >= frac)
            return false;
        l->u.num.fd++;
        l->u.num.mag += d * (uint64_t)pow10i(frac - l->u.num.fd);
        l->u.num.phase = NUM_FRAC;
        break;
    }
    if (!reachable(n, l)) {
        *l = was;
        return false;
    }
    return true;
}

bool schema__num_start(const sch_node *n, sch_leaf *l, uint8_t c)
{
    sch_leaf was = *l;
    memset(&l->u, 0, sizeof l->u);
    l->kind = LEAF_NUMBER;
    l->u.num.phase = NUM_SIGN;
    l->u.num.neg = c == '-';
    if (c == '-' ? reachable(n, l) : schema__num_step(n, l, c))
        return true;
    *l = was;
    return false;
}
