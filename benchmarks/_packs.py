"""A score-cache namespace of synthetic packs, for the cache benchmarks (arrow_pool.py, cache_filter.py): the packs
a full group job stores (one per split), of uniform digests and three float columns, like a lexical metric's."""

from __future__ import annotations

import hashlib
from pathlib import Path

KEY = {"metric": "bench"}
COLUMNS = ("a", "b", "c")


def synthetic_digest(i: int) -> str:
    """A synthetic pair digest: 32 hex characters, uniform like sha256's (the digest filters key on the first 16)."""
    return hashlib.sha256(b"%d" % i).hexdigest()[:32]


def namespace(root):
    from radrank import score_cache as sc

    return sc.Namespace(root, KEY, columns=COLUMNS)


def fill(root: Path, packs: int, rows: int) -> None:
    """``packs`` packs of ``rows`` entries each; pack p holds the digests of p * rows … (p + 1) * rows - 1."""
    import numpy as np
    import pandas as pd

    ns = namespace(root)
    rng = np.random.default_rng(0)
    for p in range(packs):
        digests = [synthetic_digest(i) for i in range(p * rows, (p + 1) * rows)]
        ns.store(pd.DataFrame({"digest": digests, **{c: rng.random(rows) for c in COLUMNS}}), {"models": None})


def parse_arguments(doc: str, repeats: int):
    """The cache benchmarks' options: the namespace (--packs, --pack-rows), the lookup's size and the repeats."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--packs", type=int, default=2)
    ap.add_argument("--pack-rows", type=int, default=1_000_000)
    ap.add_argument("--lookup", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=repeats)
    return ap.parse_args()


def subprocess_env(**changes) -> dict:
    """This environment with radrank's sources and this folder importable (the lookups run in fresh processes)."""
    import os

    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k not in changes}
    env.update({k: v for k, v in changes.items() if v is not None})
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent / "src"), str(here)])
    return env
