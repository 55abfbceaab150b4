/* json_exact.h: a cJSON value printed compactly with every number written so that it
 * reads back as the same double. cJSON's own printer keeps 15 digits whenever they read
 * back within a unit or two in the last place, so a bound or an enum value it prints can
 * differ from the one it parsed (3.6999999999999997 prints as 3.7). */
#ifndef TESSERA_COMMON_JSON_EXACT_H
#define TESSERA_COMMON_JSON_EXACT_H

struct cJSON;

/* v (borrowed) as compact JSON text, each number the shortest of %.15g, %.16g and %.17g
 * that strtod reads back exactly. Malloc'd (free it); NULL when out of memory. */
char *json_print_exact(const struct cJSON *v);

#endif /* TESSERA_COMMON_JSON_EXACT_H */
