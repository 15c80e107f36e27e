"""Bootstrap statistics from per-sample scores; no metric is re-run."""

from radrank.stats.bootstrap import (
    BootstrapResult,
    bootstrap,
    resample_counts,
    resample_indices,
)

__all__ = ["BootstrapResult", "bootstrap", "resample_counts", "resample_indices"]
