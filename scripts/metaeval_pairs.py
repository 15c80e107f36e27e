import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
jobs.run_rule(sm, jobs.metaeval_pairs, **sm.params.job, out_pairs=sm.output.pairs, out_items=sm.output.item_table)
