import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
ranking = sm.params.ranking
jobs.run_rule(sm, jobs.leaderboard, dataset=sm.wildcards.dataset, split=sm.wildcards.split,
              summary_path=sm.input.summary, replicates_path=sm.input.replicates,
              comparisons_path=sm.input.comparisons, drops_paths=sm.params.drops, models_sheet=sm.params.models_sheet,
              rank_by=ranking["rank_by"], fallback_rank_by=ranking["fallback_rank_by"],
              decimals=ranking["decimals"], level=sm.params.level, out=sm.output.board, out_ranks=sm.output.ranks)
