#!/usr/bin/env python3
"""bench/moe_plot.py: decode tok/s against concurrent streams for the Qwen3-30B-A3B shape,
tessera beside llama.cpp, as an SVG drawn from docs/BENCHMARKS.md's own table (the
"Qwen3-30B-A3B shape, Q4_K_M" section): no number is typed here, so the plot says what
the table says. Plain Python, no plotting library.

usage: bench/moe_plot.py [BENCHMARKS.md] [OUT.svg]
  defaults: docs/BENCHMARKS.md and docs/img/moe_qwen3_30b_a3b_streams.svg

Each "| decode, N stream(s) ... | tessera | llama.cpp | ratio |" row of the section gives
one point per side: the first number of each cell (where the table has a second tessera
run in brackets, the first is plotted; where it has two rows for one stream count, the
first row). The row's label goes under the points, so a row whose prompts differ between
the two sides says so on the plot as in the table.
"""
import math
import os
import re
import sys

SECTION = "**Qwen3-30B-A3B shape, Q4_K_M**"
W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 30, 50, 90


def read_rows(path):
    """[(streams, label, tessera, peer, peer_name)] from the section's table."""
    text = open(path, encoding="utf-8").read()
    at = text.find(SECTION)
    if at < 0:
        sys.exit("moe_plot.py: no %s section in %s" % (SECTION, path))
    rows, header = {}, None
    for line in text[at:].splitlines()[1:]:
        if header and not line.startswith("|"):
            break  # the table's end
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        m = re.match(r"decode, (\d+) streams?(.*)", cells[0])
        if not m:
            continue
        nums = [re.search(r"\d+(?:\.\d+)?", c) for c in cells[1:3]]
        if not all(nums):
            continue
        n = int(m.group(1))
        if n not in rows:  # the first row of a stream count
            rows[n] = (n, m.group(2).strip(" ()"), float(nums[0].group()),
                       float(nums[1].group()), header[2])
    if len(rows) < 2:
        sys.exit("moe_plot.py: fewer than two decode rows under %s" % SECTION)
    return [rows[n] for n in sorted(rows)]


def svg(rows, title):
    xs = [math.log(r[0]) for r in rows]
    top = max(max(r[2], r[3]) for r in rows)
    step = 10 ** math.floor(math.log10(top)) / 2
    ymax = math.ceil(top * 1.1 / step) * step
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    span = xs[-1] - xs[0]

    def px(i):
        return LEFT + pw * (xs[i] - xs[0]) / span if span else LEFT + pw / 2

    def py(v):
        return TOP + ph * (1 - v / ymax)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="14" text-anchor="middle">%s</text>' % (W // 2, title)]
    for k in range(int(ymax / step) + 1):  # y grid
        v = k * step
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   % (LEFT, W - RIGHT, py(v), py(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (LEFT - 6, py(v) + 4, v))
    for i, r in enumerate(rows):  # x ticks: the stream counts, log-spaced
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (px(i), H - BOTTOM + 18, r[0]))
        if r[1]:  # the row's own words, kept inside the plot at either end
            anchor = "start" if i == 0 else "end" if i == len(rows) - 1 else "middle"
            out.append('<text x="%.1f" y="%d" text-anchor="%s" font-size="9" fill="#555">%s</text>'
                       % (px(i), H - BOTTOM + 32 + 11 * (i % 2), anchor, r[1][:90]))
    out.append('<text x="%d" y="%d" text-anchor="middle">concurrent streams (log scale)</text>'
               % (LEFT + pw // 2, H - 30))
    out.append('<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">'
               'decode tok/s, all streams</text>' % (TOP + ph // 2, TOP + ph // 2))
    for col, colour, dash, name in ((2, "#1f77b4", "", "tessera"), (3, "#d62728", "6,4", rows[0][4])):
        pts = " ".join("%.1f,%.1f" % (px(i), py(r[col])) for i, r in enumerate(rows))
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>'
                   % (pts, colour, ' stroke-dasharray="%s"' % dash if dash else ""))
        for i, r in enumerate(rows):
            out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (px(i), py(r[col]), colour))
            out.append('<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%g</text>'
                       % (px(i), py(r[col]) + (-8 if col == 2 else 16), colour, r[col]))
        y = TOP + 10 + (0 if col == 2 else 18)
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                   % (LEFT + 10, LEFT + 40, y, y, colour, ' stroke-dasharray="%s"' % dash if dash else ""))
        out.append('<text x="%d" y="%d">%s</text>' % (LEFT + 46, y + 4, name))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    doc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "docs", "BENCHMARKS.md")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "docs", "img",
                                                             "moe_qwen3_30b_a3b_streams.svg")
    rows = read_rows(doc)
    with open(out, "w", encoding="utf-8") as f:
        f.write(svg(rows, "Qwen3-30B-A3B shape, Q4_K_M, 16 threads: decode against streams"))
    print("moe_plot.py: wrote %s (streams: tessera vs peer: %s)"
          % (out, ", ".join("%d: %g vs %g" % (r[0], r[2], r[3]) for r in rows)))


if __name__ == "__main__":
    main()
