/* schema_hash.c: the hashes by which a schema's automaton tells values apart without
 * keeping them (schema.h): uniqueItems, `not` of strings, and the keys written under
 * additionalProperties. One value has one hash however it is spelled (escapes, trailing
 * fraction zeros); two values sharing a hash are told apart never, so a collision only
 * forbids a value, never lets a duplicate through. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_exact.h"
#include "grammar/schema.h"

uint32_t schema__hash_bytes(uint32_t h, const void *bytes, size_t n)
{
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

uint32_t schema__number_hash(uint64_t mag, int frac, bool neg)
{
    while (frac > 0 && mag % 10 == 0)
        mag /= 10, frac--;
    uint8_t bytes[11] = {'n', (uint8_t)(neg && mag), (uint8_t)frac};
    memcpy(bytes + 3, &mag, sizeof mag);
    return schema__hash_bytes(SCH_HASH_SEED, bytes, sizeof bytes);
}

uint32_t schema__value_hash(const cJSON *v)
{
    if (cJSON_IsString(v))
        return schema__hash_bytes(SCH_HASH_STRING, v->valuestring, strlen(v->valuestring));
    if (cJSON_IsNumber(v)) { /* as the automaton would read its shortest decimal */
        double a = fabs(v->valuedouble), scale = 1;
        for (int frac = 0; frac <= SCH_NUM_FRAC && a * scale < 9e15; frac++, scale *= 10) {
            double m = nearbyint(a * scale);
            if (fabs(m - a * scale) <= 1e-9 * (m > 1 ? m : 1))
                return schema__number_hash((uint64_t)m, frac, v->valuedouble < 0);
        }
    }
    char *text = json_print_exact(v);
    uint32_t h = schema__hash_bytes(SCH_HASH_SEED ^ 'j', text ? text : "", text ? strlen(text) : 0);
    free(text);
    return h;
}
