"""pyarrow's allocator in a scoring job: a cold score-cache lookup in a fresh process with pyarrow's default pool
(mimalloc) against jemalloc, the pool every radrank job now uses (radrank.io.use_job_memory_pool).

A namespace of ``--packs`` packs of ``--pack-rows`` entries each (one full group job's pairs per pack, e.g. 100
models × 10,000 cases) is stored once, with the digests and three float64 columns of a lexical metric. Then,
``--repeats`` times in alternating order, a fresh interpreter per pool looks up ``--lookup`` digests, 1 % of them
stored in each pack (a new model's pairs, a few of which others wrote too: every pack's digest filter admits them,
so every pack is read, checked and its digests decoded). Printed per pool:
the median user and system CPU-s of the lookup (getrusage around it, after the imports), its minor page faults, and
the ratio of the medians (default / jemalloc). The system time is the kernel clearing and, where it must, compacting
the transparent huge pages mimalloc asks for; how much depends on the kernel's setting
(/sys/kernel/mm/transparent_hugepage, printed) and on the host's free memory, so the spread is printed too.

    python benchmarks/arrow_pool.py [--packs 2] [--pack-rows 1000000] [--lookup 10000] [--repeats 5]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _packs import fill, parse_arguments, subprocess_env  # noqa: E402


LOOKUP = """
from _packs import namespace, synthetic_digest
import json, resource, sys
import numpy as np
from radrank import io, score_cache as sc
if sys.argv[2] == "jemalloc":
    io.use_job_memory_pool()
import pyarrow as pa
ns = namespace(sys.argv[1])
n, packs, rows = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
stored = [synthetic_digest(p * rows + k * (rows // 100)) for p in range(packs) for k in range(n // 100 // packs)]
wanted = [synthetic_digest(i) for i in range(10**12, 10**12 + n - len(stored))] + stored
before = resource.getrusage(resource.RUSAGE_SELF)
found = ns.lookup(wanted)
after = resource.getrusage(resource.RUSAGE_SELF)
assert len(found) == len(stored), (len(found), len(stored))
print(json.dumps({"pool": pa.default_memory_pool().backend_name, "user": after.ru_utime - before.ru_utime,
                  "sys": after.ru_stime - before.ru_stime, "faults": after.ru_minflt - before.ru_minflt}))
"""



def thp() -> str:
    out = []
    for name in ("enabled", "defrag"):
        try:
            out.append(f"{name}: {Path('/sys/kernel/mm/transparent_hugepage', name).read_text().strip()}")
        except OSError:
            out.append(f"{name}: (not readable)")
    return "; ".join(out)


def main() -> None:
    args = parse_arguments(__doc__, repeats=5)
    env = subprocess_env(ARROW_DEFAULT_MEMORY_POOL=None)  # pyarrow's own default where a lookup does not switch
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fill(root, args.packs, args.pack_rows)
        print(f"namespace: {args.packs} packs × {args.pack_rows:,d} entries; lookup of {args.lookup:,d} digests, "
              "1 % of them stored")
        print(f"transparent huge pages: {thp()}")
        runs = {"default": [], "jemalloc": []}
        for rep in range(args.repeats):
            for pool in (("default", "jemalloc") if rep % 2 == 0 else ("jemalloc", "default")):
                out = subprocess.run([sys.executable, "-c", LOOKUP, str(root), pool, str(args.lookup), str(args.packs),
                                      str(args.pack_rows)], env=env, capture_output=True, text=True, check=True)
                runs[pool].append(json.loads(out.stdout))
    medians = {}
    for pool, got in runs.items():
        user = [r["user"] for r in got]
        system = [r["sys"] for r in got]
        medians[pool] = statistics.median(u + s for u, s in zip(user, system))
        print(f"{pool:9s} ({got[0]['pool']}): user {statistics.median(user):.2f} s, system "
              f"{statistics.median(system):.2f} s (range {min(system):.2f}–{max(system):.2f}), "
              f"minor faults {statistics.median(r['faults'] for r in got):,.0f}; CPU median {medians[pool]:.2f} s")
    print(f"ratio of the lookup's CPU, default / jemalloc: {medians['default'] / medians['jemalloc']:.2f}×")


if __name__ == "__main__":
    main()
