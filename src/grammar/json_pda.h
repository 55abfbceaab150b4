/* json_pda.h: a pushdown automaton over bytes that accepts one JSON object (RFC 8259,
 * whitespace runs bounded): the constraint behind response_format json_object. It knows
 * nothing of tokens or requests; token_trie.c walks it over a vocabulary. */
#ifndef TESSERA_GRAMMAR_JSON_PDA_H
#define TESSERA_GRAMMAR_JSON_PDA_H

#include <stdbool.h>
#include <stdint.h>

enum {
    JSON_PDA_MAX_DEPTH = 32, /* nested objects and arrays; deeper input is rejected */
    JSON_PDA_MAX_WS = 12,    /* whitespace bytes in a row; more are rejected, so a model
                              * cannot spin in whitespace forever */
};

/* The whole state: a plain value, copied freely (the trie walk copies it per node). */
typedef struct json_pda {
    uint8_t stack[JSON_PDA_MAX_DEPTH]; /* (depth) '{' or '[' per open container */
    uint8_t depth;
    uint8_t mode;    /* what the next byte may be (json_pda.c's pda_mode) */
    uint8_t sub;     /* mode detail: literal position, hex digits left, UTF-8 bytes left */
    uint8_t ws;      /* whitespace bytes in a row */
    uint8_t lit;     /* which literal (true, false, null) */
    uint8_t lo, hi;  /* the bounds of the next byte of a multi-byte character */
    bool in_key;     /* the string being read is an object key */
    bool any_root;   /* the top-level value may be any value, not only an object */
} json_pda;

/* The state before the first byte: expects (after optional whitespace) an object. */
void json_pda_init(json_pda *p);

/* The state before any one JSON value (object, array, string, number, literal), with no
 * whitespace before it: a free value inside a JSON-schema automaton. A number at the top
 * level has no end of its own: json_pda_can_end says when it may stop. */
void json_pda_init_value(json_pda *p);

/* Feeds one byte: true and p advanced when the byte may come next, false (p unchanged)
 * otherwise. Strings must be valid UTF-8 without control bytes. */
bool json_pda_step(json_pda *p, uint8_t byte);

/* True when a and b allow exactly the same continuations (fields a mode does not read
 * are ignored): a mask computed for one serves the other. Inside a string this holds
 * from token to token, so a sequence writing a string reuses its mask. */
bool json_pda_same(const json_pda *a, const json_pda *b);

/* True once the top-level object has closed: no byte may follow. */
bool json_pda_accepted(const json_pda *p);

/* True when the text so far is a complete top-level value: accepted, or a top-level number
 * that may end here (json_pda_init_value). */
bool json_pda_can_end(const json_pda *p);

/* Bytes of the shortest text that completes the value from p (0 when it is complete):
 * closing the open string, number or literal with its fewest bytes, a pending key with
 * `"":0`, a pending value with 0 (or {} for the top-level object), and each open
 * container with its closer. */
int json_pda_close_cost(const json_pda *p);

/* Clears the fields p's mode does not read, so that two states allow the same
 * continuations exactly when their bytes are equal (json_pda_same). */
void json_pda_canonical(json_pda *p);

#endif /* TESSERA_GRAMMAR_JSON_PDA_H */
