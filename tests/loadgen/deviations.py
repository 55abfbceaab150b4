#!/usr/bin/env python3
"""deviations.py TESSERA: `tessera loadgen --stream` against peer.py, one mode at a time.
Each mode breaks OpenAI's stream format in one way; loadgen must name exactly that
deviation per request, still measure tokens, TTFT and ITL where the stream allows it, and
fail only the streams that cannot be measured (an error event, a stream with no ending).
A CRLF stream with a BOM, comments, multi-line data and events split across reads is
valid SSE and must show no deviation. --save-streams must keep the raw responses."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402

REQUESTS = 4
# mode: (deviations every request shows, error kind or None, expected tokens per request)
CASES = {
    "ok": (set(), None, 4),
    "crlf": (set(), None, 4),
    "invalid_utf8": ({"invalid_utf8_in_delta"}, None, 4),
    "split_utf8": ({"utf8_split_across_deltas"}, None, 4),
    "replacement": ({"replacement_char_in_delta"}, None, 4),
    "invalid_json": ({"invalid_json_event"}, None, 4),
    "missing_done": ({"missing_done"}, None, 4),
    "missing_usage": ({"missing_usage"}, None, 4),  # tokens counted as content chunks
    "missing_finish": ({"missing_finish_reason"}, None, 4),
    "missing_fields": ({"missing_fields"}, None, 4),
    "extra_fields": ({"extra_fields"}, None, 4),
    "sse_field": ({"non_data_sse_field"}, None, 4),
    "after_done": ({"data_after_done"}, None, 4),
    "unterminated": ({"unterminated_event"}, None, 4),
    "content_type": ({"content_type"}, None, 4),
    "error_event": ({"error_event", "missing_done", "missing_usage", "missing_finish_reason"},
                    "stream_error", 0),
    "truncated": ({"missing_done", "missing_usage", "missing_finish_reason"},
                  "truncated_stream", 0),
}


def run(binary, port, mode, tmp, chat=False):
    out = os.path.join(tmp, f"{mode}{'-chat' if chat else ''}.json")
    save = os.path.join(tmp, f"streams-{mode}{'-chat' if chat else ''}")
    cmd = [binary, "loadgen", "--url", f"http://127.0.0.1:{port}/{mode}", "--stream",
           "--concurrency", "2", "--requests", str(REQUESTS), "--prompt-len", "4",
           "--max-tokens", "4", "--timeout", "10", "--deadline", "60", "--json", out,
           "--save-streams", save] + (["--chat"] if chat else [])
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=120)
    with open(out) as f:
        return p, json.load(f)["levels"][0], save


def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="loadgen-dev-")
    port_file = os.path.join(tmp, "port")
    threading.Thread(target=peer.serve, args=(port_file,), daemon=True).start()
    for _ in range(100):
        if os.path.exists(port_file) and open(port_file).read():
            break
        threading.Event().wait(0.05)
    port = int(open(port_file).read())
    fails = []

    def check(name, cond, detail=""):
        print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail and not cond else ""))
        if not cond:
            fails.append(name)

    runs = [(m, False) for m in CASES] + [("ok", True), ("split_utf8", True),
                                          ("extra_fields", True)]
    for mode, chat in runs:
        devs, error, tokens = CASES[mode]
        p, lv, save = run(binary, port, mode, tmp, chat)
        tag = mode + (" (chat)" if chat else "")
        want_devs = {d: REQUESTS for d in devs}
        check(f"{tag}: deviations {sorted(devs)}", lv["deviations"] == want_devs,
              f"got {lv['deviations']}")
        if error:
            check(f"{tag}: every request fails as {error}",
                  lv["errors"] == {error: REQUESTS} and lv["ok"] == 0, f"got {lv['errors']}")
            check(f"{tag}: exit status 1", p.returncode == 1, str(p.returncode))
            continue
        check(f"{tag}: all {REQUESTS} requests ok, no errors",
              lv["ok"] == REQUESTS and lv["errors"] == {}, f"ok {lv['ok']}, {lv['errors']}")
        check(f"{tag}: exit status 0", p.returncode == 0, p.stderr + p.stdout)
        check(f"{tag}: {tokens} tokens each", lv["output_tokens"] == tokens * REQUESTS,
              str(lv["output_tokens"]))
        # four deltas 20 ms apart: TTFT after the first pause, ITL about 20 ms
        ttft, itl = lv["ttft_ms"]["p50"], lv["itl_ms"]["p50"]
        check(f"{tag}: TTFT and ITL measured", ttft is not None and itl is not None and
              ttft >= 15 and 15 <= itl < 2000, f"ttft {ttft}, itl {itl}")
        saved = sorted(os.listdir(save)) if os.path.isdir(save) else []
        if devs:
            check(f"{tag}: raw streams saved", lv["saved"] == len(saved) and 0 < len(saved) <= 4,
                  f"{lv['saved']} reported, {saved}")
            raw = open(os.path.join(save, saved[0]), "rb").read() if saved else b""
            check(f"{tag}: a saved stream holds headers and body",
                  raw.startswith(b"HTTP/1.1 200") and b"data:" in raw and b"[DONE]" in raw
                  or mode == "missing_done")
        else:
            check(f"{tag}: nothing saved", lv["saved"] == 0 and not saved, str(saved))
        if mode == "extra_fields":
            check(f"{tag}: the extra field is named", lv["extra_fields"] == ["timings"],
                  str(lv["extra_fields"]))
            check(f"{tag}: the summary names it", "extra_fields:4" in p.stdout and
                  "extra fields: timings" in p.stdout, p.stdout)
    p, lv, _ = run(binary, port, "error_event", tmp)
    check("error_event: its message is kept, bytes outside ASCII as '?'",
          lv["error_sample"] == "boom ? in the middle", str(lv["error_sample"]))
    check("error_event: the summary shows it", "first error event: boom" in p.stdout, p.stdout)
    check("error_event: the chunks before the error are counted", lv["failed_chunks"] == 2 * REQUESTS,
          str(lv["failed_chunks"]))
    print(f"{len(fails)} failed" if fails else "all passed")
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
