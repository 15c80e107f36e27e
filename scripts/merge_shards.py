import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
jobs.run_rule(sm, jobs.merge_shards, pairs_path=sm.input.pairs, shard_paths=list(sm.input.shards), out=sm.output[0])
