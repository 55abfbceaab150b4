#!/usr/bin/env python3
"""Prints the cases[] table of tests/test_tokenizer_pre.c: for each text, where every word
ends (byte offsets) under each byte-level BPE pre-tokenizer we support, as llama.cpp cuts
it. Needs Python's `regex` module (pip install regex). Run from the repository root:
    scripts/gen_pre_cases.py > /tmp/cases.c
and paste the output over the table.

llama.cpp (src/llama-vocab.cpp, llm_tokenizer_bpe; src/unicode.cpp, unicode_regex_split)
applies a family's expressions in turn: each one cuts every piece the ones before it left
into its matches and the stretches between them. The expressions below are llama.cpp's.
Its hand-written splitters (GPT-2's, Llama 3's) and its \\p{..} path see the real Unicode
categories, as Python's regex does. The other expressions (all of deepseek-llm's but the
last) run through std::wregex on a copy of the text in which each non-ASCII whitespace
character is U+000B, and their $ is the end of the piece (written \\Z here); this script
does the same, so that to them such a character is whitespace only, as to llama.cpp."""
import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"
          r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")

# deepseek-llm's second expression lists its letters as ranges of characters; these are
# their code points (inclusive), in its order.
DEEPSEEK_LETTERS = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
DEEPSEEK_PUNCT = [(0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E),
                  (0x2018, 0x201F), (0x3000, 0x3002)]
DEEPSEEK_CJK = [(0x4E00, 0x9FA5), (0x800, 0x4E00), (0xAC00, 0xD7FF)]


def char_class(ranges):
    return '[' + ''.join('\\U%08x-\\U%08x' % r for r in ranges) + ']'


DEEPSEEK_LLM = [r"[\r\n]", r"\s?" + char_class(DEEPSEEK_LETTERS) + "+",
                r"\s?" + char_class(DEEPSEEK_PUNCT) + "+", r"\s+\Z",
                char_class(DEEPSEEK_CJK) + "+", r"\p{N}+"]

# The size of split_case's arrays of word ends in tests/test_tokenizer_pre.c.
ENDS_SIZE = 32

# Column (split_case's field, in its order) -> (expressions in turn, the indices of those
# llama.cpp runs through std::wregex).
FAMILIES = {
    'llama3': ([LLAMA3], ()),
    'qwen2': ([QWEN2], ()),
    'smollm': ([r"\p{N}", GPT2], ()),
    'deepseek_llm': (DEEPSEEK_LLM, (0, 1, 2, 3, 4)),
}

# The White_Space property, which llama.cpp's whitespace flag follows.
WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]

TEXTS = [
    "Hello, World! I'M here; they'll say we've done it, don't you'RE?",
    "1234567 89 $100.00 3.14159",
    "a  b   c    ",
    "  \n  \n  x",
    "hello\n\nworld\r\n",
    "\t\tx\ty",
    "!hello ...world?!\n\n",
    " !! \t!!",
    "x   ",
    "中文字 日本語",
    "café naïve über",
    "😀 smile 😀😀",
    "'hello' 'Ll 's",
    "line1\nline2\n\n\n  indented",
    "   ",
    "\n",
    "a\u00a0b \u2003c",
    "(x+y)*2=z",
    "__init__ self.__dict__",
    "Ⅻ ½ ²",
    "abc 123 4x",
    "x  12",
    "'s1 1's",
    "a1b2 c3d",
    "  7",
    "9\n\n 8 ",
    "v2.0.1-rc3",
    # what deepseek-llm cuts its own way: CJK and full-width punctuation, U+3000 (only
    # whitespace to llama.cpp), letters in and out of its list, digits, line breaks
    "中文，测试。你好！“引号”",
    "日本\u3000語 テスト\u3000 x",
    "Việt Ελληνικά ქართული Հայերեն",
    "한국어 텍스트123 ١٢٣ Ⅻ",
    "a \n\n  b\t\r\n c  ",
    "x...!?  ;-) <a/> --b",
    " 1 中 “q” ａｂ",
    "שלום עולם 😀  \nمرحبا  x,  ",
]


def stl_text(text):
    """The text as llama.cpp hands it to std::wregex: non-ASCII whitespace as U+000B."""
    def space(c):
        return any(lo <= ord(c) <= hi for lo, hi in WHITE_SPACE)
    return ''.join('\x0b' if ord(c) > 0x7F and space(c) else c for c in text)


def word_ends(text, exprs, stl):
    """llama.cpp's unicode_regex_split: piece lengths in code points, then byte ends."""
    pieces = [len(text)]
    alt = stl_text(text)
    for i, expr in enumerate(exprs):
        t = alt if i in stl else text
        r = regex.compile(expr)
        out, start = [], 0
        for length in pieces:
            piece, last = t[start:start + length], 0
            for m in r.finditer(piece):
                if m.start() > last:
                    out.append(m.start() - last)
                out.append(m.end() - m.start())
                last = m.end()
            if last < length:
                out.append(length - last)
            start += length
        pieces = out
    ends, cp = [], 0
    for length in pieces:
        cp += length
        ends.append(len(text[:cp].encode()))
    return ends


def c_string(text, width=88):
    """The text as C string literals of at most width characters each (continued on the
    lines after); bytes outside printable ASCII escaped, as \\xNN but for \\t \\n \\r."""
    chunks, cur, after_hex = [], '', False
    for ch in text:
        esc = ''
        for b in ch.encode():
            c = chr(b)
            if c in '\t\n\r"\\':
                esc += {'\t': '\\t', '\n': '\\n', '\r': '\\r'}.get(c, '\\' + c)
            elif 0x20 <= b < 0x7F:
                # a hex digit right after \xNN would join it: end the literal first
                esc += ('""' if after_hex and c in '0123456789abcdefABCDEF' else '') + c
            else:
                esc += '\\x%02x' % b
                after_hex = True
                continue
            after_hex = False
        if len(cur) + len(esc) > width:
            chunks.append(cur)
            cur = ''
        cur += esc
    chunks.append(cur)
    return '\n     '.join('"%s"' % c for c in chunks)


def readable(text):
    """The text for a comment: non-ASCII as it is, controls and odd spaces escaped."""
    out = ''
    for ch in text:
        if ch in '\n\r\t':
            out += {'\n': '\\n', '\r': '\\r', '\t': '\\t'}[ch]
        elif ch != ' ' and (ord(ch) < 0x20 or regex.match(r'[\s\p{C}]', ch)):
            out += '\\u%04x' % ord(ch)
        else:
            out += ch
    return out


def wrap(line, width=98):
    """Breaks a list of numbers after a comma so that its lines stay within width."""
    out = []
    while len(line) > width:
        cut = line.rindex(', ', 0, width) + 1
        out.append(line[:cut])
        line = '      ' + line[cut + 1:]
    return '\n'.join(out + [line])


def main():
    rows = [[word_ends(t, *FAMILIES[c]) for c in FAMILIES] for t in TEXTS]
    longest = max(len(e) for row in rows for e in row)
    if longest >= ENDS_SIZE:  # a 0 must still fit after the last end
        raise SystemExit('a text has %d words: split_case needs longer arrays' % longest)
    for t, row in zip(TEXTS, rows):
        lists = [wrap('     {%s}' % ', '.join(map(str, e))) for e in row]
        if any(ord(ch) > 0x7F for ch in t):
            print('    /* %s */' % readable(t))
        print('    {%s,' % c_string(t))
        print(',\n'.join(lists) + '},')


if __name__ == '__main__':
    main()
