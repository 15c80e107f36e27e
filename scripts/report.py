import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
from radrank import jobs  # noqa: E402

sm = snakemake  # noqa: F821
jobs.run_rule(sm, jobs.report, layout=sm.params.layout, bootstrap=sm.params.bootstrap,
              empty_hypothesis=sm.params.empty_hypothesis, cases=sm.params.cases, out_markdown=sm.output.markdown,
              out_html=sm.output.html, out_figures=sm.output.figures, config_hash=sm.params.config_hash,
              metaeval_paths={Path(p).parent.name: p for p in sm.params.metaeval})  # set -> agreement.csv
