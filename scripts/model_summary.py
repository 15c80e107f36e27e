import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
jobs.run_rule(sm, jobs.model_summary, model=sm.wildcards.model, replicates_path=sm.input.replicates,
              summary_path=sm.input.summary, pairs_path=sm.input.pairs, drops_path=sm.input.drops,
              out_results=sm.output.results, out_summary=sm.output.summary,
              out_generations=sm.output.generations, out_drops=sm.output.drops)
