"""Shards: contiguous slices of a table, so one set of pairs spreads over several jobs."""

from __future__ import annotations


def shard_slice(n: int, index: int, count: int) -> slice:
    """Rows of shard ``index`` of ``count`` over ``n`` rows: contiguous, sizes differ by at most one."""
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count} does not exist")
    return slice(index * n // count, (index + 1) * n // count)
