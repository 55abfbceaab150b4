/* tokenizer_props.h: the round-trip properties both tokenizer targets check. */
#ifndef TESSERA_FUZZ_TOKENIZER_PROPS_H
#define TESSERA_FUZZ_TOKENIZER_PROPS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tokenizer.h"

/* Aborts unless tok (borrowed) can spell every byte on its own: each single byte must
 * tokenize and decode back to itself. The round-trip property needs it; a vocabulary
 * without it would make the target check nothing. */
void fuzz_tokenizer_require_bytes(const ts_tokenizer *tok);

/* One fuzz input against tok. data[0] picks the mode: bit 0 clear, the rest is text;
 * set, the rest is a stream of little-endian 16-bit ids (modulo the vocabulary); bit 1
 * sets add_special (BOS where the vocabulary starts prompts with it). Checked, aborting
 * on violation:
 *   text:  detokenize(tokenize(x)) == x, where SentencePiece vocabularies read U+2581
 *          as a space (the encoder escapes spaces as U+2581 and the decoder turns every
 *          U+2581 back into a space, so a literal U+2581 comes back as ' '); the leading
 *          space the SentencePiece encoder adds is the one the decoder drops, so no other
 *          difference is allowed. BOS comes first when asked for and decodes to nothing.
 *   ids:   s = detokenize(ids); c = tokenize(s): detokenize(c) == s (U+2581 read as
 *          above), and when s holds no U+2581, tokenize(detokenize(c)) == c: a text's
 *          canonical ids round-trip.
 *   both:  ids lie in [0, vocab); a short buffer gets a prefix of the full answer and
 *          the same count.
 * Bit 0 clear and bit 2 set: the text is read with special tokens (ts_tokenize_ex), a
 * plain span from each 0x02 byte to the next; same range and prefix checks, and a plain
 * span over the whole text must give ts_tokenize's ids. */
void fuzz_tokenizer_check(const ts_tokenizer *tok, const uint8_t *data, size_t size);

/* Tokenizes len bytes of text with tok (a vocabulary from an untrusted file), as a prompt
 * and as plain text, and decodes the ids: aborts unless every id lies in the vocabulary. */
void fuzz_tokenizer_use(const ts_tokenizer *tok, const char *text, size_t len);

#endif /* TESSERA_FUZZ_TOKENIZER_PROPS_H */
