"""Record where this job ran: radrank's provenance record of its environment, plus the
interpreter and transformers version as Python itself reports them."""

import json
import sys

sys.path.insert(0, snakemake.params.repo + "/src")  # noqa: F821 (snakemake object)
from radrank import provenance  # noqa: E402

import transformers  # noqa: E402

record = provenance.environment(("transformers", "huggingface-hub", "torch"))
record["sys_executable"] = sys.executable
record["transformers_imported"] = transformers.__version__
with open(snakemake.output[0], "w") as fh:  # noqa: F821
    json.dump(record, fh, indent=1, sort_keys=True)
