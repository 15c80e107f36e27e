import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
groups = [tuple(g) for g in sm.params.groups]
jobs.run_rule(sm, jobs.report, leaderboards=dict(zip(groups, sm.input.leaderboards)),
              comparisons=dict(zip(groups, sm.input.comparisons)), config=sm.params.config,
              metaeval={Path(p).parent.name: p for p in sm.input.metaeval},  # set name -> agreement.csv
              out_markdown=sm.output.markdown, out_html=sm.output.html)
