#!/usr/bin/env python3
"""Runs `cargo bench --bench vs_tokio` several times and prints, per benchmark and flavour,
the median time of weir and tokio and the ratio tokio/weir (> 1: weir faster) as the median
over runs with the min-max spread.

    python3 bench/benches/vs_tokio_ratios.py [RUNS]      (default 3)
"""
import re
import statistics
import subprocess
import sys

UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse(text):
    """-> {(group, contender, arg): median_seconds}"""
    out = {}
    path = []
    for line in text.splitlines():
        m = re.match(r"^([│ ]*)[├╰]─ (.+?)\s{2,}(.*)$", line) or re.match(r"^([│ ]*)[├╰]─ (.+?)\s*│", line)
        if not m:
            continue
        depth = len(m.group(1)) // 3
        name = m.group(2).strip()
        path = path[:depth] + [name]
        # After the name: fastest │ slowest │ median │ mean │ samples │ iters
        cells = [c.strip() for c in line[m.end(2):].split("│")]
        if len(cells) >= 4 and cells[2]:
            mm = re.match(r"([\d.]+)\s*(ns|µs|us|ms|s)$", cells[2])
            if mm:
                out[tuple(path)] = float(mm.group(1)) * UNITS[mm.group(2)]
    return out


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    results = []
    for i in range(runs):
        print(f"run {i + 1}/{runs} ...", file=sys.stderr, flush=True)
        p = subprocess.run(
            ["cargo", "bench", "-q", "-p", "weir-bench", "--bench", "vs_tokio"],
            check=True, capture_output=True, text=True,
        )
        results.append(parse(p.stdout))
    keys = sorted({k for r in results for k in r})
    print(f"| benchmark | flavour | weir median | tokio median | tokio/weir median [min-max] over {runs} runs |")
    print("|---|---|---|---|---|")
    seen = set()
    for k in keys:
        if len(k) != 3 or not k[1].startswith("weir"):
            continue
        group, _, arg = k
        tk = (group, k[1].replace("weir", "tokio"), arg)
        if any(tk not in r or k not in r for r in results) or (group, arg) in seen:
            continue
        seen.add((group, arg))
        w = [r[k] for r in results]
        t = [r[tk] for r in results]
        ratios = sorted(tt / ww for tt, ww in zip(t, w))
        flavour = "2 workers" if arg == "true" else "current-thread"
        print(
            f"| {group} | {flavour} | {statistics.median(w) * 1e6:.0f} µs | "
            f"{statistics.median(t) * 1e6:.0f} µs | {statistics.median(ratios):.2f} "
            f"[{ratios[0]:.2f}-{ratios[-1]:.2f}] |"
        )
    extra = [k for k in keys if k[0] == "tracing_overhead"]
    if extra:
        print()
        print("| tracing_overhead (weir current-thread spawn_join) | median [min-max] |")
        print("|---|---|")
        for k in extra:
            v = sorted(r[k] for r in results if k in r)
            print(f"| {k[-1]} | {statistics.median(v) * 1e6:.0f} µs [{v[0] * 1e6:.0f}-{v[-1] * 1e6:.0f}] |")


if __name__ == "__main__":
    main()
