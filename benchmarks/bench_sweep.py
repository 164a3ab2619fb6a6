"""Speed of the batch sweep over the bundled catalog (medians over runs).

    python3 benchmarks/bench_sweep.py [--runs N] [--jobs J] [--gpu ID]

For each run, into a fresh output directory:

1. a full sweep of the default catalog: wall time and configs per second;
2. a no-change re-sweep into the same directory (everything reused);
3. a one-GPU change: the catalog copied with one GPU's bandwidth cut by 5 %,
   swept over a copy of the full output, so only that GPU's configs recompute;
   its time is reported as a share of the full sweep's.

Wall time is ``time.perf_counter``; other load on the machine shows up in it, so
the load average is printed alongside. CPU time (user and system, the main
process and its workers) is reported too: it barely moves with other load, and
divided by the number of workers it is about what the sweep takes on otherwise
idle cores. Each sweep runs in a fresh Python process, as ``backpressure sweep``
would, so its peak memory (``resource.getrusage`` maximum resident set size) is
its own: the main process (it gathers and writes the results) and the largest
worker. Forked workers share the main process's pages at the fork, so the two
overlap by that much; the total is therefore sampled as the proportional set
size (PSS) of the whole process tree, which counts a shared page once. Timing
lives here, never in the tests (the issue's targets: full sweep 60 s or less on
2 cores, re-sweep 3 s or less, one-GPU change at most 10 % of the full time, peak
memory 2 GB or less).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backpressure.catalog.loader import DEFAULT_ROOT  # noqa: E402
from backpressure.generator.sweep.run import default_jobs, run_sweep  # noqa: E402


def one_sweep(catalog: str, out: str, jobs: int) -> dict[str, Any]:
    """Run one sweep in this process; its wall time, what it did and peak memory [MB]."""
    start = time.perf_counter()
    stats = run_sweep(Path(catalog) if catalog else None, Path(out), jobs)
    seconds = time.perf_counter() - start
    me, workers = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return {
        "seconds": seconds,
        "total": stats.total,
        "computed": stats.computed,
        "cpu": me.ru_utime + me.ru_stime + workers.ru_utime + workers.ru_stime,
        "fitting": stats.fitting,
        "load": os.getloadavg()[0],
        "main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _tree_pss_mb(pid: int) -> float:
    """Proportional set size of a process and its descendants [MB] (Linux; 0 elsewhere).

    PSS splits each shared page between the processes that map it, so forked
    workers' pages shared with the main process are counted once: the sum is
    the memory the sweep really holds.
    """
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        total += next(
            (int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0
        )
    return total / 1024


def sweep(catalog: Path | None, out: Path, jobs: int) -> dict[str, Any]:
    """:func:`one_sweep` in a fresh process, sampling its total memory every second."""
    cmd = [sys.executable, __file__, "--one", str(catalog or ""), str(out), "--jobs", str(jobs)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, _tree_pss_mb(proc.pid))
            time.sleep(1.0)  # reading PSS walks the page tables: not too often
        stdout = proc.stdout.read() if proc.stdout else ""
    if proc.returncode:
        raise SystemExit(f"sweep failed: {' '.join(cmd)}")
    return {**json.loads(stdout.splitlines()[-1]), "total_mb": peak}


def edited_catalog(dest: Path, gpu: str) -> Path:
    """A copy of the bundled catalog with ``gpu``'s bandwidth cut by 5 %."""
    root = dest / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = root / "gpus" / f"{gpu}.yaml"
    text = path.read_text(encoding="utf-8")
    match = re.search(r"^bandwidth_bytes_per_s: ([\d_]+)$", text, flags=re.MULTILINE)
    if match is None:
        raise SystemExit(f"{path}: no bandwidth_bytes_per_s to edit")
    value = int(match.group(1).replace("_", ""))
    path.write_text(
        text.replace(match.group(0), f"bandwidth_bytes_per_s: {value * 95 // 100}"),
        encoding="utf-8",
    )
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--gpu", default="rtx-4090")
    parser.add_argument("--one", nargs=2, metavar=("CATALOG", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_sweep(args.one[0], args.one[1], args.jobs)))
        return
    steps: dict[str, list[dict[str, Any]]] = {"full": [], "resweep": [], "change": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        catalog = edited_catalog(work, args.gpu)
        for run in range(args.runs):
            out, changed = work / f"run{run}", work / f"changed{run}"
            steps["full"].append(sweep(None, out, args.jobs))
            steps["resweep"].append(sweep(None, out, args.jobs))
            shutil.copytree(out, changed)
            steps["change"].append(sweep(catalog, changed, args.jobs))
            f, r, c = (steps[k][-1] for k in ("full", "resweep", "change"))
            print(
                f"run {run + 1}: full {f['seconds']:.1f} s, {f['cpu']:.1f} s CPU "
                f"({f['total']:,} configs, {f['fitting']:,} fit; load {f['load']:.2f}), "
                f"re-sweep {r['seconds']:.2f} s ({r['computed']} computed), "
                f"one-GPU change {c['seconds']:.1f} s "
                f"({c['computed']:,} recomputed)",
                flush=True,
            )
            shutil.rmtree(changed)
            shutil.rmtree(out)

    def median(step: str, key: str) -> float:
        return statistics.median(s[key] for s in steps[step])

    full, total = median("full", "seconds"), steps["full"][0]["total"]
    cpu = median("full", "cpu")
    print(f"\njobs {args.jobs}, medians of {args.runs}:")
    print(
        f"  full sweep        {full:8.1f} s  {total / full:6.0f} configs/s "
        f"({steps['full'][0]['fitting'] / full:.0f} fitting configs/s)"
    )
    print(
        f"  full sweep CPU    {cpu:8.1f} s  ({cpu / args.jobs:.1f} s per worker: about the "
        f"wall time on {args.jobs} idle cores)"
    )
    print(f"  no-change resweep {median('resweep', 'seconds'):8.2f} s")
    print(
        f"  one-GPU change    {median('change', 'seconds'):8.1f} s  "
        f"{100 * median('change', 'seconds') / full:5.1f} % of the full sweep"
    )
    for step in ("full", "resweep", "change"):
        print(
            f"  peak memory, {step:8s} {max(s['total_mb'] for s in steps[step]):6.0f} MB in all "
            f"(PSS), {max(s['main_mb'] for s in steps[step]):6.0f} MB main process RSS, "
            f"{max(s['worker_mb'] for s in steps[step]):6.0f} MB largest worker RSS"
        )


if __name__ == "__main__":
    main()
