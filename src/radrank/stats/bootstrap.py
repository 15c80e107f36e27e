"""Exact paired bootstrap over case ids.

For one dataset × split, the cases are the sorted union of the sample ids of
every model. One seeded matrix of resample indices (``n_boot`` × ``n_cases``,
numpy's PCG64 with the configured seed) is drawn once and shared by every model
and metric, so all models are resampled on the same cases (a paired bootstrap).
A resample is held as counts per case (how often each case was drawn), and each
leaf is its value at the count-weighted totals of its per-sample sufficient
statistics (:mod:`radrank.metrics.base`) — the same number the metric would give
on the resampled pairs, without re-running it.

Missing cases: a case a model has no pair for (dropped, or absent from its
submission) contributes nothing to that model's totals, so the model's value on
a resample is its value on the drawn cases it has. A comparison between two
models uses only the cases both have (each model's totals restricted to them),
so the difference is paired case by case. ``n`` and ``n_common`` report how many
cases each number rests on.

Comparisons on common cases cost one (n_boot × n_cases) product per model,
however many distinct case sets there are: a model's totals on the cases it
shares with another are its totals on all its cases minus those on the (few)
cases the other lacks. That subtraction is made exact by summing in integers
(:class:`_FixedPoint`): each statistic is split into integer-valued limbs of
B = 53 − bit_length(n_cases) bits at fixed binary positions, so that every sum
of count × limb is an integer below 2**53, which float64 products add without
rounding, in any order. What is exact:

* a model's own point estimate and replicates, and every comparison of two
  models with the same case set (the difference of their own), are the float64
  sums of earlier versions, unchanged to the last bit;
* a comparison on common cases — its Δ and its replicates — rests on the exact
  sums of the statistics over the (drawn) common cases, each turned into a
  float by adding its scaled limbs, least significant first. It depends only on
  the two models' statistics on their common cases: two models with equal
  statistics there differ by exactly 0 on every resample (Δ = 0, p = 1), and
  the other models, the order of summation and BLAS's threads change nothing.
  It may differ from a float64 sum over the same cases (an earlier version's, a
  naive recomputation's) in the last bits, that sum's rounding. Exact while a
  statistic's values span at most ``MAX_LIMBS`` limbs: a count needs one, scores
  in [1e-15, 1] at most four (up to 65,535 cases). Bits below those are dropped
  (still the same for equal statistics, but no longer independent of the other
  models' values).

Memory is linear in the number of models: the resample counts are held once
(2 bytes a count up to 65,535 cases), each model's statistics, their limbs and
the limbs' totals once, and each comparison on common cases is reduced to its
row at once (no per-pair copies of statistics or replicates).

Outputs per (model, leaf): the point estimate on all cases, the mean and
standard deviation (ddof=1) of the replicates, and the percentile interval at
``level``. Per pair of models: the difference (a − b), its percentile interval,
and a two-sided bootstrap p-value, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)) capped at 1.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from pathlib import Path

import numpy as np

CHUNK = 256  # resamples generated and reduced at a time: bounds memory for large n
COUNT_BLOCK_CELLS = 1 << 17  # draws counted at a time (a 1 MB bincount): see _count_into
MAX_LIMBS = 4  # limbs per statistic at most: values spanning more lose their lowest bits
MODEL_BLOCK = 8  # models whose limbs and replicates on common cases are computed together


def _chunks(n_boot: int):
    for start in range(0, n_boot, CHUNK):
        yield start, min(CHUNK, n_boot - start)


def resample_indices(n_cases: int, n_boot: int, seed: int) -> np.ndarray:
    """The (n_boot, n_cases) index matrix; row b is resample b."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return np.concatenate([rng.integers(0, n_cases, size=(size, n_cases)) for _, size in _chunks(n_boot)]) \
        if n_boot else np.empty((0, n_cases), dtype="int64")


def _count_into(rng, out: np.ndarray) -> None:
    """Fill ``out`` (rows, n_cases) with the next ``rows`` resamples' counts: how often each case is drawn.

    Drawn and counted a block of rows at a time, each block's counts one bincount small enough to stay in cache
    (a whole chunk's int64 indices and counts, then their copy to ``out``'s type, are 5x ``out``'s memory, freshly
    faulted in: at 10,000 cases that was 0.3 CPU-s a job for 0.05 of counting). The generator's stream is the same
    however the draws are split, so the counts are those of :func:`resample_indices`."""
    rows, n_cases = out.shape
    block = max(1, COUNT_BLOCK_CELLS // max(n_cases, 1))
    for start in range(0, rows, block):
        k = min(block, rows - start)
        idx = rng.integers(0, n_cases, size=(k, n_cases))
        idx += np.arange(k)[:, None] * n_cases  # row r's cases at r·n_cases onwards: one bincount for the block
        out[start: start + k] = np.bincount(idx.ravel(), minlength=k * n_cases).reshape(k, n_cases)


def resample_counts(n_cases: int, n_boot: int, seed: int, dtype="float64"):
    """Yield count matrices (chunk, n_cases) of ``dtype``, in order, for the same draws as
    :func:`resample_indices`."""
    rng = np.random.Generator(np.random.PCG64(seed))
    for _, size in _chunks(n_boot):
        out = np.empty((size, n_cases), dtype=dtype)
        _count_into(rng, out)
        yield out


def _all_counts(n_cases: int, n_boot: int, seed: int) -> np.ndarray:
    """Every resample's counts, (n_boot, n_cases), in the smallest unsigned type holding them exactly
    (a count is at most n_cases): 2 bytes per entry up to 65,535 cases instead of 8."""
    out = np.empty((n_boot, n_cases), dtype=np.min_scalar_type(max(n_cases, 1)))
    _count_into(np.random.Generator(np.random.PCG64(seed)), out)
    return out


@dataclass
class BootstrapResult:
    cases: list  # the case ids, in resample-matrix order
    replicates: "object"  # DataFrame: model, metric, bootstrap (-1 = point estimate), value
    summary: "object"  # DataFrame: model, metric, estimate, mean, std, ci_lower, ci_upper, n, ...
    comparisons: "object"  # DataFrame: model_a, model_b, metric, delta, ci_lower, ci_upper, p_value, n_common
    common_cases: int | None = None  # with common_to: how many cases every one of those models has
    common_replicates: "object" = None  # with common_to: their replicates (as ``replicates``) on those cases


def _stats_matrix(scores, leaf, case_pos: np.ndarray, n_cases: int, every_case: bool = False) -> np.ndarray:
    """The leaf's statistics of every case (zero where the model has none); ``every_case``: ``case_pos`` is every
    case in order (the usual model: its scores aligned to the case set), so they are that already."""
    per_sample = leaf.statistics(scores)
    if every_case:
        return per_sample
    full = np.zeros((n_cases, per_sample.shape[1]))
    full[case_pos] = per_sample
    return full


def percentile_interval(values: np.ndarray, level: float):
    """The percentile interval of the finite replicates at ``level``; (NaN, NaN) when none is finite."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.nan, np.nan
    alpha = (1 - level) / 2
    lo, hi = np.quantile(finite, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_p_value(deltas: np.ndarray) -> float:
    """Two-sided bootstrap p-value of a difference, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)), capped at 1."""
    finite = deltas[np.isfinite(deltas)]
    if finite.size == 0:
        return np.nan
    return float(min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))))


def _replicate_values(model_stats: dict, leaves, offsets, counts, n_boot: int, memo=None):
    """Point estimates and bootstrap replicates of every leaf of every model in ``model_stats``
    (model -> its leaves' statistics side by side, (n_cases, Σk)), on the resamples ``counts()`` returns:
    ({(model, leaf name): point}, {(model, leaf name): (n_boot,) replicates}).

    One matrix product per model and chunk of resamples, each of the same shape, so a model's numbers
    never depend on which other models are scored with it (not even in the last bit) — which is what lets
    ``memo`` (:class:`ReplicateMemo`, bound to these resamples and leaves) serve a model whose statistics it
    has seen, and store the others'.
    """
    point, reps = {}, {}
    todo = {}
    for m, S in model_stats.items():
        found = memo.get(m, S) if memo is not None else None
        if found is not None:  # (leaves, 1 + n_boot): the point estimate, then the replicates
            for i, leaf in enumerate(leaves):
                point[m, leaf.name], reps[m, leaf.name] = found[i, 0], found[i, 1:]
            continue
        todo[m] = S
        totals = S.sum(axis=0, keepdims=True)
        for i, leaf in enumerate(leaves):
            point[m, leaf.name] = leaf.value(totals[:, offsets[i]: offsets[i + 1]])[0]
            reps[m, leaf.name] = np.empty(n_boot)
    for start, size in _chunks(n_boot) if todo else ():
        chunk = counts()[start: start + size].astype("float64")
        for m, S in todo.items():
            totals = chunk @ S
            for i, leaf in enumerate(leaves):
                reps[m, leaf.name][start: start + size] = leaf.value(totals[:, offsets[i]: offsets[i + 1]])
    for m, S in todo.items() if memo is not None else ():
        memo.put(m, np.array([np.concatenate([[point[m, leaf.name]], reps[m, leaf.name]]) for leaf in leaves]
                             ).reshape(len(leaves), n_boot + 1))
    return point, reps


class ReplicateMemo:
    """The point estimates and replicates of models bootstrapped before, kept in ``folder`` (a group's, an
    ``update()`` output) so that a model whose statistics are unchanged is not resampled again: adding a model to a
    leaderboard of 100 resamples one model, not 101 (at 10,000 cases each costs a (1,000 × 10,000) product per
    chunk of statistics).

    A model's entry is a file named by a sha256 over everything its numbers are computed from: its statistics
    matrix (every case of the set in order, zero where it has no pair: a changed score, case or case set changes
    it), and what :meth:`bind` is given — the number of cases, resamples and the seed (the resample counts), the
    leaves and their columns, the bytes of every radrank module and numpy's version, and the CPU features numpy
    detects (its BLAS picks its kernels by them, and a kernel's order of summation is in the last bits). So a
    file is served only where computing it again gives the same bits; a worse resubmission under the same name
    has other statistics, hence another key, and is resampled. A file that cannot be read as the expected array
    is computed again. :meth:`prune` leaves only this run's entries: the folder holds one file per model.

    Beside them, ``comparisons.npz`` holds every comparison of two models with the same case set, by the two
    models' keys and the level: a pair's numbers depend on those two models' own alone, so adding a model to 100
    compares 100 pairs instead of 5,050 (the quantiles of each pair's differences on every resample).
    """

    LAYOUT = "1"
    PAIRS = "comparisons.npz"  # the comparisons of pairs of models with the same cases, by the two models' keys

    def __init__(self, folder):
        self.folder = Path(folder)
        self.context = b""
        self.shape = None
        self.keys: dict = {}  # model -> its key in this run
        self.used: set = set()
        self.hits = self.stored = self.pairs_served = 0
        self.pairs_stored = False

    def bind(self, n_cases: int, n_boot: int, seed: int, leaves, offsets) -> "ReplicateMemo":
        from radrank.provenance import code_digest

        features = getattr(getattr(np, "_core", None), "_multiarray_umath", None)
        features = sorted(k for k, v in getattr(features, "__cpu_features__", {}).items() if v)
        context = {"layout": self.LAYOUT, "n_cases": int(n_cases), "n_boot": int(n_boot), "seed": int(seed),
                   "leaves": [leaf.name for leaf in leaves], "offsets": [int(o) for o in offsets],
                   "code": code_digest(("numpy",)), "cpu": features}
        self.context = json.dumps(context, sort_keys=True).encode()
        self.shape = (len(leaves), int(n_boot) + 1)
        return self

    def key(self, stats: np.ndarray) -> str:
        stats = np.ascontiguousarray(stats, dtype="float64")
        h = hashlib.sha256(self.context)
        h.update(repr(stats.shape).encode())
        h.update(stats.tobytes())
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.npy"

    def get(self, model, stats: np.ndarray):
        """The (leaves, 1 + n_boot) point estimates and replicates stored for ``model``'s ``stats``, else None."""
        key = self.keys[model] = self.key(stats)
        self.used.add(key)
        try:
            values = np.load(self._path(key), allow_pickle=False)
        except (OSError, ValueError, EOFError):  # none, or cut short: computed again
            return None
        if values.shape != self.shape or values.dtype != np.float64:
            return None
        self.hits += 1
        return values

    def put(self, model, values: np.ndarray) -> None:
        """Keep ``values`` for the statistics :meth:`get` was last asked about for ``model``."""
        key = self.keys[model]
        self._save(self._path(key), lambda f: np.save(f, np.ascontiguousarray(values, dtype="float64"),
                                                      allow_pickle=False))
        self.stored += 1

    def _save(self, path: Path, write) -> None:
        from radrank import io

        self.folder.mkdir(parents=True, exist_ok=True)
        with io.atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                write(f)

    def _pairs_context(self, level: float) -> np.ndarray:
        return np.frombuffer(hashlib.sha256(self.context + repr(float(level)).encode()).digest(), dtype="uint8")

    def comparisons(self, pairs: list, n_leaves: int, level: float) -> dict:
        """{(a, b): (n_leaves, 4) numbers (:data:`COMPARISON_FIELDS` per leaf)} of the ``pairs`` (models this memo
        has keys for) stored by an earlier run at ``level``; a file that cannot be read as such serves none."""
        import zipfile

        try:
            with np.load(self.folder / self.PAIRS, allow_pickle=False) as stored:
                context, a, b, values = (stored[k] for k in ("context", "a", "b", "values"))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return {}
        if (not np.array_equal(context, self._pairs_context(level)) or a.shape != b.shape or a.ndim != 2
                or a.shape[1] != 32 or values.shape != (len(a), n_leaves, len(COMPARISON_FIELDS))
                or values.dtype != np.float64):
            return {}
        at = {(x.tobytes(), y.tobytes()): i for i, (x, y) in enumerate(zip(a, b))}
        out = {}
        for pair in pairs:
            i = at.get((bytes.fromhex(self.keys[pair[0]]), bytes.fromhex(self.keys[pair[1]])))
            if i is not None:
                out[pair] = values[i]
        self.pairs_served = len(out)
        return out

    def store_comparisons(self, pairs: list, values: np.ndarray, level: float) -> None:
        """Keep the comparisons of ``pairs`` ((a, b) models; ``values``: (pairs, leaves, :data:`COMPARISON_FIELDS`))
        for the next run, in place of any."""
        models = {m for pair in pairs for m in pair}
        key = {m: np.frombuffer(bytes.fromhex(self.keys[m]), dtype="uint8") for m in models}
        arrays = {"context": self._pairs_context(level),
                  "a": np.array([key[a] for a, _ in pairs]), "b": np.array([key[b] for _, b in pairs]),
                  "values": np.asarray(values, dtype="float64")}
        self._save(self.folder / self.PAIRS, lambda f: np.savez(f, **arrays))
        self.pairs_stored = True

    def prune(self) -> None:
        """Remove every entry this run neither served nor stored (models gone or changed; stray files)."""
        self.folder.mkdir(parents=True, exist_ok=True)  # an output, even of a group with no model
        for path in self.folder.iterdir():
            kept = path.stem in self.used or path.name == ".snakemake_timestamp" or (
                path.name == self.PAIRS and self.pairs_stored)
            if path.is_file() and not kept:
                path.unlink()


class _FixedPoint:
    """Statistics as integer-valued float64 limbs, for sums that are exact in any order.

    Limb ``q`` of a value holds its bits from 2**(q·B) up to 2**((q+1)·B), with the value's sign
    (truncation toward zero), so a value's limbs depend on the value alone. A statistic column has the
    limbs from the one holding the top bit of its largest magnitude down to the one holding the lowest
    set bit of any of its values, over every model (at most ``MAX_LIMBS``). Each limb is below 2**B in
    magnitude and a resample's counts add up to n_cases, so with B = 53 − bit_length(n_cases) every
    sum of count × limb, partial or whole, is an integer below 2**53: float64 products and
    differences of such sums are exact.
    """

    def __init__(self, stats: list, n_cases: int):
        self.bits = 53 - max(int(n_cases), 1).bit_length()
        k = stats[0].shape[1] if stats else 0
        top, low = np.full(k, -np.inf), np.full(k, np.inf)  # exponent of the highest / lowest set bit
        for S in stats:
            mags = np.where(np.isfinite(S), np.abs(S), 0.0)
            mant, exp = np.frexp(mags)  # mags = mant · 2**exp, mant in [0.5, 1)
            nonzero = mags > 0
            mant_int = (mant * 2.0 ** 53).astype("int64")
            lowest = exp - 53 + (np.frexp((mant_int & -mant_int).astype("float64"))[1] - 1)
            top = np.maximum(top, np.where(nonzero, exp - 1, -np.inf).max(axis=0, initial=-np.inf))
            low = np.minimum(low, np.where(nonzero, lowest, np.inf).min(axis=0, initial=np.inf))
        empty = ~np.isfinite(top)  # a column of zeros: one limb of zeros
        self.top = np.where(empty, 0, np.floor_divide(np.where(empty, 0, top), self.bits)).astype("int64")
        lowest_limb = np.floor_divide(np.where(empty, 0, low), self.bits).astype("int64")
        self.n_limbs = np.clip(self.top - lowest_limb + 1, 1, MAX_LIMBS)
        # Limb rows of a product, by level: the least significant limb of every statistic (in column order),
        # then the next one of those that have one, and so on — the order they are added in.
        columns = [np.flatnonzero(self.n_limbs > t) for t in range(int(self.n_limbs.max(initial=1)))]
        ends = np.cumsum([len(c) for c in columns])
        self.levels = [(c, slice(end - len(c), end)) for c, end in zip(columns, ends)]  # (statistics, limb rows)
        self.column = np.concatenate(columns)
        self.depth = np.concatenate([self.n_limbs[c] - 1 - t for t, c in enumerate(columns)])  # limbs below the top
        self.scale = np.ldexp(1.0, (self.top[self.column] - self.depth) * self.bits)[:, None]

    def limbs(self, values: np.ndarray) -> np.ndarray:
        """(r, k) statistics -> (r, Σ limbs) integer-valued limbs."""
        out = np.empty((values.shape[0], int(self.n_limbs.max(initial=1)), values.shape[1]))
        rest = np.ldexp(values, -self.top * self.bits)  # below 2**B in magnitude
        for depth in range(out.shape[1]):
            out[:, depth] = np.trunc(rest)
            rest = np.ldexp(rest - out[:, depth], self.bits)
        return out[:, self.depth, self.column]

    def totals(self, limb_sums: np.ndarray) -> np.ndarray:
        """(..., Σ limbs, r) exact sums of limbs -> (..., k, r) totals: each limb scaled (exact), then a
        statistic's limbs added one by one, least significant first; + 0.0 so that a zero total is +0 however
        it was reached."""
        (_, least), *higher = self.levels
        out = limb_sums[..., least, :] * self.scale[least]
        for columns, rows in higher:
            out[..., columns, :] += limb_sums[..., rows, :] * self.scale[rows]
        out += 0.0
        return out


class _CommonCaseReplicates:
    """Models' leaves on the cases they share with another model, for many models at once: the totals on
    all of a model's cases minus those on the cases the other lacks, both exact (:class:`_FixedPoint`). The
    point estimate is one more resample, drawing every case once. Limbs are made as needed (a block of
    models, or a few cases, at a time), so only their totals are held."""

    def __init__(self, model_stats: dict, leaves, offsets, counts: np.ndarray):
        self.model_stats, self.leaves, self.offsets = model_stats, leaves, offsets
        self.index = {m: i for i, m in enumerate(model_stats)}
        self.fixed = _FixedPoint(list(model_stats.values()), counts.shape[1])
        n_boot, n_limbs = counts.shape[0], len(self.fixed.column)
        self.limb_totals = np.empty((len(model_stats), n_limbs, n_boot + 1))  # per resample, then on every case
        stats = list(model_stats.values())
        for first in range(0, len(stats), MODEL_BLOCK):
            block = self._limbs(stats[first: first + MODEL_BLOCK])  # (n_cases, models × Σ limbs)
            totals = self.limb_totals[first: first + MODEL_BLOCK]
            for start, size in _chunks(n_boot):
                product = counts[start: start + size].astype("float64") @ block
                totals[:, :, start: start + size] = product.reshape(size, len(totals), n_limbs).transpose(1, 2, 0)
            totals[:, :, n_boot] = block.sum(axis=0).reshape(len(totals), n_limbs)
        self.counts_by_case = np.ones((counts.shape[1], n_boot + 1), dtype=counts.dtype)  # (cases, resamples + 1)
        self.counts_by_case[:, :n_boot] = counts.T  # a case's counts contiguous: a few cases' are gathered cheaply
        self._all_cases = {}  # model -> its point estimates and replicates on all its cases (shared by many pairs)

    def _limbs(self, stats: list) -> np.ndarray:
        """(r, models × Σ limbs): the limbs of the models' (r, k) statistics side by side."""
        rows = np.stack(stats, axis=1)  # (r, models, k)
        return self.fixed.limbs(rows.reshape(-1, rows.shape[2])).reshape(rows.shape[0], -1)

    def _values(self, limb_sums: np.ndarray) -> list:
        """[(point estimates, replicates)], one per model, from (models, Σ limbs, resamples + point) limb sums
        (a leaf gets each model's (resamples + point, k) totals)."""
        out = []
        for totals in self.fixed.totals(limb_sums):
            values = {leaf.name: leaf.value(totals[self.offsets[i]: self.offsets[i + 1]].T)
                      for i, leaf in enumerate(self.leaves)}
            out.append(({name: v[-1] for name, v in values.items()}, {name: v[:-1] for name, v in values.items()}))
        return out

    def on_all_cases(self, model):
        """({leaf name: point estimate}, {leaf name: (n_boot,) replicates}) of ``model`` on all its cases."""
        if model not in self._all_cases:
            row = self.index[model]
            self._all_cases[model] = self._values(self.limb_totals[row: row + 1])[0]
        return self._all_cases[model]

    def on_cases_outside(self, models: list, lacking: np.ndarray) -> list:
        """[(point estimates, replicates)] of each of ``models`` on its cases outside ``lacking`` (a case mask),
        as :meth:`on_all_cases` gives them: the lacking cases' counts times all the models' limbs there, a
        block of models at a time (its arrays stay in cache)."""
        cases = np.flatnonzero(lacking)
        counts = self.counts_by_case[cases].astype("float64")
        out = []
        for start in range(0, len(models), MODEL_BLOCK):
            block = models[start: start + MODEL_BLOCK]
            limbs = self._limbs([self.model_stats[m][cases] for m in block])
            lacked = (limbs.T @ counts).reshape((len(block),) + self.limb_totals.shape[1:])
            for i, m in enumerate(block):
                np.subtract(self.limb_totals[self.index[m]], lacked[i], out=lacked[i])
            out += self._values(lacked)
        return out


def _comparison(delta_point, deltas: np.ndarray, n_boot: int, level: float) -> dict:
    lo, hi = percentile_interval(deltas, level) if n_boot else (np.nan, np.nan)
    return {"delta": float(delta_point), "ci_lower": lo, "ci_upper": hi,
            "p_value": bootstrap_p_value(deltas) if n_boot else np.nan}


COMPARISON_FIELDS = ("delta", "ci_lower", "ci_upper", "p_value")  # a comparison's numbers, as _comparison names them
COMPARISON_BLOCK = 2048  # pairs whose (pairs, resamples) differences are held at once (16 MB at 1,000 resamples)


def _comparisons(pairs: list, point: dict, reps: dict, n_boot: int, level: float) -> list:
    """:func:`_comparison` of every pair (a, b) of one leaf, from its models' ``point`` estimates and ``reps``
    (model -> (n_boot,) replicates): the same numbers, a block of pairs at a time (np.quantile along an axis is the
    one-dimensional quantile of each row); a pair with a non-finite replicate goes through :func:`_comparison`."""
    if not n_boot or not pairs:
        return [_comparison(point[a] - point[b], reps[a] - reps[b], n_boot, level) for a, b in pairs]
    models = sorted({m for pair in pairs for m in pair})
    at = {m: i for i, m in enumerate(models)}
    stacked = np.stack([reps[m] for m in models])
    alpha = (1 - level) / 2
    out = []
    for start in range(0, len(pairs), COMPARISON_BLOCK):
        block = pairs[start: start + COMPARISON_BLOCK]
        ia, ib = np.array([at[a] for a, _ in block]), np.array([at[b] for _, b in block])
        deltas = stacked[ia] - stacked[ib]
        finite = np.isfinite(deltas).all(axis=1)
        n = deltas.shape[1]
        below, above = np.count_nonzero(deltas <= 0, axis=1) / n, np.count_nonzero(deltas >= 0, axis=1) / n
        p_values = np.minimum(1.0, 2 * np.minimum(below, above))
        # partitioned in place (no copy of the block): a row keeps its values, which is all _comparison reads
        lo, hi = np.quantile(deltas, [alpha, 1 - alpha], axis=1, overwrite_input=True)
        for i, (a, b) in enumerate(block):
            if not finite[i]:
                out.append(_comparison(point[a] - point[b], deltas[i], n_boot, level))
                continue
            out.append({"delta": float(point[a] - point[b]), "ci_lower": float(lo[i]), "ci_upper": float(hi[i]),
                        "p_value": float(p_values[i])})
    return out


def bootstrap(scores_by_model: dict, leaves, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
              compare: bool = True, common_to=None, common_leaves=None, memo: ReplicateMemo | None = None
              ) -> BootstrapResult:
    """Point estimates, replicates, intervals and paired comparisons.

    ``scores_by_model`` maps a model name to its per-sample scores: a DataFrame
    with ``sample_id`` and the columns every leaf in ``leaves`` reads. ``common_to`` (models): also their
    point estimates and replicates on the cases every one of them has (what rank intervals rest on:
    :func:`on_common_cases`), of the leaves named ``common_leaves`` (all by default). ``memo``: a
    :class:`ReplicateMemo` serving and storing models' own point estimates and replicates (the same numbers).
    """
    import pandas as pd

    from radrank.ingest.casesets import distinct_tables

    models = sorted(scores_by_model)
    # ids as Python strings once per distinct id column (iterating an Arrow-backed column element by element costs
    # ~20x), their positions from one hash table of the cases; the usual leaderboard (every model's scores aligned
    # to the case set, in its order) has one such column
    columns = distinct_tables({m: scores_by_model[m] for m in models}, ("sample_id",))
    ids = {m: scores_by_model[m]["sample_id"].to_numpy(dtype=object) for m in set(columns.values())}
    id_sets = {m: set(ids[m]) for m in ids}
    for m in models:
        if len(id_sets[columns[m]]) != len(ids[columns[m]]):
            raise ValueError(f"model {m!r}: duplicate sample ids in per-sample scores")
    cases = sorted(set().union(*id_sets.values())) if models else []
    n_cases = len(cases)
    case_index = pd.Index(cases, dtype=object)
    positions = {m: case_index.get_indexer(ids[m]) for m in ids}
    every_case = {m: len(pos) == n_cases and bool(np.array_equal(pos, np.arange(n_cases)))
                  for m, pos in positions.items()}
    present = {}
    model_stats = {}  # model -> (n_cases, Σk): its leaves' statistics side by side, zero where it has no pair
    for m in models:
        df = scores_by_model[m]
        case_pos = positions[columns[m]]
        mask = np.zeros(n_cases, dtype=bool)
        mask[case_pos] = True
        present[m] = mask
        parts = [_stats_matrix(df, leaf, case_pos, n_cases, every_case[columns[m]]) for leaf in leaves]
        model_stats[m] = np.concatenate(parts, axis=1) if parts else np.zeros((n_cases, 0))
    offsets = np.cumsum([0] + [2 if leaf.is_mean else len(leaf.stats) for leaf in leaves])  # leaf columns
    leaf_by_name = {leaf.name: leaf for leaf in leaves}
    # the resample counts, drawn when first needed: when the memo serves every model and every case set is the same,
    # they are not (at 10,000 cases, drawing them is a sixth of the job)
    counts = lru_cache(maxsize=1)(lambda: _all_counts(n_cases, n_boot, seed))
    keys = [(m, leaf.name) for m in models for leaf in leaves]
    point, reps = _replicate_values(model_stats, leaves, offsets, counts, n_boot,
                                    memo.bind(n_cases, n_boot, seed, leaves, offsets) if memo is not None else None)

    pairs = list(combinations(models, 2)) if compare else []
    compared = {}  # (a, b, leaf name) -> delta, ci_lower, ci_upper, p_value
    # Pairs whose case sets differ are compared on their common cases (_CommonCaseReplicates). Each is computed
    # with the model y that lacks cases the other one, x, has (if both do, y is b): x with every model that y
    # limits at once, y on its own; each pair is reduced to its row at once.
    # models with the same case set share its bytes: one comparison of two strings per pair, not of two masks
    case_set = {m: present[m].tobytes() for m in models}
    unequal = [(a, b) for a, b in pairs if case_set[a] != case_set[b]]
    if unequal:
        on_common = _CommonCaseReplicates({m: model_stats[m] for m in sorted({m for p in unequal for m in p})},
                                          leaves, offsets, counts())
        limited_by = {}  # y -> [(pair, position of x in it)]
        for a, b in unequal:
            x_at = 0 if (present[a] & ~present[b]).any() else 1
            limited_by.setdefault((b, a)[x_at], []).append(((a, b), x_at))
        for y, group in limited_by.items():
            limited = on_common.on_cases_outside([pair[x_at] for pair, x_at in group], ~present[y])
            for ((a, b), x_at), x_side in zip(group, limited):
                x = (a, b)[x_at]
                y_side = on_common.on_cases_outside([y], ~present[x])[0] if (present[y] & ~present[x]).any() \
                    else on_common.on_all_cases(y)
                (point_a, reps_a), (point_b, reps_b) = (x_side, y_side) if x_at == 0 else (y_side, x_side)
                for leaf in leaves:
                    compared[a, b, leaf.name] = _comparison(point_a[leaf.name] - point_b[leaf.name],
                                                            reps_a[leaf.name] - reps_b[leaf.name], n_boot, level)
        del on_common

    summary_rows = []
    for (m, name) in keys:
        est = float(point[m, name])
        lo, hi = percentile_interval(reps[m, name], level) if n_boot else (np.nan, np.nan)
        finite = reps[m, name][np.isfinite(reps[m, name])]
        summary_rows.append({
            "model": m, "metric": name, "label": leaf_by_name[name].label,
            "higher_is_better": leaf_by_name[name].higher_is_better, "estimate": est,
            "mean": float(finite.mean()) if finite.size else np.nan,
            "std": float(finite.std(ddof=1)) if finite.size > 1 else np.nan,
            "ci_lower": lo, "ci_upper": hi,
            "n": int(present[m].sum()), "n_bootstrap": n_boot, "level": level, "seed": seed,
        })

    # the pairs with equal case sets: each leaf's differences a block of pairs at a time (_comparisons)
    equal = [(a, b) for a, b in pairs if (a, b, leaves[0].name) not in compared] if leaves else []
    # those of two models the memo served or stored, compared before at this level, are its numbers (a pair's depend
    # on the two models' own alone: each row of a block is its own quantile); the rest are computed
    stored = memo.comparisons(equal, len(leaves), level) if memo is not None else {}
    todo = [pair for pair in equal if pair not in stored]
    # every pair's numbers as one (pairs, leaves, fields) array, in the order of ``pairs``: the table is built from
    # its columns (25,000 rows of dicts at 100 models cost a third of the job's bootstrap)
    values = np.full((len(pairs), len(leaves), len(COMPARISON_FIELDS)), np.nan)
    row_of = {pair: i for i, pair in enumerate(pairs)}
    for (a, b), numbers in stored.items():
        values[row_of[a, b]] = numbers
    for j, leaf in enumerate(leaves):
        for (a, b), row in zip(todo, _comparisons(todo, {m: point[m, leaf.name] for m in models},
                                                  {m: reps[m, leaf.name] for m in models}, n_boot, level)):
            values[row_of[a, b], j] = [row[f] for f in COMPARISON_FIELDS]
        for (a, b) in unequal:
            values[row_of[a, b], j] = [compared[a, b, leaf.name][f] for f in COMPARISON_FIELDS]
    if memo is not None and equal:
        memo.store_comparisons(equal, values[[row_of[pair] for pair in equal]], level)
    n_present = {m: int(present[m].sum()) for m in models}  # a pair with one case set has its count in common
    n_common = np.array([n_present[a] if case_set[a] == case_set[b] else int((present[a] & present[b]).sum())
                         for a, b in pairs], dtype="int64")

    replicates = _long_replicates(keys, point, reps, n_boot)
    common_cases = common_replicates = None
    if common_to is not None:
        chosen = [i for i, leaf in enumerate(leaves) if common_leaves is None or leaf.name in common_leaves]
        columns = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in chosen] or [np.zeros(0, int)])
        chosen_leaves = [leaves[i] for i in chosen]
        common_cases, common_point, common_reps = on_common_cases(
            list(common_to), present, {m: model_stats[m][:, columns] for m in common_to}, chosen_leaves,
            np.cumsum([0] + [offsets[i + 1] - offsets[i] for i in chosen]), counts, point, reps)
        common_replicates = _long_replicates([(m, leaf.name) for m in sorted(common_to) for leaf in chosen_leaves],
                                             common_point, common_reps, n_boot)
    summary = pd.DataFrame(summary_rows, columns=["model", "metric", "label", "higher_is_better", "estimate", "mean",
                                                  "std", "ci_lower", "ci_upper", "n", "n_bootstrap", "level", "seed"])
    n_leaves = len(leaves)
    flat = values.reshape(len(pairs) * n_leaves, len(COMPARISON_FIELDS))
    names = ["model_a", "model_b", "metric", "delta", "ci_lower", "ci_upper", "p_value", "n_common", "higher_is_better"]
    comparisons = pd.DataFrame([], columns=names) if not len(flat) else pd.DataFrame({
        "model_a": np.repeat(np.array([a for a, _ in pairs], dtype=object), n_leaves),
        "model_b": np.repeat(np.array([b for _, b in pairs], dtype=object), n_leaves),
        "metric": np.tile(np.array([leaf.name for leaf in leaves], dtype=object), len(pairs)),
        **{field: flat[:, k] for k, field in enumerate(COMPARISON_FIELDS)},
        "n_common": np.repeat(n_common, n_leaves),
        "higher_is_better": np.tile(np.array([bool(leaf.higher_is_better) for leaf in leaves], dtype=bool),
                                    len(pairs)),
    }, columns=names)
    return BootstrapResult(cases=cases, replicates=replicates, summary=summary, comparisons=comparisons,
                           common_cases=common_cases, common_replicates=common_replicates)


def _long_replicates(keys, point: dict, reps: dict, n_boot: int):
    """Replicates in long form, built from arrays (one row per model, leaf and resample; -1 = point estimate)."""
    import pandas as pd

    per_key = n_boot + 1
    return pd.DataFrame({
        "model": np.repeat(np.array([m for m, _ in keys], dtype=object), per_key),
        "metric": np.repeat(np.array([name for _, name in keys], dtype=object), per_key),
        "bootstrap": np.tile(np.arange(-1, n_boot, dtype="int64"), len(keys)),
        "value": np.concatenate([np.concatenate([[float(point[k])], reps[k]]) for k in keys])
        if keys else np.zeros(0),
    })


def on_common_cases(models: list, present: dict, model_stats: dict, leaves, offsets, counts, point, reps):
    """(number of cases every one of ``models`` has, {(model, leaf): point}, {(model, leaf): replicates}) on
    those cases; ``counts()``: the resample counts (drawn only if needed). When every model has exactly those
    cases these are its own numbers; otherwise every model's are its totals on the common cases, exact
    (:class:`_CommonCaseReplicates`), so that two models equal there are equal on every resample whatever else
    either has."""
    common = np.ones(len(next(iter(present.values()))) if present else 0, dtype=bool)
    for m in models:
        common &= present[m]
    if all(np.array_equal(present[m], common) for m in models):
        keys = [(m, leaf.name) for m in models for leaf in leaves]
        return int(common.sum()), {k: point[k] for k in keys}, {k: reps[k] for k in keys}
    on_common = _CommonCaseReplicates({m: model_stats[m] for m in models}, leaves, offsets, counts())
    common_point, common_reps = {}, {}
    for m, (p, r) in zip(models, on_common.on_cases_outside(models, ~common)):
        for leaf in leaves:
            common_point[m, leaf.name], common_reps[m, leaf.name] = p[leaf.name], r[leaf.name]
    return int(common.sum()), common_point, common_reps


# Memory to declare for a bootstrap job (statistics, replicates and every file written from them). Measured by
# benchmarks/memory.py at 5 leaves, 1,000 resamples, a third of the models each missing its own 1-3 % of the cases:
# 2,347 cases, 208 MB at 25 models, 333 MB at 100 (0.33 MB per model × leaf); 10,000 cases, 647 MB at 100 (0.72).
# Declared: a fixed part plus 1 MB per model × leaf × 1000 resamples (headroom for larger case sets).
BASE_MB = 500
MB_PER_MODEL_LEAF = 1.0


def memory_mb(n_models: int, n_leaves: int, n_boot: int) -> int:
    """Memory to declare for one bootstrap job (first attempt): linear in models × leaves × resamples."""
    return int(BASE_MB + MB_PER_MODEL_LEAF * n_models * n_leaves * max(n_boot, 1) / 1000)
