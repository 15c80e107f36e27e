import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

jobs.run_rule(snakemake, jobs.ingest, **snakemake.params.job,  # noqa: F821
              out_pairs=snakemake.output.pairs, out_drops=snakemake.output.drops)  # noqa: F821
