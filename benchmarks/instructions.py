#!/usr/bin/env python3
"""The instruction-count guard of the hot paths.

Runs the instruction benches (`statemachine/benches/instructions.rs`,
`api/benches/instructions.rs`) under Valgrind's callgrind through gungraun, and compares each
count with `benchmarks/instructions.json`: a count more than 5 % over its baseline fails the run
(exit 1), as does a bench without a baseline or a baseline without a bench.

    python3 benchmarks/instructions.py             # the guard, as .ci/run runs it
    python3 benchmarks/instructions.py --update    # writes the counts measured as the baseline
    python3 benchmarks/instructions.py --runs 5    # five runs instead of three

A change that makes a hot path dearer on purpose updates the baseline in the same commit, and
BENCHMARKS.md says why. It needs `valgrind` and `gungraun-runner` (the version of the `gungraun`
crate, `cargo install gungraun-runner --version 0.20.0`) on the PATH.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "benchmarks", "instructions.json")
# The crates with an `instructions` bench, in the order they run.
PACKAGES = ["sluice-statemachine", "sluice-api"]
GROWTH_MAX = 0.05


def bench_name(package, summary):
    """`package::group::function::id`, stable across runs."""
    name = f"{package}::{summary['group']}::{summary['function_name']}"
    ident = summary.get("id")
    return f"{name}::{ident}" if ident else name


def instructions(name, summary):
    """The instructions (callgrind's `Ir`) of the counted part, summed over threads."""
    for profile in summary["profiles"]:
        if profile["tool"].lower() == "callgrind":
            ir = profile["data"]["total"]["metrics"].get("Ir")
            if ir is not None:
                return int(ir["values"]["new"])
    raise SystemExit(f"no instruction count in the summary of {name}")


def run_once():
    counts = {}
    for package in PACKAGES:
        cmd = [
            "cargo",
            "bench",
            "--quiet",
            "-p",
            package,
            "--bench",
            "instructions",
            "--",
            "--output-format=json",
        ]
        out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, check=False)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {out.returncode})")
        for line in out.stdout.decode().splitlines():
            line = line.strip()
            if line.startswith("{"):
                summary = json.loads(line)
                name = bench_name(package.removeprefix("sluice-"), summary)
                counts[name] = instructions(name, summary)
    if not counts:
        raise SystemExit("the benches reported no counts")
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--update", action="store_true", help="write the counts as the baseline")
    p.add_argument("--runs", type=int, default=3, help="runs; the least count of each bench is its count")
    args = p.parse_args()

    runs = [run_once() for _ in range(max(1, args.runs))]
    # A count can only gain from the node's timers firing while it is taken (work that is not
    # the request's), never lose: each bench's least count of the runs is its count.
    counts = {name: min(r[name] for r in runs if name in r) for name in runs[0]}
    if len(runs) > 1:
        print(f"spread over {len(runs)} runs:")
        for name in sorted(counts):
            values = [r.get(name, 0) for r in runs]
            lo, hi = min(values), max(values)
            print(f"  {name}: {', '.join(f'{v:,}' for v in values)} ({(hi - lo) / lo * 100:.2f} %)")

    if args.update:
        with open(BASELINE, "w") as f:
            json.dump(dict(sorted(counts.items())), f, indent=2)
            f.write("\n")
        print(f"wrote {len(counts)} counts to {os.path.relpath(BASELINE, ROOT)}")
        return 0

    with open(BASELINE) as f:
        baseline = json.load(f)
    failed = []
    print(f"{'bench':<60} {'baseline':>14} {'now':>14} {'change':>8}")
    for name in sorted(set(counts) | set(baseline)):
        base, now = baseline.get(name), counts.get(name)
        if base is None or now is None:
            failed.append(name)
            print(f"{name:<60} {base or '-':>14} {now or '-':>14}   (missing)")
            continue
        change = (now - base) / base
        mark = ""
        if change > GROWTH_MAX:
            failed.append(name)
            mark = "  GREW"
        elif change < -GROWTH_MAX:
            mark = "  (fell: update the baseline to keep the gain)"
        print(f"{name:<60} {base:>14,} {now:>14,} {change * 100:>+7.2f}%{mark}")
    if failed:
        print(
            f"\n{len(failed)} count(s) grew more than {GROWTH_MAX * 100:.0f} % over "
            f"{os.path.relpath(BASELINE, ROOT)}, or have no baseline or bench: "
            + ", ".join(failed)
            + ".\nIf the cost is meant, run with --update and say why in BENCHMARKS.md.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
