/* schema_nfa.h: a string pattern as a Thompson NFA over sets of code points, between the
 * parser (schema_regex.c) and the determinizer (schema_dfa.c). */
#ifndef TESSERA_GRAMMAR_SCHEMA_NFA_H
#define TESSERA_GRAMMAR_SCHEMA_NFA_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/status.h"

#define SCH_CP_MAX 0x10FFFFu

typedef struct sch_range {
    uint32_t lo, hi;
} sch_range;

/* A set of code points: sorted, disjoint, non-adjacent ranges. */
typedef struct sch_cset {
    sch_range *r;
    int n, cap;
} sch_cset;

typedef struct sch_nfa_state {
    int eps[2];  /* -1 for none */
    int set, to; /* an edge on the code points of sets[set] to state to; set -1: none */
} sch_nfa_state;

typedef struct sch_nfa {
    sch_nfa_state *s; /* (n) */
    int n, start, accept;
    sch_cset *sets;   /* (n_sets) */
    int n_sets;
} sch_nfa;

/* Parses pattern (len bytes of valid UTF-8, borrowed) into nfa; on failure msg (msg_size
 * bytes) says why and nfa is left freeable. */
ts_status schema__regex_nfa(const char *pattern, size_t len, sch_nfa *nfa, char *msg,
                            size_t msg_size);
void schema__nfa_free(sch_nfa *nfa);

#endif /* TESSERA_GRAMMAR_SCHEMA_NFA_H */
