"""The garbage collector's thresholds in Snakemake's own process (radrank.garbage_collector): the Snakefile sets
them as it is read, so the DAG and the run's bookkeeping are walked less often. (The workers': tests/test_workers.py.)
"""

from __future__ import annotations

import subprocess
import sys

from _workflow import make_workdir

from radrank import garbage_collector

# Snakemake's command line in this interpreter, printing the collector's thresholds as the process exits
SNAKEMAKE_THEN_THRESHOLDS = (
    "import atexit, gc, runpy, sys\n"
    "atexit.register(lambda: print('thresholds', gc.get_threshold()))\n"
    "sys.argv = ['snakemake', *sys.argv[1:]]\n"
    "runpy.run_module('snakemake', run_name='__main__')\n"
)


def test_snakemakes_process_has_the_thresholds_once_the_snakefile_is_read(tmp_path):
    work = make_workdir(tmp_path / "work")
    proc = subprocess.run([sys.executable, "-c", SNAKEMAKE_THEN_THRESHOLDS, "--cores", "1", "--dry-run"], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"thresholds {garbage_collector.THRESHOLDS}" in proc.stdout
    assert garbage_collector.THRESHOLDS != (700, 10, 10)  # CPython's own: the line above tells them apart
