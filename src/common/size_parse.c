/* size_parse.c: byte sizes with K/M/G/T suffixes, as command-line options give them. */
#include <ctype.h>
#include <stdint.h>

#include "common/size_parse.h"

ts_status size_parse(size_t *out, const char *s, ts_error *err)
{
    *out = 0;
    if (!s)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "size: missing value");
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p))
        goto bad;
    /* Integer part, then up to 9 fraction digits, kept exact as integers. */
    uint64_t whole = 0, frac = 0, frac_den = 1;
    while (isdigit((unsigned char)*p)) {
        if (whole > (UINT64_MAX - 9) / 10)
            goto overflow;
        whole = whole * 10 + (uint64_t)(*p++ - '0');
    }
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            goto bad;
        while (isdigit((unsigned char)*p)) {
            if (frac_den < 1000000000u) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_den *= 10;
            } else if (*p != '0') { /* a billionth of a K is no whole byte either */
                return ts_error_set(err, TS_ERR_INVALID_ARG,
                                    "size '%s' is not a whole number of bytes", s);
            }
            p++;
        }
    }
    uint64_t mult = 1;
    switch (toupper((unsigned char)*p)) {
    case 'K': mult = UINT64_C(1) << 10; break;
    case 'M': mult = UINT64_C(1) << 20; break;
    case 'G': mult = UINT64_C(1) << 30; break;
    case 'T': mult = UINT64_C(1) << 40; break;
    default: break;
    }
    if (mult > 1) {
        p++;
        if (toupper((unsigned char)p[0]) == 'I' && toupper((unsigned char)p[1]) == 'B')
            p += 2;
        else if (toupper((unsigned char)p[0]) == 'B')
            p++;
    } else if (toupper((unsigned char)*p) == 'B') {
        p++;
    }
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        goto bad;
    if (whole > UINT64_MAX / mult)
        goto overflow;
    /* frac / frac_den * mult, exactly: mult is 2^k and frac_den 10^d, so their common
     * factors of 2 go first; then frac < 10^d times what is left of mult stays under
     * 5^9 * 2^40 < 2^62. */
    uint64_t fmult = mult, fden = frac_den;
    while (fmult > 1 && fden % 2 == 0) {
        fmult /= 2;
        fden /= 2;
    }
    uint64_t fpart = frac * fmult;
    if (fpart % fden != 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "size '%s' is not a whole number of bytes",
                            s);
    uint64_t v = whole * mult;
    if (v > UINT64_MAX - fpart / fden || v + fpart / fden > SIZE_MAX)
        goto overflow;
    *out = (size_t)(v + fpart / fden);
    return TS_OK;
bad:
    return ts_error_set(err, TS_ERR_INVALID_ARG,
                        "size '%s': expected a number with an optional K, M, G or T suffix", s);
overflow:
    return ts_error_set(err, TS_ERR_INVALID_ARG, "size '%s' is too large", s);
}
