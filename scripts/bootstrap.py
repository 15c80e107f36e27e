import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
boot = sm.params.bootstrap
jobs.run_rule(sm, jobs.bootstrap, dataset=sm.wildcards.dataset, split=sm.wildcards.split,
              score_paths=sm.params.score_paths, pairs_paths=sm.params.pairs, drops_paths=sm.params.drops,
              metric_names=sm.params.metrics, n_boot=boot["n"], seed=boot["seed"], level=boot["level"],
              out_replicates=sm.output.replicates, out_summary=sm.output.summary,
              out_comparisons=sm.output.comparisons, out_comparisons_csv=sm.output.comparisons_csv,
              out_model_files=sm.output.model_files)
