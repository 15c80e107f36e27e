"""Reading a group's per-sample score files, as a statistics job and a report page do after every new submission:
the files of ``--models`` models × the lexical panel (bleu2, bleu4, rouge: the columns their jobs write) of
``--cases`` cases, written by ``radrank.io.write_parquet`` with each codec, then read back ``--repeats`` times the way
the jobs read them (``radrank.io.read_table``, the case ids decoded once: ``radrank.io.SharedColumn``). Printed per
codec: the mean file size, the CPU per file read (best of the repeats) and written, and the ratios against zstd (the
codec of every other parquet output; ``radrank.io.SCORE_COMPRESSION`` is the score files').

    python benchmarks/score_files.py [--models 100] [--cases 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CODECS = ("zstd", "lz4", "snappy")


def frames(models: int, cases: int):
    """(model, metric, frame) of a synthetic group: each metric's columns as its job writes them."""
    import numpy as np
    import pandas as pd

    from radrank import metrics

    rng = np.random.default_rng(0)
    ids = [f"s{i:06d}" for i in range(cases)]
    for m in range(models):
        for name in ("bleu2", "bleu4", "rouge"):
            columns = {}
            for column in metrics.get(name).columns:
                # counts where the metric keeps counts (BLEU's n-gram statistics), scores in [0, 1] elsewhere
                counts = any(k in column for k in ("_correct_", "_guess_", "len"))
                values = rng.integers(0, 40, cases).astype("float64") if counts else rng.random(cases)
                columns[column] = values
            yield f"m{m:03d}", name, pd.DataFrame({"sample_id": ids, **columns})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, default=100)
    p.add_argument("--cases", type=int, default=10000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    from radrank import io

    group = list(frames(args.models, args.cases))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for codec in CODECS:
            paths = []
            start = time.process_time()
            for model, name, frame in group:
                path = Path(tmp) / codec / name / f"{model}.parquet"
                io.write_parquet(frame, path, {"metric": name}, compression=codec)
                paths.append(path)
            write = (time.process_time() - start) / len(paths)
            best = float("inf")
            for _ in range(args.repeats):
                shared = io.SharedColumn("sample_id")
                start = time.process_time()
                for path in paths:
                    io.read_table(path, shared=shared)
                best = min(best, time.process_time() - start)
            size = sum(path.stat().st_size for path in paths) / len(paths)
            results[codec] = (size, best / len(paths), write)
    print(f"{args.models} models x bleu2, bleu4, rouge x {args.cases} cases ({len(group)} files); "
          f"the score files' codec: {io.SCORE_COMPRESSION}")
    base = results["zstd"]
    for codec, (size, read, write) in results.items():
        print(f"  {codec:7s} {size / 1e3:7.1f} kB a file  read {read * 1e3:6.3f} ms  write {write * 1e3:6.3f} ms"
              f"   vs zstd: size x{size / base[0]:.2f}, read x{read / base[1]:.2f}, write x{write / base[2]:.2f}")


if __name__ == "__main__":
    main()
