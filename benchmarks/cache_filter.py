"""The score cache's digest filters: a cold lookup (a fresh process, as a scoring job's) with the packs' filters
against the same lookup with none (what the previous revision did: every pack read, checked and its digests
decoded), measured in one run, taking turns.

A namespace of ``--packs`` packs of ``--pack-rows`` entries (e.g. 2 × 1,000,000: the two splits of a 100-model,
10,000-case leaderboard). Lookups of ``--lookup`` digests (a new model's pairs) of three kinds:
* none stored (a new model whose pairs nobody wrote);
* 1 % stored, all in the first pack (a few template reports that others wrote on the same split);
* 1 % stored, spread over every pack (every filter admits the lookup: the filters' own cost, nothing saved).
Printed per kind: packs read, median CPU-s with and without filters, and the ratio. Without filters is simulated
in the same code by removing the filter files and not writing them (``_write_filter`` a no-op), so only the
filters differ.

    python benchmarks/cache_filter.py [--packs 2] [--pack-rows 1000000] [--lookup 10000] [--repeats 3]
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
import json, sys, time
from pathlib import Path
from radrank import io, score_cache as sc
io.use_job_memory_pool()
root, filters, kind, n, packs, rows = sys.argv[1], sys.argv[2] == "on", sys.argv[3], *map(int, sys.argv[4:7])
ns = namespace(root)
if not filters:
    for f in ns.dir.glob("*" + sc.FILTER_SUFFIX):
        f.unlink()
    sc._write_filter = lambda pack, digests: None
hits = n // 100 if kind != "none" else 0
where = [0] * hits if kind == "one_pack" else [k % packs for k in range(hits)]
stored = [synthetic_digest(p * rows + k * 97) for k, p in enumerate(where)]
wanted = [synthetic_digest(i) for i in range(10**12, 10**12 + n - len(stored))] + stored
read = []
original = sc._read_checked
sc._read_checked = lambda path, secret: read.append(path) or original(path, secret)
start = time.process_time()
found = ns.lookup(wanted)
cpu = time.process_time() - start
assert len(found) == len(set(stored)), (len(found), len(stored))
print(json.dumps({"cpu": cpu, "read": len(read)}))
"""



def main() -> None:
    args = parse_arguments(__doc__, repeats=3)
    env = subprocess_env()
    print(f"namespace: {args.packs} packs × {args.pack_rows:,d} entries; cold lookups of {args.lookup:,d} digests")
    for kind in ("none", "one_pack", "every_pack"):
        got = {"on": [], "off": []}
        for rep in range(args.repeats):
            for filters in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                with tempfile.TemporaryDirectory() as tmp:  # a fresh namespace each time: no filter left behind
                    fill(Path(tmp), args.packs, args.pack_rows)
                    out = subprocess.run([sys.executable, "-c", LOOKUP, tmp, filters, kind, str(args.lookup),
                                          str(args.packs), str(args.pack_rows)], env=env, capture_output=True,
                                         text=True, check=True)
                    got[filters].append(json.loads(out.stdout))
        on, off = (statistics.median(r["cpu"] for r in got[k]) for k in ("on", "off"))
        print(f"{kind:10s}: packs read {got['on'][0]['read']} of {args.packs} with filters, {got['off'][0]['read']} "
              f"without; CPU {on:.3f} s with, {off:.3f} s without: {off / on:.1f}× less")


if __name__ == "__main__":
    main()
