"""What the interpreter's teardown costs at the end of a process, and what radrank.snakemake_exit.end saves.

For each kind of process the workflow runs — Snakemake's own (its command line, its executor plugins, which import
pandas) and a metric family's rule script (torch, transformers, pandas: ``--env``'s interpreter, where that
environment is built) — a process imports the same modules and then ends either as usual (``sys.exit(0)``: the
interpreter frees every module and object) or through :func:`radrank.snakemake_exit.end`. The two ways take turns
(``--repeat`` each, so that a busy machine slows both alike). Printed: the median wall and CPU (getrusage of the
waited-for child) of each, and their ratio.

    python benchmarks/teardown.py [--repeat 5] [--env rexrank]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = {
    "Snakemake's process": ("core", "import snakemake.cli, snakemake.api, snakemake.workflow, "
                                    "snakemake_executor_plugin_slurm"),
    "a rule script (torch, transformers, pandas)": (None, "import torch, transformers, pandas"),
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(python: str, imports: str, quick: bool) -> tuple[float, float]:
    ending = "from radrank import snakemake_exit; snakemake_exit.end(0)" if quick else "import sys; sys.exit(0)"
    code = f"import sys; sys.path.insert(0, {str(REPO / 'src')!r}); {imports}; {ending}"
    before, start = children_cpu(), time.perf_counter()
    subprocess.run([python, "-c", code], check=True)
    return time.perf_counter() - start, children_cpu() - before


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--env", default="rexrank", help="the environment whose interpreter runs the rule script")
    args = p.parse_args()
    envs = Path(os.environ.get("RADRANK_ENVS_DIR", REPO / ".venvs"))
    for label, (env, imports) in KINDS.items():
        python = str(envs / (env or args.env) / "bin/python")
        if not os.path.exists(python):
            print(f"{label}: skipped, no {python}")
            continue
        runs = {False: [], True: []}
        once(python, imports, False)  # bytecode written, files in the page cache
        for _ in range(args.repeat):
            for quick in (False, True):
                runs[quick].append(once(python, imports, quick))
        med = {q: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for q, r in runs.items()}
        print(f"{label} ({python}), {args.repeat} runs each, medians:")
        print(f"  usual exit:          {med[False][0]:6.2f} s wall {med[False][1]:6.2f} s CPU")
        print(f"  snakemake_exit.end:  {med[True][0]:6.2f} s wall {med[True][1]:6.2f} s CPU")
        print(f"  ratio: wall x{med[True][0] / med[False][0]:.2f}, CPU x{med[True][1] / med[False][1]:.2f} "
              f"({med[False][1] - med[True][1]:.2f} CPU-s less per process)", flush=True)


if __name__ == "__main__":
    main()
