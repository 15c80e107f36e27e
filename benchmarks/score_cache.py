"""The per-pair score cache (radrank.score_cache): digest, store and lookup throughput, and size on disk.

Two kinds of namespace, filled with packs of ``--pack-rows`` entries (one group job's new pairs each):

* bertscore-like: three float64 columns (precision, recall, f1), at each of ``--entries`` (100k, 1M);
* judge-like: two float64 columns and a ~1 kB explanation per entry (templated text, as a judge writes it),
  at ``--judge-entries`` (its size per million entries is the measured size scaled, packs grow linearly).

Printed per namespace: store entries/s (reference in the same run: ``pyarrow.parquet.write_table`` of the
same tables to a scratch file, no fsync), lookup of ``--lookup`` digests (90 % present) in a fresh process
(cold: the digest columns read) and again (warm: the per-process memo), each against the naive way measured
in the same run (read every pack whole, concatenate, deduplicate, merge; no checks), the time the checksum
checks of a cold lookup take (every pack's bytes read and hashed), compaction of the packs into few, and MB on disk per
million entries. Also: pair_digests throughput over synthetic ReXrank-like pairs.

Usage: python benchmarks/score_cache.py [--entries 100000 1000000] [--judge-entries 200000]
                                        [--pack-rows 100000] [--lookup 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from synthetic import JUDGE_ANALYSIS, pairs_table  # noqa: E402

from radrank import score_cache as sc  # noqa: E402

SEED = 0


def distinct_pairs(n: int) -> pd.DataFrame:
    """``n`` distinct (reference, hypothesis) pairs of ReXrank-like reports."""
    base = pairs_table(min(n, 20_000), n_models=4, seed=SEED)
    repeat = np.arange(n) % len(base)
    return pd.DataFrame({"reference": base.reference.to_numpy()[repeat],
                         "hypothesis": [f"{h} (case {i})" for i, h in enumerate(base.hypothesis.to_numpy()[repeat])]})


def scores(digests: np.ndarray, pairs: pd.DataFrame, kind: str, rng) -> pd.DataFrame:
    """Synthetic scores of ``pairs``; a judge's explanation quotes the pair's reports, as a judge's does."""
    n = len(digests)
    if kind == "bertscore":
        return pd.DataFrame({"digest": digests, "precision": rng.random(n), "recall": rng.random(n),
                             "f1": rng.random(n)})
    counts = rng.integers(0, 5, size=(n, 3))
    texts = [(JUDGE_ANALYSIS.format(verb="matches" if a == 0 else "misses", a=a, b=b, m=m, findings=hyp) + " " + ref
              + " " + hyp)[:1000] for (a, b, m), ref, hyp in zip(counts, pairs.reference, pairs.hypothesis)]
    return pd.DataFrame({"digest": digests, "green": rng.random(n), "matched": counts[:, 2].astype("float64"),
                         "explanation": pd.Series(texts, dtype=object)})


def naive_lookup(folder: Path, wanted) -> pd.DataFrame:
    """The reference: read every pack whole, keep one row per digest, merge with the query."""
    packs = [pd.read_parquet(p) for p in sorted(folder.glob("pack-*.parquet"))]
    every = pd.concat(packs, ignore_index=True).drop_duplicates("digest")
    return pd.DataFrame({"digest": pd.unique(np.asarray(wanted, dtype=object))}).merge(every, on="digest")


def check_pack(path: Path, secret: bytes) -> None:
    sc._read_checked(path, secret)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def bench(kind: str, entries: int, args, pairs: pd.DataFrame, pairs_digests: np.ndarray, root: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    ns = sc.ScoreCache(root).namespace({"metric": f"{kind}-like", "entries": entries})
    digests = pairs_digests[:entries]
    chunks = [scores(digests[i:i + args.pack_rows], pairs.iloc[i:i + args.pack_rows], kind, rng)
              for i in range(0, entries, args.pack_rows)]
    store_s = sum(timed(lambda c=c: ns.store(c, {"model": kind}))[0] for c in chunks)
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        write_s = sum(timed(lambda c=c: pq.write_table(pa.Table.from_pandas(c, preserve_index=False),
                                                        Path(scratch) / "t.parquet", compression="zstd"))[0]
                      for c in chunks)
    on_disk = sum(p.stat().st_size for p in ns.dir.glob("pack-*.parquet"))
    text = sum(c.explanation.str.len().sum() for c in chunks) / entries if kind == "judge" else 0
    present = rng.choice(digests, size=min(args.lookup, entries), replace=False)
    wanted = np.concatenate([present[: int(len(present) * 0.9)], pairs_digests[-int(len(present) * 0.1):]])
    sc._INDEXES.clear()
    sc._PACKS.clear()
    cold_s, found = timed(lambda: ns.lookup(wanted))
    warm_s, _ = timed(lambda: ns.lookup(wanted))
    naive_s, expected = timed(lambda: naive_lookup(ns.dir, wanted))
    pd.testing.assert_frame_equal(found, expected, check_exact=True, check_dtype=False)
    compact_s, _ = timed(lambda: sc.prune(root, compact_min_packs=2))
    packs_after = len(ns.packs())
    check_s = sum(timed(lambda p=p: check_pack(p, ns.secret))[0] for p in ns.dir.glob("pack-*.parquet"))
    sc._INDEXES.clear()
    sc._PACKS.clear()
    compacted_s, _ = timed(lambda: ns.lookup(wanted))
    print(f"{kind}-like, {entries:,d} entries in {len(chunks)} packs of {args.pack_rows:,d}:")
    print(f"  store   {entries / store_s:12,.0f} entries/s  ({store_s:.2f} s; plain parquet write "
          f"{write_s:.2f} s, x{store_s / write_s:.2f})")
    print(f"  lookup  {len(wanted):,d} digests ({len(found):,d} found): cold {cold_s:.2f} s "
          f"({len(wanted) / cold_s:,.0f}/s), warm {warm_s:.2f} s; naive read-all-and-merge {naive_s:.2f} s "
          f"(x{naive_s / cold_s:.1f} the cold lookup)")
    print(f"  checks  hashing every pack's bytes (part of the cold lookup) {check_s:.2f} s = "
          f"{on_disk / check_s / 1e6:,.0f} MB/s")
    print(f"  compact {len(chunks)} packs -> {packs_after} in {compact_s:.2f} s; cold lookup after it "
          f"{compacted_s:.2f} s")
    print(f"  on disk {on_disk / 1e6:.1f} MB = {on_disk / entries:.1f} B/entry = "
          f"{on_disk / entries:.0f} MB per million entries"
          + (f" (explanations {text:.0f} characters each; real ones compress less than synthetic)" if text else ""))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--judge-entries", type=int, default=200_000)
    p.add_argument("--pack-rows", type=int, default=100_000)
    p.add_argument("--lookup", type=int, default=100_000)
    p.add_argument("--dir", help="where the cache is built (default: a temporary folder; use the shared file "
                                 "system to measure it)")
    args = p.parse_args()
    most = max(*args.entries, args.judge_entries) + args.lookup
    pairs = distinct_pairs(most)
    digest_s, digests = timed(lambda: sc.pair_digests(pairs, ("reference", "hypothesis")))
    chars = (pairs.reference.str.len() + pairs.hypothesis.str.len()).mean()
    assert len(set(digests)) == len(digests)
    print(f"pair_digests: {len(pairs):,d} pairs (mean {chars:.0f} characters) in {digest_s:.2f} s = "
          f"{len(pairs) / digest_s:,.0f} pairs/s")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for entries in args.entries:
            bench("bertscore", entries, args, pairs, digests, Path(tmp) / f"bertscore-{entries}")
        bench("judge", args.judge_entries, args, pairs, digests, Path(tmp) / "judge")


if __name__ == "__main__":
    main()
