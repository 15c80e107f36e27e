#!/usr/bin/env python3
"""Ingest and section parsing of very long reports: time per size, and the growth per doubling.

A linear parser takes ~4x the time when the text grows 4x; a regular expression that backtracks
would take 16x or more. Prints, for 200k / 800k / 3.2M-character texts, the best of ``--repeat`` runs
of (a) ``radrank.sections.parse_section`` on one line with thousands of section headers and (b)
``ingest_submission`` of a JSON submission whose report and prediction have that length, then the
ratios between consecutive sizes (the tests check the results at 200k characters, not the time).

    python benchmarks/ingest.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from radrank.ingest import ingest_submission  # noqa: E402
from radrank.sections import parse_section  # noqa: E402

SIZES = (200_000, 800_000, 3_200_000)  # the tests check results at 200k; larger sizes make growth visible


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            headers = ("Findings: clear lungs. " * (size // 23 + 1))[:size] + " Impression: normal."
            parse_s = best(lambda: (parse_section(headers, "findings"), parse_section(headers, "impression")),
                           args.repeat)
            text = ("The lungs are clear. No pleural effusion. " * (size // 42 + 1))[:size]
            path = Path(tmp) / f"sub{size}.json"
            path.write_text(json.dumps({"big": {"model_prediction": text, "section_findings": text}}))
            ingest_s = best(lambda: ingest_submission(path, "findings", max_chars=None, empty_hypothesis="score"),
                            args.repeat)
            rows.append((size, parse_s, ingest_s))
            print(f"{size:>9,} characters: section parser {parse_s * 1000:9.2f} ms, ingest {ingest_s * 1000:9.2f} ms")
    for (a, pa, ia), (b, pb, ib) in zip(rows, rows[1:]):
        print(f"{a:,} -> {b:,} characters: parser x{pb / pa:.2f}, ingest x{ib / ia:.2f} (linear: x{b / a:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
