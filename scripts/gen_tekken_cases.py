#!/usr/bin/env python3
"""Prints the cases[] table of tests/test_tokenizer_tekken.c: for each text, where every
word ends (byte offsets) under Mistral's tekken pre-tokenizer as llama.cpp cuts it. Needs
Python's `regex` module. Run from the repository root:
    scripts/gen_tekken_cases.py > /tmp/cases.c
and paste the output over the table.

llama.cpp (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_TEKKEN; src/unicode.cpp,
unicode_regex_split) has no hand-written splitter for tekken. Its expression uses \\p{L}
and \\p{N}, so it runs through std::regex on a "collapsed" copy of the text: ASCII stays
itself, every other character becomes one byte for its category (whitespace U+000B,
numbers 0xD1, letters 0xD2, punctuation 0xD3, marks 0xD4, symbols 0xD5, anything else
0xD0), and each \\p{..} in the expression becomes a class of that byte and the ASCII
characters of the category. This script does the same with Python's regex module, whose
backtracking takes the same first match as ECMAScript's."""
import sys
import unicodedata

import regex

sys.path.insert(0, __file__.rsplit('/', 1)[0])
from gen_pre_cases import WHITE_SPACE, c_string, readable, wrap  # noqa: E402

# llama.cpp's expression for tekken, \p{..} already replaced as its collapsing does.
L = r'[\xd2A-Za-z]'
N = r'[\xd10-9]'
TEKKEN = (r'[^\r\n\xd2A-Za-z\xd10-9]?((?=' + L + r')([^a-z]))*((?=' + L + r')([^A-Z]))+|'
          r'[^\r\n\xd2A-Za-z\xd10-9]?((?=' + L + r')([^a-z]))+((?=' + L + r')([^A-Z]))*|'
          + N + r'| ?[^\s\xd2A-Za-z\xd10-9]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+')

TEXTS = [
    # case changes inside words
    "HelloWorld camelCase HTMLParser iPhone ABC DEF",
    "McDonald'S O'Neil I'M don't we'll you're",
    # digits one by one, punctuation runs with trailing line breaks and slashes
    "1234567 89 $100.00 3.14159",
    "a/b//c http://x.y/z \n/\n",
    "!hello ...world?!\n\n",
    " !! \t!!",
    "(x+y)*2=z __init__ self.__dict__",
    # whitespace runs and line breaks
    "a  b   c    ",
    "  \n  \n  x",
    "hello\n\nworld\r\n",
    "\t\tx\ty",
    "x   ",
    "   ",
    "\n",
    "a\u00a0b \u2003c",
    # non-Latin scripts: caseless to llama.cpp, so a capital starts no new word
    "café naïve über ÉCOLE ÜBER Straße",
    "Москва МОСКВА мир Ελληνικά",
    "AÉB ÀB aÀb ÀbC",
    "中文字 日本語 한국어 テスト",
    "שלום עולם مرحبا",
    "cafe\u0301 e\u0301t\u00e9",
    "😀 smile 😀😀",
    "Ⅻ ½ ² ١٢٣",
]


def collapse(text):
    """The text as llama.cpp hands it to std::regex: one character per code point."""
    out = ''
    for ch in text:
        cp = ord(ch)
        if cp < 0x80:
            out += ch
        elif any(lo <= cp <= hi for lo, hi in WHITE_SPACE):
            out += '\x0b'
        else:
            cat = unicodedata.category(ch)[0]
            out += {'N': '\xd1', 'L': '\xd2', 'P': '\xd3', 'M': '\xd4', 'S': '\xd5'}.get(cat, '\xd0')
    return out


def word_ends(text):
    r = regex.compile(TEKKEN)
    collapsed, ends, last = collapse(text), [], 0
    for m in r.finditer(collapsed):
        assert m.start() == last, 'every character is in some word'
        last = m.end()
        ends.append(len(text[:last].encode()))
    assert last == len(text)
    return ends


def main():
    for t in TEXTS:
        e = word_ends(t)
        if len(e) >= 32:
            raise SystemExit('a text has %d words: the table needs longer arrays' % len(e))
        if any(ord(ch) > 0x7F for ch in t):
            print('    /* %s */' % readable(t))
        print('    {%s,' % c_string(t))
        print(wrap('     {%s}},' % ', '.join(map(str, e))))


if __name__ == '__main__':
    main()
