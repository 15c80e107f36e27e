"""Bootstrap: radrank's exact method vs recomputing the metrics on every resample.

The exact method (``radrank.stats.bootstrap.bootstrap``) scores each metric once
and gets every resample's leaf from count-weighted totals of per-sample
statistics. The recompute method rebuilds the resampled pairs and runs each
metric again, resample by resample — what a naive bootstrap does. The two must
give the same numbers: the recompute method is run on a sample of the resamples
and checked against the exact replicates (1e-9), and its time is EXTRAPOLATED
from that sample to all resamples.

Leaves: bleu2, bleu4 (corpus), rouge1/2/L and radcliq_v0/v1 (RadCliQ from BLEU-2
and synthetic RadGraph / BERTScore / SembScore columns).

``--case-sets``: the bootstrap's cost when models miss different cases. 100 models x 2,347 cases x
1,000 resamples (lexical panel, synthetic scores: benchmarks/_case_sets.py), every model on every
case vs a third of the models each missing its own 1-3 % of the cases (so nearly every pair of
those has its own common case set); run with this checkout and with ``--against`` (default HEAD,
checked out with benchmarks/_workdir.revision) in the same run, each in a fresh process with
``--blas-threads`` BLAS threads (default 1: a threaded BLAS spins between calls, which counts as
CPU time). Prints CPU-s and wall-s, the distinct/equal ratio of each (goal <= 2x), and how far the
comparisons of the two revisions differ.

``--files``: the size of the per-model files under results/summary/ (the bootstrap job's
RadHarmony-style folders) at 100 models x 2,347 cases, synthetic reports (tests/synthetic.py),
this checkout vs ``--against``.

Usage: python benchmarks/bootstrap.py [--n-boot 1000] [--cases 2300] [--models 1] [--sample 10] [--lib-sample 2]
       python benchmarks/bootstrap.py --case-sets [--models 100] [--cases 2347] [--n-boot 1000] [--against HEAD]
       python benchmarks/bootstrap.py --files [--models 100] [--cases 2347] [--n-boot 1000] [--against HEAD]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# fast-bleu scores each hypothesis in an OpenMP loop; with one hypothesis per call the threads only add
# start-up and contention costs, so the library side gets its best case: one thread (override by setting
# OMP_NUM_THREADS yourself).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from synthetic import leaderboard  # noqa: E402

from radrank import metrics  # noqa: E402
from radrank.stats.bootstrap import bootstrap, resample_indices  # noqa: E402

LEXICAL = ("bleu2", "bleu4", "rouge")
METRICS = LEXICAL + ("radcliq",)
SEED = 0


def components(pairs: pd.DataFrame, bleu2: pd.DataFrame, seed: int) -> dict:
    """Synthetic RadGraph / BERTScore / SembScore columns (loosely tied to BLEU-2) plus the real BLEU-2."""
    rng = np.random.default_rng(seed)
    b = bleu2["bleu2"].to_numpy()
    n = len(b)
    ids = pairs["sample_id"].to_numpy()
    return {
        "radgraph": pd.DataFrame({"sample_id": ids,
                                  "radgraph_combined": np.clip(0.8 * b + rng.normal(0, 0.1, n), 0, 1)}),
        "bertscore": pd.DataFrame({"sample_id": ids,
                                   "bertscore": np.clip(0.9 * b + rng.normal(0, 0.1, n), -0.3, 1)}),
        "semb": pd.DataFrame({"sample_id": ids,
                              "semb_score": np.clip(0.5 + 0.5 * b + rng.normal(0, 0.1, n), 0, 1)}),
        "bleu2": bleu2,
    }


def score_all(pairs: pd.DataFrame, extra: dict) -> pd.DataFrame:
    """Per-sample scores of every metric on ``pairs`` (four metric runs)."""
    out = {name: metrics.score(name, pairs) for name in LEXICAL}
    inputs = {**extra, "bleu2": out["bleu2"]}
    out["radcliq"] = metrics.score("radcliq", pairs, inputs=inputs)
    frame = pairs[["sample_id"]]
    for df in out.values():
        frame = frame.merge(df, on="sample_id")
    return frame


def leaf_values(scores: pd.DataFrame, leaves) -> dict:
    return {leaf.name: float(leaf.value(leaf.statistics(scores).sum(axis=0))) for leaf in leaves}


def resampled(pairs: pd.DataFrame, extra: dict, cases: list, row: np.ndarray):
    """The pairs of one resample (a drawn case appears as often as drawn, under a fresh sample id)."""
    by_case = pairs.set_index("sample_id")
    drawn = [cases[i] for i in row]
    new_ids = [f"{c}#{k}" for k, c in enumerate(drawn)]
    res_pairs = by_case.loc[drawn].reset_index(drop=True)
    res_pairs.insert(0, "sample_id", new_ids)
    res_extra = {}
    for name, df in extra.items():
        part = df.set_index("sample_id").loc[drawn].reset_index(drop=True)
        part.insert(0, "sample_id", new_ids)
        res_extra[name] = part
    return res_pairs, res_extra


def library_leaves(pairs: pd.DataFrame) -> dict:
    """bleu2 / bleu4 / rouge leaves recomputed with the reference libraries (per-pair loops)."""
    from fast_bleu import BLEU
    from pycocoevalcap.bleu.bleu_scorer import BleuScorer
    from rouge_score import rouge_scorer

    def toks(text):
        return [t for t in str(text).lower().replace(".", " .").split(" ") if t]

    refs, hyps = pairs["reference"].tolist(), pairs["hypothesis"].tolist()
    b2 = [BLEU([toks(r)], {"bigram": (1 / 2, 1 / 2)}).get_score([toks(h)])["bigram"][0] for r, h in zip(refs, hyps)]
    scorer = BleuScorer(n=4)
    for r, h in zip(refs, hyps):
        scorer += (h, [r])
    b4 = scorer.compute_score(option="closest")[0][3]
    rs = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = [rs.score(r, h) for r, h in zip(refs, hyps)]
    out = {"bleu2": float(np.mean(b2)), "bleu4": b4}
    for k in ("rouge1", "rouge2", "rougeL"):
        out[k] = float(np.mean([s[k].fmeasure for s in scores]))
    return out


HERE = Path(__file__).resolve().parent

# Run in a fresh process against one revision's src/ (PYTHONPATH): bootstrap cost on equal vs distinct case sets.
CASE_SETS_CHILD = r"""
import json, sys, time
args = json.loads(sys.argv[1])
sys.path.insert(0, args["benchmarks"])
import numpy as np
from _case_sets import LEXICAL, case_masks, leaderboard_scores
from radrank import metrics
from radrank.stats.bootstrap import bootstrap
leaves = [leaf for name in LEXICAL for leaf in metrics.leaves(name)]
out = {}
for label, distinct in (("equal", False), ("distinct", True)):
    scores = leaderboard_scores(args["models"], args["cases"], distinct)
    masks = [m.tobytes() for m in case_masks(args["models"], args["cases"], distinct)]
    common = {(np.frombuffer(a, bool) & np.frombuffer(b, bool)).tobytes()
              for i, a in enumerate(masks) for b in masks[i + 1:] if a != b}
    cpu, wall = time.process_time(), time.perf_counter()
    result = bootstrap(scores, leaves, n_boot=args["n_boot"], seed=0)
    out[label] = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                  "case_sets": len(set(masks)), "common_sets": len(common)}
    result.comparisons.to_parquet(f"{args['out']}/{label}.parquet")
print(json.dumps(out))
"""

# The per-model files the bootstrap job writes (results/summary/...), with one revision's radrank.summaries.
FILES_CHILD = r"""
import inspect, json, sys
from pathlib import Path
args = json.loads(sys.argv[1])
sys.path.insert(0, args["benchmarks"])
from _case_sets import LEXICAL, leaderboard_scores
from radrank import metrics
from radrank.stats.bootstrap import bootstrap
from radrank.summaries import write_model_summaries
leaves = [leaf for name in LEXICAL for leaf in metrics.leaves(name)]
scores = leaderboard_scores(args["models"], args["cases"], distinct=False)
result = bootstrap(scores, leaves, n_boot=args["n_boot"], seed=0, compare=False)
pairs, drops = ({m: f"{args['inputs']}/{m}.{ext}" for m in scores} for ext in ("parquet", "drops.csv"))
if "pairs_paths" in inspect.signature(write_model_summaries).parameters:  # before generations.csv was left out
    write_model_summaries(result.replicates, result.summary, pairs, drops, args["out"])
else:
    write_model_summaries(result.replicates, result.summary, drops, args["out"])
sizes = {}
for f in Path(args["out"]).rglob("*"):
    if f.is_file():
        sizes[f.name] = sizes.get(f.name, 0) + f.stat().st_size
print(json.dumps(sizes))
"""


def run_child(code: str, args: dict, src: Path, blas_threads: int) -> dict:
    threads = str(blas_threads)
    env = {**os.environ, "PYTHONPATH": str(src), "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    proc = subprocess.run([sys.executable, "-c", code, json.dumps({**args, "benchmarks": str(HERE)})],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def case_sets(args) -> int:
    import pandas as pd

    sys.path.insert(0, str(HERE))
    from _workdir import revision

    job = {"models": args.models, "cases": args.cases, "n_boot": args.n_boot}
    print(f"bootstrap of {args.models} models x {args.cases:,} cases x {args.n_boot:,} resamples, lexical panel "
          f"(5 leaves), {args.blas_threads} BLAS thread(s); 'distinct': a third of the models each miss their own "
          f"1-3 % of the cases")
    got, comparisons = {}, {}
    with revision(args.against) as old, tempfile.TemporaryDirectory() as tmp:
        for label, root in ((args.against, old / "src"), ("this checkout", HERE.parent / "src")):
            out = Path(tmp) / label.replace(" ", "_")
            out.mkdir()
            got[label] = run_child(CASE_SETS_CHILD, {**job, "out": str(out)}, root, args.blas_threads)
            comparisons[label] = {c: pd.read_parquet(out / f"{c}.parquet") for c in ("equal", "distinct")}
    first = next(iter(got.values()))
    print(f"case sets: {first['equal']['case_sets']} (equal) vs {first['distinct']['case_sets']} (distinct), "
          f"{first['distinct']['common_sets']:,} distinct common case sets among the pairs that differ\n")
    header = f"{'revision':<16} {'CPU-s equal':>12} {'CPU-s distinct':>15} {'ratio':>7} {'wall-s equal':>13} " \
             f"{'wall-s distinct':>16} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for label, r in got.items():
        e, d = r["equal"], r["distinct"]
        print(f"{label:<16} {e['cpu_s']:>12.2f} {d['cpu_s']:>15.2f} {d['cpu_s'] / e['cpu_s']:>6.1f}x "
              f"{e['wall_s']:>13.2f} {d['wall_s']:>16.2f} {d['wall_s'] / e['wall_s']:>6.1f}x")
    new = got["this checkout"]
    ratio = new["distinct"]["cpu_s"] / new["equal"]["cpu_s"]
    print(f"\ndistinct / equal CPU, this checkout: {ratio:.2f}x (goal <= 2x: {'met' if ratio <= 2 else 'NOT met'}); "
          f"distinct case sets, this checkout vs {args.against}: "
          f"{got[args.against]['distinct']['cpu_s'] / new['distinct']['cpu_s']:.1f}x less CPU")
    for c in ("equal", "distinct"):
        old_rows, new_rows = comparisons[args.against][c], comparisons["this checkout"][c]
        diff = {col: (old_rows[col] - new_rows[col]).abs().max() for col in ("delta", "ci_lower", "ci_upper")}
        same = {col: int(((old_rows[col] == new_rows[col]) | (old_rows[col].isna() & new_rows[col].isna())).sum())
                for col in ("delta", "ci_lower", "ci_upper", "p_value")}
        print(f"comparisons ({c}) vs {args.against}: max |difference| delta {diff['delta']:.1e}, CI "
              f"{max(diff['ci_lower'], diff['ci_upper']):.1e}; identical to the last bit: "
              + ", ".join(f"{col} {n:,}/{len(new_rows):,}" for col, n in same.items()))
    return 0


def files(args) -> int:
    import pandas as pd

    sys.path.insert(0, str(HERE))
    from _workdir import revision

    boards = leaderboard(args.cases * args.models, n_models=args.models, seed=SEED)
    chars = boards["model_1"]["reference"].str.len().mean() + boards["model_1"]["hypothesis"].str.len().mean()
    print(f"per-model files of the bootstrap job (results/summary/...): {args.models} models x {args.cases:,} cases, "
          f"{args.n_boot:,} resamples, lexical panel (5 leaves), synthetic reports (reference + hypothesis "
          f"{chars:.0f} characters a case)")
    sizes = {}
    with revision(args.against) as old, tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs"
        inputs.mkdir()
        for m, frame in zip((f"m{i:03d}" for i in range(args.models)), boards.values()):
            frame.to_parquet(inputs / f"{m}.parquet")  # the canonical pairs, as generations.csv copied them
            pd.DataFrame({"sample_id": [], "reason": [], "action": []}).to_csv(inputs / f"{m}.drops.csv", index=False)
        for label, root in ((args.against, old / "src"), ("this checkout", HERE.parent / "src")):
            out = Path(tmp) / label.replace(" ", "_")
            job = {"models": args.models, "cases": args.cases, "n_boot": args.n_boot, "inputs": str(inputs),
                   "out": str(out)}
            sizes[label] = run_child(FILES_CHILD, job, root, args.blas_threads)
        pairs_mb = sum(p.stat().st_size for p in inputs.glob("*.parquet")) / 1e6
    names = sorted({name for s in sizes.values() for name in s})
    header = f"{'revision':<16} " + " ".join(f"{name:>20}" for name in names) + f" {'total':>10} {'per model':>10}"
    print(header)
    print("-" * len(header))
    for label, s in sizes.items():
        total = sum(s.values()) / 1e6
        print(f"{label:<16} " + " ".join(f"{s.get(name, 0) / 1e6:>17.1f} MB" for name in names)
              + f" {total:>7.1f} MB {total / args.models:>7.2f} MB")
    print(f"(the canonical pairs, results/pairs/, hold the generations: {pairs_mb:.1f} MB as parquet)")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--cases", type=int, help="report pairs per model (default 2300; --case-sets/--files 2347)")
    parser.add_argument("--models", type=int,
                        help="models (default 1, >1 adds paired comparisons; --case-sets/--files 100)")
    parser.add_argument("--sample", type=int, default=10,
                        help="resamples the recompute method actually runs with radrank's metrics (default 10)")
    parser.add_argument("--lib-sample", type=int, default=2,
                        help="resamples recomputed with the reference libraries (default 2; 0 skips)")
    parser.add_argument("--case-sets", action="store_true",
                        help="cost on equal vs many distinct case sets, this checkout vs --against")
    parser.add_argument("--files", action="store_true", help="size of the per-model files, this checkout vs --against")
    parser.add_argument("--against", default="HEAD", help="the revision measured in the same run (default HEAD)")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads in --case-sets/--files (default 1)")
    args = parser.parse_args(argv)
    if args.case_sets or args.files:
        args.cases, args.models = args.cases or 2347, args.models or 100
        return case_sets(args) if args.case_sets else files(args)
    args.cases, args.models = args.cases or 2300, args.models or 1

    boards = leaderboard(args.cases * args.models, n_models=args.models, seed=SEED)
    leaves = [leaf for name in METRICS for leaf in metrics.leaves(name)]
    n_pairs = sum(len(df) for df in boards.values())
    print(f"{args.n_boot:,} resamples over {args.cases:,} cases x {args.models} model(s) = {n_pairs:,} "
          f"synthetic pairs; leaves: {', '.join(leaf.name for leaf in leaves)}")

    # --- exact method: score once, bootstrap from per-sample statistics ---
    metrics.score("rouge", boards["model_1"].iloc[:5])  # warm-up (imports)
    start = time.perf_counter()
    extras, scores = {}, {}
    for m, pairs in boards.items():
        extras[m] = components(pairs, metrics.score("bleu2", pairs), seed=1000 + len(extras))
        extras[m].pop("bleu2")
        scores[m] = score_all(pairs, extras[m])
    scoring_s = time.perf_counter() - start
    start = time.perf_counter()
    result = bootstrap(scores, leaves, n_boot=args.n_boot, seed=SEED)
    exact_s = time.perf_counter() - start
    exact_runs = len(METRICS) * args.models
    exact_pair_scorings = len(METRICS) * n_pairs

    # --- recompute method, on a sample of the resamples ---
    cases = result.cases
    idx = resample_indices(len(cases), args.n_boot, SEED)
    reps = result.replicates.set_index(["model", "metric", "bootstrap"])["value"]
    sample = np.unique(np.linspace(0, args.n_boot - 1, min(args.sample, args.n_boot)).astype(int))
    recompute_s, worst = 0.0, 0.0
    for b in sample:
        for m, pairs in boards.items():
            start = time.perf_counter()
            res_pairs, res_extra = resampled(pairs, extras[m], cases, idx[b])
            values = leaf_values(score_all(res_pairs, res_extra), leaves)
            recompute_s += time.perf_counter() - start
            for name, v in values.items():
                worst = max(worst, abs(v - reps[m, name, b]))
    assert worst <= 1e-9, f"recompute differs from the exact bootstrap by {worst:.3g}"
    per_resample = recompute_s / len(sample)
    recompute_total = per_resample * args.n_boot + scoring_s  # + the point estimate on all cases
    recompute_runs = len(METRICS) * args.models * (args.n_boot + 1)
    recompute_pair_scorings = len(METRICS) * n_pairs * (args.n_boot + 1)

    lib_worst, lib_per_resample = None, None
    lib_sample = sample[: args.lib_sample]
    if len(lib_sample):
        lib_s, lib_worst = 0.0, 0.0
        for b in lib_sample:
            for m, pairs in boards.items():
                start = time.perf_counter()
                res_pairs, _ = resampled(pairs, {}, cases, idx[b])
                values = library_leaves(res_pairs)
                lib_s += time.perf_counter() - start
                for name, v in values.items():
                    lib_worst = max(lib_worst, abs(v - reps[m, name, b]))
        assert lib_worst <= 1e-9, f"library recompute differs from the exact bootstrap by {lib_worst:.3g}"
        lib_per_resample = lib_s / len(lib_sample)

    print()
    header = f"{'method':<44} {'metric runs':>12} {'pair scorings':>15} {'seconds':>10}"
    print(header)
    print("-" * len(header))
    print(f"{'exact: score once (radrank metrics)':<44} {exact_runs:>12,} {exact_pair_scorings:>15,} "
          f"{scoring_s:>10.2f}")
    print(f"{'exact: bootstrap() from per-sample stats':<44} {0:>12,} {0:>15,} {exact_s:>10.2f}")
    print(f"{'exact: total':<44} {exact_runs:>12,} {exact_pair_scorings:>15,} {scoring_s + exact_s:>10.2f}")
    print(f"{'recompute per resample (radrank metrics)':<44} {recompute_runs:>12,} {recompute_pair_scorings:>15,} "
          f"{recompute_total:>10.1f}  EXTRAPOLATED from {len(sample)} resamples ({per_resample:.3f} s each)")
    if lib_per_resample is not None:
        lib_runs = len(LEXICAL) * args.models * (args.n_boot + 1)
        lib_total = lib_per_resample * (args.n_boot + 1)
        print(f"{'recompute per resample (reference libraries)':<44} {lib_runs:>12,} "
              f"{len(LEXICAL) * n_pairs * (args.n_boot + 1):>15,} {lib_total:>10.1f}  EXTRAPOLATED from "
              f"{len(lib_sample)} resamples ({lib_per_resample:.2f} s each; bleu2, bleu4, rouge only)")
    print()
    ratio = recompute_runs / exact_runs
    print(f"metric evaluations: recompute / exact = {recompute_runs:,} / {exact_runs:,} = {ratio:,.0f}x fewer "
          f"(goal >= 1000x: {'met' if ratio >= 1000 else 'NOT met'})")
    print(f"time (radrank metrics both ways): {recompute_total:.1f} s extrapolated vs {scoring_s + exact_s:.2f} s = "
          f"{recompute_total / (scoring_s + exact_s):,.0f}x; bootstrap() alone: {exact_s:.3f} s for "
          f"{args.n_boot:,} resamples x {len(leaves)} leaves x {args.models} model(s)")
    print(f"exactness on the sampled resamples: max |exact - recompute| = {worst:.2e} (radrank metrics)"
          + (f", {lib_worst:.2e} (reference libraries)" if lib_worst is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
