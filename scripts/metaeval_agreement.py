import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
jobs.run_rule(sm, jobs.metaeval_agreement, set_name=sm.wildcards.metaeval_set, items_path=sm.input.item_table,
              score_paths=list(sm.input.scores), **sm.params.job, out_scores=sm.output.scores,
              out_agreement=sm.output.agreement, out_comparisons=sm.output.comparisons)
