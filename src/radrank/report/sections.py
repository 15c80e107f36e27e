"""The report's content: one dataset × split's page, its summary on the index page, the meta-evaluation
and the provenance — HTML, the Markdown summary, and the figures (SVG text) each part shows."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from radrank import metrics
from radrank.leaderboard import CASE_SET_COLUMNS, FAILURE_COLUMNS, META_COLUMNS, POLICY_COLUMNS, rexrank_columns
from radrank.report import figures
from radrank.report.data import Group, rows_by_model
from radrank.report.page import (MISSING, PAGE_ROWS, Cell, Table, count, details, esc, figure, html_link,
                                 is_missing, md_link, md_text, num, percent, pval, slug)
from radrank.stats import ranks

HEADLINE_LIMIT = 8
DROP_ROWS_SHOWN = 50
GLANCE_ROWS = 10  # the index page shows each leaderboard's first rows (and the models it does not rank)
TIED_SHOWN = 2  # names shown in a "Tied with" cell; the rest in its tooltip and in the CSV
PER_SAMPLE_TAU_ROWS = 20_000  # above this many (model, case) pairs the per-sample τ uses a fixed random subset
RANK_COLUMNS = ("Rank CI", "Rank CI low", "Rank CI high", "Rank CI cases", "P(rank=1)", "Rank set", "Rank set low",
                "Rank set high", "Tier", "Tied with")
COUNT_COLUMNS = ("n", "Dropped", "Scored as empty")
COVERAGE_COLUMNS = ("Coverage", "Cases", "Flag")  # coverage of the dataset's cases; a flag says why not ranked


@dataclass
class Part:
    """One rendered part of the page."""

    html: list = field(default_factory=list)
    markdown: list = field(default_factory=list)
    figures: dict = field(default_factory=dict)  # relative file name -> SVG text
    data: dict = field(default_factory=dict)  # table id -> rows of a paged table (page.Table.data)
    toc: list = field(default_factory=list)  # (anchor, title, [(anchor, title)])


def headline_leaves(group: Group) -> list[str]:
    """The rank leaf, then ReXrank's columns, then the other computed leaves; no counts; at most 8."""
    computed = {leaf.name: leaf for leaf in group.leaves if not leaf.is_count}
    estimated = set(group.summary.loc[np.isfinite(group.summary["estimate"].astype(float)), "metric"])
    order = [group.rank_leaf] + [col.leaf for col in rexrank_columns() if not col.reciprocal] + list(computed)
    out = [name for name in dict.fromkeys(order) if name in computed and name in estimated]
    return out[:HEADLINE_LIMIT]


def _metric_columns(board) -> list[str]:
    """The leaderboard's metric columns, in its order: numeric columns that are not its rank, meta, count or coverage
    columns nor an interval bound, with at least one value (a metric that was not run has no column, or an empty
    one)."""
    import pandas as pd

    skip = {"Rank", *META_COLUMNS, *COUNT_COLUMNS, *COVERAGE_COLUMNS, "Ranked by", "rank_metric", "model",
            *RANK_COLUMNS, *CASE_SET_COLUMNS,  # the case-set counts are in the CSV, not metric columns
            *_failure_columns(board)}  # shown together in the judge-failure cell
    return [c for c in board.columns if c not in skip and not str(c).endswith((" CI low", " CI high"))
            and pd.api.types.is_numeric_dtype(board[c]) and board[c].notna().any()]


FAILURE_MARK = " failed share"  # the column that names a judge's failure columns (radrank.leaderboard)
KIND_SHOWN = {"unparsed": "unparsed", "refusals": "refusals", "truncated": "truncated", "empty": "empty",
              "request errors": "request errors"}


def judge_labels(board) -> list[str]:
    """The LLM judges with failure columns on the leaderboard, in its order."""
    return [str(c)[:-len(FAILURE_MARK)] for c in board.columns if str(c).endswith(FAILURE_MARK)]


def _failure_columns(board) -> list[str]:
    return [f"{label} {suffix}" for label in judge_labels(board)
            for suffix in (*FAILURE_COLUMNS, *POLICY_COLUMNS.values())]


def failure_text(r, label: str) -> tuple[str, bool]:
    """One judge's failures of one model in words, and whether a failure policy flips its rank: "GREEN 3 of 200
    failed (1.5%): unparsed 2, truncated 1; 5 retried; rank 2 (failures excluded), 4 (worst), 1 (best)"."""
    judged, failed = r.get(f"{label} judged"), r.get(f"{label} failed")
    if is_missing(judged):
        return MISSING, False
    kinds = [f"{shown} {count(r.get(f'{label} {column}'))}" for column, shown in KIND_SHOWN.items()
             if _number(r.get(f"{label} {column}")) > 0]
    text = f"{label} {count(failed)} of {count(judged)} failed ({percent(r.get(f'{label} failed share'))})"
    text += (": " + ", ".join(kinds)) if kinds else ""
    retried = _number(r.get(f"{label} retried"))
    text += f"; {count(retried)} retried" if retried > 0 else ""
    ranks = [_number(r.get(f"{label} {POLICY_COLUMNS[p]}")) for p in ("excluded", "worst", "best")]
    if all(np.isfinite(ranks)):
        text += (f"; rank {int(ranks[0])} (failures excluded), {int(ranks[1])} (scored worst), "
                 f"{int(ranks[2])} (scored best)")
    return text, all(np.isfinite(ranks)) and len(set(ranks)) > 1


def _failure_cell(r, labels) -> Cell:
    """Every judge's failures of the model; a failure policy that flips its rank is marked."""
    parts = [failure_text(r, label) for label in labels]
    html = "<br>".join(esc(text) + ('<span class="flag">a failure policy changes this rank</span>'
                                    if flipped else "") for text, flipped in parts)
    shares = [_number(r.get(f"{label}{FAILURE_MARK}")) for label in labels]
    return Cell(html, max((x for x in shares if np.isfinite(x)), default=float("nan")), raw=True, cls="fails",
                md="; ".join(text + (" (a failure policy changes this rank)" if flipped else "")
                             for text, flipped in parts))


def _with_ci(row, column) -> str:
    value = num(row[column])
    low, high = row.get(f"{column} CI low"), row.get(f"{column} CI high")
    if not is_missing(low):
        return f"{value} [{num(low)}, {num(high)}]"
    return value


def _text(x) -> str:
    return "" if is_missing(x) else str(x)


def _minus(text: str) -> str:
    return text.replace("-", "\u2212")


def _value_ci(value, low, high) -> str:
    """A value with its interval on a smaller second line (HTML, escaped)."""
    shown = esc(_minus(num(value)))
    if is_missing(low) and is_missing(high):
        return shown
    lo, hi = _minus(num(low)), _minus(num(high))
    dash = " \u2013 " if "\u2212" in lo + hi else "\u2013"  # −0.37 – −0.12, but 0.60–0.70
    return f'{shown}<span class="ci">{esc(lo)}{dash}{esc(hi)}</span>'


def _rank_cell(r) -> Cell:
    """The rank (— for a model the leaderboard does not rank) with its rank interval below it."""
    interval = _text(r.get("Rank CI")).strip()
    if not interval and not is_missing(r.get("Rank CI low")):
        interval = f"[{count(r.get('Rank CI low'))}, {count(r.get('Rank CI high'))}]"
    text = esc(count(r.get("Rank"))) + (f'<span class="ci">{esc(interval)}</span>' if interval else "")
    shared = r.get("Rank CI cases")
    on = "" if is_missing(shared) else f" on the {count(shared)} cases the ranked models share"
    return Cell(text, _number(r.get("Rank")), raw=True, md=count(r.get("Rank")),
                title=f"rank interval {interval}{on}" if interval else None)


def _flag(r) -> str:
    return _text(r.get("Flag")).strip()


def _model_cell(r) -> Cell:
    """The display name, and the leaderboard's flag (e.g. too few cases scored to rank) as a visible marker."""
    flag = _flag(r)
    text = (html_link(esc(r["Model Name"]), r.get("Model URL"))
            + (f'<span class="flag">\u2691 {esc(flag)}</span>' if flag else ""))
    return Cell(text, cls="nm", raw=True, md=md_link(r["Model Name"], r.get("Model URL")))


def _tied_cell(value) -> Cell:
    names = [n for n in _text(value).split("; ") if n]
    if not names:
        return Cell(MISSING)
    if len(names) <= TIED_SHOWN:
        return Cell("; ".join(names), cls="tied")
    return Cell("; ".join(names[:TIED_SHOWN]) + f" and {len(names) - TIED_SHOWN} more", cls="tied",
                title="; ".join(names))


def _number(x) -> float:
    try:
        return float("nan") if is_missing(x) else float(x)
    except (TypeError, ValueError):
        return float("nan")


def _column(board, name) -> np.ndarray:
    """A numeric leaderboard column as floats (NaN where empty or absent)."""
    import pandas as pd

    if name not in board.columns:
        return np.full(len(board), np.nan)
    return pd.to_numeric(board[name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


# --- leaderboard -------------------------------------------------------------------------------------------


def leaderboard_table(group: Group) -> Table:
    """Every model: rank (interval below), name (flag below), P(rank=1), tied with, each metric (interval below),
    the counts and, where the leaderboard has them, coverage and cases. Rank and model stay in view when the
    table scrolls sideways."""
    board = group.board
    cols = _metric_columns(board)
    counts = [c for c in COUNT_COLUMNS if c in board.columns]
    coverage = [c for c in ("Coverage", "Cases") if c in board.columns]
    tiers = "Tier" in board.columns and any(np.isfinite(_column(board, "Tier")))
    judges = judge_labels(board)
    header = ["Rank", "Model", *(["Tier"] if tiers else []), "P(rank=1)", "Tied with", *cols, *counts, *coverage,
              *(["Judge failures"] if judges else [])]
    rows, classes = [], []
    for _, r in board.iterrows():
        rows.append([
            _rank_cell(r), _model_cell(r), *([_tier_cell(r)] if tiers else []),
            Cell(num(r.get("P(rank=1)")), _number(r.get("P(rank=1)"))),
            _tied_cell(r.get("Tied with")),
            *[Cell(_value_ci(r[c], r.get(f"{c} CI low"), r.get(f"{c} CI high")), _number(r[c]), raw=True)
              for c in cols],
            *[Cell(count(r.get(c)), _number(r.get(c)), title=DROPPED_TIP if c == "Dropped" and _number(r.get(c)) > 0
                   else None) for c in counts],
            *[Cell(percent(r.get(c)) if c == "Coverage" else count(r.get(c)), _number(r.get(c)),
                   title=COVERAGE_TIP if c == "Coverage" else None) for c in coverage],
            *([_failure_cell(r, judges)] if judges else []),
        ])
        classes.append(" ".join(c for c in ("flagged" if _flag(r) else "", _tier_class(r) if tiers else "") if c))
    return Table(header, rows, text_columns=(1, 4 if tiers else 3), row_classes=classes, cls="board",
                 header_cls={0: "s0", 1: "s1"})


def _tier_cell(r) -> Cell:
    """The model's tier, its simultaneous rank set in the tooltip."""
    joint = _text(r.get("Rank set")).strip()
    return Cell(count(r.get("Tier")), _number(r.get("Tier")),
                title=f"tier {count(r.get('Tier'))}: no simultaneous comparison separates it from the tier's best; "
                      f"joint rank set {joint}" if joint else None)


def _tier_class(r) -> str:
    """Every other tier shaded, so the tiers read as bands."""
    tier = _number(r.get("Tier"))
    return "tier-even" if np.isfinite(tier) and int(tier) % 2 == 0 else ""


# "Dropped 1 · Coverage 100 %" is no contradiction: the two count different sets of cases
DROPPED_TIP = "cases of this submission listed as dropped in its drop file (Drop lists)"
COVERAGE_TIP = ("share of the dataset's cases this model was scored on; a case without a usable reference is "
                "dropped for every model and is not one of the dataset's cases")


def dropped_note(group: Group, base: str) -> str:
    """Under the leaderboard, when a model has drops: why Dropped and Coverage can both be high, and the link to
    the drop lists."""
    board = group.board
    if "Dropped" not in board.columns or not any(_number(v) > 0 for v in board["Dropped"]):
        return ""
    coverage = (" Coverage is the share of the dataset's cases a model was scored on: a case without a usable "
                "reference (dropped for every model) is not one of the dataset's cases, so a model can show "
                "Dropped 1 and Coverage 100%." if "Coverage" in board.columns else "")
    return (f"<p class=\"note\">Dropped: the cases of each submission listed as dropped in its drop file.{coverage} "
            f"Every dropped case, with its reason: <a href=\"#{base}-drops\">Drop lists</a>.</p>")


def markdown_leaderboard(group: Group) -> Table:
    """The leaderboard for report.md: the name links to its Model URL when that is an http(s) URL."""
    board = group.board
    cols = _metric_columns(board)
    counts = [c for c in COUNT_COLUMNS if c in board.columns]
    coverage = [c for c in ("Coverage", "Cases") if c in board.columns]
    flags = "Flag" in board.columns and any(_flag(r) for _, r in board.iterrows())
    tiers = "Tier" in board.columns and any(np.isfinite(_column(board, "Tier")))
    judges = judge_labels(board)
    header = ["Rank", "Model", "Rank CI", *(["Tier", "Rank set"] if tiers else []), "P(rank=1)", *cols, *counts,
              *coverage, *(["Judge failures"] if judges else []), *(["Flag"] if flags else [])]
    rows = [[count(r.get("Rank")), Cell(r["Model Name"], md=md_link(r["Model Name"], r.get("Model URL"))),
             _text(r.get("Rank CI")) or MISSING,
             *([count(r.get("Tier")), _text(r.get("Rank set")) or MISSING] if tiers else []),
             num(r.get("P(rank=1)")), *[_with_ci(r, c) for c in cols],
             *[count(r.get(c)) for c in counts],
             *[percent(r.get(c)) if c == "Coverage" else count(r.get(c)) for c in coverage],
             *([_failure_cell(r, judges)] if judges else []),
             *([_flag(r)] if flags else [])]
            for _, r in board.iterrows()]
    return Table(header, rows)


def glance_table(group: Group, rows_shown: int = GLANCE_ROWS) -> tuple[Table, int]:
    """The index page's view of a leaderboard: its first ``rows_shown`` ranked models and (up to as many) models
    it does not rank, with the rank metric's estimate and interval; and how many models it leaves out."""
    board = group.board
    rank = _column(board, "Rank")
    ranked = [i for i in range(len(board)) if np.isfinite(rank[i])][:rows_shown]
    unranked = [i for i in range(len(board)) if not np.isfinite(rank[i])][:rows_shown]
    leaf = group.summary[group.summary["metric"] == group.rank_leaf].set_index("model")
    coverage = "Coverage" in board.columns
    header = ["Rank", "Model", _label(group, group.rank_leaf), "P(rank=1)", "n", *(["Coverage"] if coverage else [])]
    rows, classes = [], []
    for i in ranked + unranked:
        r = board.iloc[i]
        model = r["model"]
        est = leaf["estimate"].get(model) if "estimate" in leaf else None
        rows.append([_rank_cell(r), _model_cell(r),
                     Cell(_value_ci(est, leaf["ci_lower"].get(model), leaf["ci_upper"].get(model)), _number(est),
                          raw=True),
                     Cell(num(r.get("P(rank=1)")), _number(r.get("P(rank=1)"))),
                     Cell(count(r.get("n")), _number(r.get("n"))),
                     *([Cell(percent(r.get("Coverage")), _number(r.get("Coverage")))] if coverage else [])])
        classes.append("flagged" if _flag(r) else "")
    table = Table(header, rows, text_columns=(1,), row_classes=classes, cls="board", header_cls={0: "s0", 1: "s1"})
    return table, len(board) - len(rows)


def _adjacent_rows(group: Group, level: float):
    pairs = group.rank_pairs
    names, order = group.names, group.order
    rows = []
    for a, b in zip(order, order[1:]):
        if (a, b) not in pairs:
            continue
        delta, lo, hi, p, n_common = pairs[a, b]
        distinct = "yes" if np.isfinite(p) and p < 1 - level else "no"
        rows.append([f"{names[a]} vs {names[b]}", Cell(num(delta), delta), f"[{num(lo)}, {num(hi)}]",
                     Cell(pval(p), p), Cell(n_common, n_common), distinct])
    return rows


# --- figures of one group -------------------------------------------------------------------------------


def _rank_part(group: Group, base: str, part: Part):
    order, names = group.order, group.names
    n = len(order)
    dist = group.ranks.pivot(index="model", columns="rank", values="probability").reindex(index=order,
                                                                                         columns=range(1, n + 1))
    board = group.board
    svg = figures.rank_figure([names[m] for m in order], dist.to_numpy(dtype="float64", na_value=np.nan),
                              _column(board, "Rank"), _column(board, "Rank CI low"), _column(board, "Rank CI high"),
                              name=f"{base}-ranks", title=f"Rank distribution on {_label(group, group.rank_leaf)}")
    part.figures[f"{group.dataset}/{group.split}/ranks.svg"] = svg
    n_boot = int(group.summary["n_bootstrap"].iloc[0]) if len(group.summary) else 0
    level = float(group.summary["level"].iloc[0]) if len(group.summary) else 0.95
    part.html.append(figure(svg, (
        f"Each model's rank on every one of the {n_boot} shared bootstrap resamples: cell (model, k) is the share "
        f"of resamples on which the model ranks k-th; the dot is its rank on all cases and the red line its "
        f"{level:.0%} rank interval (under the rank in the leaderboard; Rank CI in its CSV). A model whose line "
        "overlaps another's cannot be told apart from it with confidence.")))


def _label(group: Group, leaf: str) -> str:
    rows = group.summary[group.summary["metric"] == leaf]
    return str(rows["label"].iloc[0]) if len(rows) else leaf


def _forest_part(group: Group, base: str, headline: list, part: Part):
    order, names = group.order, group.names
    panels = []
    for leaf in headline:
        # a model without an estimate of the leaf (not scored on it) has an empty row
        rows = group.summary[group.summary["metric"] == leaf].set_index("model").reindex(order)
        panels.append({
            "label": _label(group, leaf),
            "estimate": rows["estimate"].to_numpy(dtype="float64", na_value=np.nan),
            "lower": rows["ci_lower"].to_numpy(dtype="float64", na_value=np.nan),
            "upper": rows["ci_upper"].to_numpy(dtype="float64", na_value=np.nan),
            "higher_is_better": group.leaf(leaf).higher_is_better, "accent": leaf == group.rank_leaf,
        })
    svg = figures.forest_figure([names[m] for m in order], panels, name=f"{base}-forest",
                                title="Estimates with bootstrap intervals, models in rank order")
    part.figures[f"{group.dataset}/{group.split}/forest.svg"] = svg
    level = float(group.summary["level"].iloc[0])
    part.html.append(figure(svg, (
        f"Point estimate on all cases (dot) and {level:.0%} percentile bootstrap interval (line) per model and "
        "headline metric; models in leaderboard order, the metric that ranks the table in red.")))


def comparison_matrix(group: Group, level: float):
    """(Δ row − column, advantage (Δ oriented so + = row better), Holm-adjusted p, raw p) in board order."""
    order = group.order
    pairs = group.rank_pairs
    n = len(order)
    delta, raw = np.full((n, n), np.nan), np.full((n, n), np.nan)
    for i, a in enumerate(order):
        for j, b in enumerate(order):
            if i != j and (a, b) in pairs:
                delta[i, j], raw[i, j] = pairs[a, b][0], pairs[a, b][3]
    iu = np.triu_indices(n, 1)
    adjusted = np.full((n, n), np.nan)
    adjusted[iu] = ranks.holm(raw[iu])
    adjusted.T[iu] = adjusted[iu]
    sign = 1.0 if group.leaf(group.rank_leaf).higher_is_better else -1.0
    return delta, sign * delta, adjusted, raw


def _comparison_part(group: Group, base: str, level: float, part: Part):
    order, names = group.order, group.names
    delta, advantage, adjusted, raw = comparison_matrix(group, level)
    alpha = 1 - level
    significant = np.isfinite(adjusted) & (adjusted < alpha)
    label = _label(group, group.rank_leaf)
    svg = figures.comparison_figure([names[m] for m in order], advantage, delta, significant, label=label,
                                    name=f"{base}-pairs", title=f"Paired differences on {label}, every pair")
    part.figures[f"{group.dataset}/{group.split}/comparisons.svg"] = svg
    n = len(order)
    m = n * (n - 1) // 2
    part.html.append(figure(svg, (
        f"Cell (row, column) is the difference row − column on {label} over the cases both models have, "
        "coloured by how much better (blue) or worse (red) the row model is. * = significant at "
        f"{level:.0%} after Holm's step-down correction over all {m} pairs (family-wise error ≤ {alpha:.0%}); "
        "p-values are two-sided paired bootstrap p-values.")))
    adjacent = _adjacent_rows(group, level)
    if adjacent:
        part.html.append(f"<p>Adjacent ranks on {esc(label)}: difference (upper − lower row), its interval and the "
                         "two-sided paired bootstrap p-value, uncorrected (each line answers one question).</p>")
        part.html.append(Table(["Pair", "Δ", "Interval", "p", "Common cases", f"Distinct at {level:.0%}"],
                               adjacent, text_columns=(0,)).html())
    rows = []
    pairs = group.rank_pairs
    for i, a in enumerate(order):
        for j in range(i + 1, n):
            b = order[j]
            if (a, b) not in pairs:
                continue
            d, lo, hi, p, n_common = pairs[a, b]
            rows.append([names[a], names[b], Cell(num(d), d), f"[{num(lo)}, {num(hi)}]", Cell(pval(p), p),
                         Cell(pval(adjusted[i, j]), adjusted[i, j]), Cell(count(n_common), _number(n_common)),
                         Cell("yes" if significant[i, j] else "no", cls="sig" if significant[i, j] else "")])
    table = Table(["Model A", "Model B", "Δ (A − B)", "Interval", "p", "p (Holm)", "Common cases",
                   f"Significant at {level:.0%} (Holm)"], rows, text_columns=(0, 1))
    table_id = f"{base}-allpairs"
    paging = ""
    if table.is_paged():
        part.data[table_id] = table.data()
        paging = (f"<p class=\"note\">{len(rows)} rows, {PAGE_ROWS} at a time (Previous / Next below the table); "
                  "a click on a header sorts all of them.</p>")
    part.html.append(details(f"All {len(rows)} pairs with Holm-adjusted p-values",
                             paging + table.html(page_id=table_id)))


def kendall_matrix(columns: list, orientation: list) -> np.ndarray:
    """Kendall τ-b between every two of ``columns`` (arrays of equal length), over the positions where both
    are finite; each column multiplied by its orientation (+1 higher is better, −1 lower is better)."""
    k = len(columns)
    tau = np.eye(k)
    data = [np.asarray(c, dtype="float64") * o for c, o in zip(columns, orientation)]
    for i in range(k):
        for j in range(i + 1, k):
            ok = np.isfinite(data[i]) & np.isfinite(data[j])
            t = np.nan
            if ok.sum() >= 2:
                t = ranks.kendall_tau_b(data[i][ok], data[j][ok])
            tau[i, j] = tau[j, i] = t
    for i in range(k):
        if np.isfinite(data[i]).sum() < 2 or np.nanstd(data[i]) == 0:
            tau[i, i] = np.nan
    return tau


def per_sample_rows(n: int, limit: int = PER_SAMPLE_TAU_ROWS):
    """(row positions, panel title) of the per-sample τ: every (model, case) pair up to ``limit``, else a subset of
    ``limit`` drawn with a fixed seed (τ's standard error there is about 0.005; its cost grows as n log n per pair)."""
    if n <= limit:
        return np.arange(n), f"per sample ({n} model × case pairs)"
    rows = np.sort(np.random.default_rng(0).choice(n, limit, replace=False))
    return rows, f"per sample ({limit:,} of {n:,} model × case pairs, drawn with a fixed seed)"


def _agreement_part(group: Group, base: str, part: Part):
    leaves = [leaf for leaf in group.leaves if not leaf.is_count]
    est = group.summary.pivot(index="model", columns="metric", values="estimate").reindex(group.order)
    leaves = [leaf for leaf in leaves if leaf.name in est.columns and np.isfinite(est[leaf.name]).sum() >= 2]
    panels = []
    if len(leaves) >= 2:
        panels.append({"title": f"across models ({len(group.order)} point estimates)",
                       "labels": [leaf.label for leaf in leaves],
                       "tau": kendall_matrix([est[leaf.name].to_numpy() for leaf in leaves],
                                             [1 if leaf.higher_is_better else -1 for leaf in leaves])})
    cols = [c for c in group.columns if np.isfinite(group.values[c.column]).sum() >= 2]
    if len(cols) >= 2:
        rows, title = per_sample_rows(len(group.values))
        panels.append({"title": title, "labels": [c.label for c in cols],
                       "tau": kendall_matrix([group.values[c.column].to_numpy()[rows] for c in cols],
                                             [1 if c.higher_is_better else -1 for c in cols])})
    if not panels:
        part.html.append("<p class=\"note\">Fewer than two metrics: no agreement to show.</p>")
        return
    svg = figures.agreement_figure(panels, name=f"{base}-agreement", title="Do the metrics agree on the order?")
    part.figures[f"{group.dataset}/{group.split}/agreement.svg"] = svg
    part.html.append(figure(svg, (
        "Kendall τ-b between metrics, each oriented so that higher means better (lower-is-better metrics such as "
        "RadCliQ are negated): 1 = same order, 0 = unrelated, −1 = opposite order. Left: over the models' point "
        "estimates (does the metric rank the models alike?); right: over every scored (model, case) pair (do "
        "they agree on which reports are good?). Corpus metrics appear on the right through their per-sample "
        "score where the metric has one (e.g. sentence BLEU-4).")))


def distribution_columns(group: Group, headline: list) -> list:
    rank_col = group.rank_column()
    order = ([rank_col] if rank_col else []) + \
        [c for leaf in headline for c in group.columns if c.leaf == leaf] + \
        [c for c in group.columns if c.leaf is None]
    seen, out = set(), []
    for c in order:
        if c.column not in seen and np.isfinite(group.values[c.column]).any():
            seen.add(c.column)
            out.append(c)
    # a violin per model and panel: fewer panels when there are many models keeps the page light
    return out[:HEADLINE_LIMIT if len(group.order) <= 40 else HEADLINE_LIMIT // 2]


def _distribution_part(group: Group, base: str, headline: list, part: Part):
    cols = distribution_columns(group, headline)
    if not cols:
        part.html.append("<p class=\"note\">No per-sample values to show.</p>")
        return
    order, names = group.order, group.names
    at = rows_by_model(group.values)  # each model's rows, in order (no frame per model)
    rank_col = group.rank_column()
    empty = np.zeros(0)
    panels = [{"label": c.label, "values": [values[at[m]] if m in at else empty for m in order],
               "higher_is_better": c.higher_is_better, "accent": rank_col is not None and c.column == rank_col.column}
              for c in cols for values in [group.values[c.column].to_numpy(dtype="float64")]]
    svg = figures.distribution_figure([names[m] for m in order], panels, name=f"{base}-distributions",
                                      title="Per-sample scores")
    part.figures[f"{group.dataset}/{group.split}/distributions.svg"] = svg
    part.html.append(figure(svg, (
        "Distribution of the per-sample values per model (binned density), with the interquartile range (bar) "
        "and median (white tick); models in leaderboard order. A mass at the bottom is a set of cases the model "
        "fails outright — see the cases below.")))


# --- drill-down -----------------------------------------------------------------------------------------


def explanation_html(explanation) -> str:
    """A judge's :class:`~radrank.metrics.base.Explanation` of one case, escaped."""
    if explanation is None:
        return ""
    folded = details(explanation.details_title, f"<pre>{esc(explanation.details)}</pre>") if explanation.details else ""
    if explanation.failure is not None:
        return f"<span class=\"err\">{esc(explanation.label)}: {esc(explanation.failure)}</span>{folded}"
    return f"<b>{esc(explanation.label)}</b> " + "<br>".join(esc(line) for line in explanation.summary) + folded


def _context(row) -> str:
    if _text(row.get("context")):
        return _text(row["context"])
    parts = [f"{k}: {_text(row.get(k))}" for k in ("age", "sex", "indication", "comparison") if _text(row.get(k))]
    return "; ".join(parts)


def _cases_part(group: Group, n_cases: int, part: Part):
    rank_col = group.rank_column()
    if rank_col is None or group.cases is None or group.cases.empty:
        part.html.append("<p class=\"note\">No per-sample value of the rank metric: no cases to show.</p>")
        return
    names = group.names
    judges = [metrics.get(m) for m in group.metric_names if metrics.get(m).explained_by]
    direction = "lowest" if rank_col.higher_is_better else "highest"
    part.html.append(
        f"<p>For each model, its {n_cases} worst and {n_cases} best cases on {esc(rank_col.label)} (worst = "
        f"{direction} value; cases without a value are left out; ties broken by sample id), with every metric's "
        "per-sample value" + (" and the judges' explanations" if judges else "") + ".</p>")
    header = ["Case", "Scores", "Reference", "Hypothesis", "Context"]
    if judges:
        header.append("Judges")
    others = [c for c in group.columns if c.column != rank_col.column]
    # per model its chosen cases and how many values it has: one pass over the frames, not one per model (at 101
    # models x 10,000 cases, comparing every row's model name once per model was most of this section's CPU)
    chosen: dict = {}
    for r in group.cases.to_dict("records"):  # plain mappings, made in one call (one per model cost 3x as much)
        chosen.setdefault(r["model"], []).append(r)
    finite = np.isfinite(group.values[rank_col.column].to_numpy("float64"))
    scored_by_model = {model: int(finite[at].sum()) for model, at in rows_by_model(group.values).items()}
    for model in group.order:
        rows = chosen.get(model)
        if not rows:
            continue
        table_rows = []
        for r in rows:
            values = "<br>".join([f"<b>{esc(rank_col.label)} {num(r[rank_col.column])}</b>"]
                                 + [f"{esc(c.label)} {num(r[c.column])}" for c in others])  # the cell does not wrap
            row = [Cell(f"{esc(r['kind'])} {r['position']}<br><span class=\"muted\">{esc(r['sample_id'])}</span>",
                        raw=True),
                   Cell(values, cls="kv", raw=True),
                   Cell(_text(r.get("reference")), cls="text"), Cell(_text(r.get("hypothesis")), cls="text"),
                   Cell(_context(r), cls="text ctx")]
            if judges:
                row.append(Cell("<br>".join(h for h in (explanation_html(j.explain(r)) for j in judges) if h),
                                cls="text judge",
                                raw=True))
            table_rows.append(row)
        scored = int(scored_by_model.get(model, 0))
        table = Table(header, table_rows, sortable=False, text_columns=range(len(header)))
        part.html.append(details(f"<b>{esc(names[model])}</b> <span class=\"badge\">{scored} scored cases</span>",
                                 table.html(), cls="model"))


def _drops_part(group: Group, link_base: str | None, part: Part):
    names = group.names
    rows, lists = [], []
    for model in group.order:
        drops = group.drops.get(model)
        counts = drops["action"].value_counts() if drops is not None and len(drops) else {}
        path = group.drop_paths.get(model)
        href = os.path.relpath(path, link_base) if (path and link_base) else path
        link = f"<a href=\"{esc(href)}\">{esc(os.path.basename(path))}</a>" if path else "–"
        listed = 0 if drops is None else len(drops)
        rows.append([names[model], Cell(int(counts.get("dropped", 0)), int(counts.get("dropped", 0))),
                     Cell(int(counts.get("scored_as_empty", 0)), int(counts.get("scored_as_empty", 0))),
                     Cell(int(counts.get("truncated", 0)), int(counts.get("truncated", 0))),
                     Cell(listed, listed), Cell(link, raw=True)])
        if listed:
            shown = drops.head(DROP_ROWS_SHOWN)
            cols = [c for c in ("sample_id", "reason", "action", "detail") if c in shown.columns]
            table = Table(cols, shown[cols].astype(str).values.tolist(), text_columns=range(len(cols)))
            more = (f"<p class=\"note\">{listed - DROP_ROWS_SHOWN} more rows in {link}.</p>"
                    if listed > DROP_ROWS_SHOWN else "")
            lists.append(details(f"{esc(names[model])}: {listed} listed", table.html() + more, cls="model"))
    part.html.append("<p>Every sample not scored as given, per model (the drop files the workflow wrote; "
                     "links are relative to this page in results/report/).</p>")
    part.html.append(Table(["Model", "Dropped", "Scored as empty", "Truncated", "Listed", "File"], rows,
                           text_columns=(0, 5)).html())
    part.html.extend(lists)


# --- one group ----------------------------------------------------------------------------------------------

SECTIONS = (("leaderboard", "Leaderboard"), ("ranks", "Rank uncertainty"), ("forest", "Estimates"),
            ("pairs", "Paired comparisons"), ("agreement", "Metric agreement"), ("distributions", "Distributions"),
            ("cases", "Worst and best cases"), ("drops", "Drop lists"), ("provenance", "Provenance"))


def demo_notice(group: Group) -> str:
    """What the page must say first when a metric scored with demo weights (``make mrscore-demo``'s tiny random
    models: its score files' provenance says ``demo``): its numbers mean nothing. Empty otherwise."""
    demo = sorted({metric for (_, metric), p in group.provenance.get("scores", {}).items()
                   if isinstance(p, dict) and isinstance(p.get("models"), dict) and p["models"].get("demo")})
    if not demo:
        return ""
    labels = ", ".join(_label(group, m) if m in set(group.summary["metric"]) else m for m in demo)
    return (f"Demo weights: {labels} on this page was scored by tiny random models (make mrscore-demo); its "
            "numbers are meaningless and prove only that the path runs.")


def group_part(group: Group, *, level: float, n_cases: int, link_base: str | None,
               config_hash: str | None = None) -> Part:
    """The page of one dataset × split: every section, and its part of report.md."""
    part = Part()
    base = slug(group.dataset, group.split)
    sub = [(f"{base}-{k}", t) for k, t in SECTIONS]
    title = f"{group.dataset} — {group.split}"
    part.toc.append((base, title, sub))
    ranked_by = str(group.board["Ranked by"].iloc[0])
    part.html.append(f"<section id=\"{base}\"><h1>{esc(title)}</h1>")
    part.html.append(f"<p>Ranked by {esc(ranked_by)}. {len(group.order)} models; intervals (the smaller second "
                     f"line) are {level:.0%} percentile bootstrap intervals. Click a column header to sort.</p>")
    demo = demo_notice(group)
    if demo:
        part.html.append(f"<p class=\"note demo\"><strong>{esc(demo)}</strong></p>")
    headline = headline_leaves(group)
    steps = {
        "leaderboard": lambda: part.html.append(leaderboard_table(group).html() + dropped_note(group, base)),
        "ranks": lambda: _rank_part(group, base, part),
        "forest": lambda: _forest_part(group, base, headline, part),
        "pairs": lambda: _comparison_part(group, base, level, part),
        "agreement": lambda: _agreement_part(group, base, part),
        "distributions": lambda: _distribution_part(group, base, headline, part),
        "cases": lambda: _cases_part(group, n_cases, part),
        "drops": lambda: _drops_part(group, link_base, part),
        "provenance": lambda: part.html.append(group_provenance_html(group, config_hash)),
    }
    for anchor, heading in sub:
        part.html.append(f"<h2 id=\"{anchor}\">{esc(heading)}</h2>")
        steps[anchor[len(base) + 1:]]()
    part.html.append("</section>")

    part.markdown += [f"## {md_text(title)}", "", *([f"**{md_text(demo)}**", ""] if demo else []),
                      f"Ranked by {md_text(ranked_by)}. Brackets: {level:.0%} percentile "
                      "bootstrap interval; Rank CI: the rank interval over the same resamples.", "",
                      markdown_leaderboard(group).markdown(), ""]
    adjacent = _adjacent_rows(group, level)
    if adjacent:
        part.markdown += [f"Adjacent ranks on {md_text(_label(group, group.rank_leaf))}: difference (upper − lower "
                          "row), its interval and the two-sided paired bootstrap p-value.", "",
                          Table(["Pair", "Δ", "Interval", "p", "Common cases", f"Distinct at {level:.0%}"],
                                adjacent).markdown(), ""]
    return part


# --- meta-evaluation ------------------------------------------------------------------------------------------

METAEVAL_COLUMNS = ("set", "metric", "label", "measure", "group", "estimate", "ci_lower", "ci_upper", "n", "n_ties",
                    "human_ceiling", "headline")


def metaeval_part(metaeval: dict, rank_leaves: set) -> Part:
    """"Can these metrics be trusted?": per set, a table of every row and a plot of its headline measure."""
    part = Part()
    sub = []
    part.html.append("<section id=\"metaeval\"><h2>Can these metrics be trusted?</h2><p>Agreement of each metric "
                     "with human judgement on each meta-evaluation set, with bootstrap intervals. The dashed "
                     "line is the human ceiling (agreement between human raters) where the set has one; the "
                     "metric that ranks the leaderboards is in red.</p>")
    part.markdown += ["## Can these metrics be trusted?", ""]
    for name in sorted(metaeval):
        table = metaeval[name]
        missing = [c for c in METAEVAL_COLUMNS if c not in table.columns]
        if missing:
            raise ValueError(f"meta-evaluation set {name!r}: missing column(s) {missing}")
        anchor = slug("metaeval", name)
        sub.append((anchor, str(name)))
        part.html.append(f"<h3 id=\"{anchor}\">{esc(name)}</h3>")
        head = table[table["headline"].astype(bool) & (table["group"].astype(str) == "all")]
        head = head.sort_values(["estimate", "metric"], ascending=[False, True], kind="stable")
        if len(head):
            measure = str(head["measure"].iloc[0])
            svg = figures.metaeval_figure(
                list(head["label"].astype(str)), head["estimate"], head["ci_lower"], head["ci_upper"],
                [m in rank_leaves for m in head["metric"]], head["human_ceiling"].astype("float64"),
                measure=measure, name=f"{anchor}-plot", title=f"{name}: {measure} with human judgement")
            part.figures[f"metaeval/{slug(name)}/agreement.svg"] = svg
            part.html.append(figure(svg, f"{esc(measure)} between each metric and the human ratings of {esc(name)} "
                                         "(all cases), best first, with its interval."))
        ordered = table.sort_values(["group", "measure", "estimate", "metric"], ascending=[True, True, False, True],
                                    kind="stable")
        rows = [[Cell(r["label"], cls="sig" if r["metric"] in rank_leaves else ""), r["measure"], r["group"],
                 Cell(f"{num(r['estimate'])} [{num(r['ci_lower'])}, {num(r['ci_upper'])}]", r["estimate"]),
                 Cell(count(r["n"]), _number(r["n"])), Cell(count(r["n_ties"]), _number(r["n_ties"])),
                 Cell(num(r["human_ceiling"]), _number(r["human_ceiling"]))]
                for _, r in ordered.iterrows()]
        t = Table(["Metric", "Measure", "Group", "Estimate [interval]", "n", "Ties", "Human ceiling"], rows,
                  text_columns=(0, 1, 2))
        part.html.append(details(f"All {len(rows)} rows of {esc(name)}", t.html(), open_=len(rows) <= 20))
        part.markdown += [f"### {md_text(name)}", "", t.markdown(), ""]
    part.html.append("</section>")
    part.toc.append(("metaeval", "Can these metrics be trusted?", sub))
    return part


# --- provenance ------------------------------------------------------------------------------------------------


def _compact(value) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(", ", ": "))


def _shown(value) -> str:
    """A provenance value as the table shows it: — for none (null, {}, [], ""), a flat mapping as "key: value; …",
    anything else as compact JSON."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value or MISSING
    if value is None or value == {} or value == [] or value == "":
        return MISSING
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        return "; ".join(f"{k}: {MISSING if v is None else v}" for k, v in sorted(value.items()))
    if isinstance(value, (dict, list)):
        return _compact(value)
    return str(value)


def _digest_cell(value) -> Cell:
    """A hash, abbreviated, the whole value in its tooltip."""
    text = _text(value)
    if not text:
        return Cell(MISSING)
    return Cell(text[:12] + "…" if len(text) > 14 else text, title=text if len(text) > 14 else None, cls="mono")


def provenance_rows(group: Group, config_hash: str | None = None):
    """(the statistics row, {metric key: [file labels]}, the submission rows) of one group."""
    s = group.provenance.get("statistics", {})
    stats = [group.key, s.get("radrank"), config_hash, s.get("n_bootstrap"), s.get("seed"), s.get("level"),
             s.get("n_cases"), s.get("method")]
    metric_rows = {}
    for (model, metric), p in sorted(group.provenance.get("scores", {}).items()):
        env = p.get("environment") or {}
        key = (metric, p.get("metric_version"), env.get("env"), _compact(p.get("models")),
               _compact(p.get("settings")), _compact(env.get("packages")), env.get("python"))
        metric_rows.setdefault(key, []).append(f"{group.key}/{model}")
    sources = []
    for model in group.order:
        p = group.provenance.get("pairs", {}).get(model) or {}
        src = p.get("sources") or {}
        sources.append([group.key, group.names[model], model, p.get("format"), src.get("path"), src.get("sha256"),
                        p.get("n_pairs")])
    return stats, metric_rows, sources


def _stats_table(rows) -> Table:
    return Table(["Dataset / split", "radrank", "Config hash", "Resamples", "Seed", "Level", "Cases", "Method"],
                 [[r[0], Cell(_shown(r[1]), cls="wrap"), _digest_cell(r[2]), *[_shown(v) for v in r[3:]]]
                  for r in rows], text_columns=(0, 1, 2, 7))


def _metric_table(metric_rows: dict) -> Table:
    rows = [[k[0], _shown(k[1]), _shown(k[2]), *[Cell(_shown(v), cls="wrap") for v in k[3:6]], _shown(k[6]),
             Cell(len(v), len(v))] for k, v in sorted(metric_rows.items(), key=lambda kv: tuple(map(str, kv[0])))]
    return Table(["Metric", "Version", "Environment", "Models and weights", "Settings", "Packages", "Python", "Files"],
                 rows, text_columns=(0, 2, 3, 4, 5))


def _sources_table(rows) -> Table:
    return Table(["Dataset / split", "Model", "Model id", "Format", "Source", "sha256", "Pairs"],
                 [[r[0], Cell(r[1], cls="wrap"), Cell(r[2], cls="wrap"), _shown(r[3]), Cell(_shown(r[4]), cls="wrap"),
                   _digest_cell(r[5]), Cell(count(r[6]), _number(r[6]))] for r in rows],
                 text_columns=(0, 1, 2, 3, 4, 5))


_METRIC_NOTE = ("<p class=\"note\">One row per distinct (metric, version, environment, models, settings, packages); "
                "Files counts the score files it covers. — : none recorded.</p>")


def group_provenance_html(group: Group, config_hash: str | None = None) -> str:
    stats, metric_rows, sources = provenance_rows(group, config_hash)
    return ("<p>What every number on this page rests on, from the metadata of the parquet files "
            "(radrank.io.read_provenance); hashes are abbreviated, the whole value in their tooltip.</p>"
            + details("Show provenance", "<h3>Statistics</h3>" + _stats_table([stats]).html() + "<h3>Metrics</h3>"
                      + _METRIC_NOTE + _metric_table(metric_rows).html() + "<h3>Submissions</h3>"
                      + _sources_table(sources).html()))


def provenance_part(stats_rows: list, metric_rows: dict) -> Part:
    """The index page's provenance: the statistics of every group and every distinct metric record; each group's
    submissions are on its page."""
    part = Part()
    part.toc.append(("provenance", "Provenance", []))
    body = ("<h3>Statistics</h3>" + _stats_table(stats_rows).html() + "<h3>Metrics</h3>" + _METRIC_NOTE
            + _metric_table(metric_rows).html()
            + "<p class=\"note\">Each submission's source file and hash: the Provenance section of its dataset × "
              "split page.</p>")
    part.html.append("<section id=\"provenance\"><h2>Provenance</h2><p>What every number rests on, from the "
                     "metadata of the parquet files (radrank.io.read_provenance).</p>"
                     + details("Show provenance", body) + "</section>")
    return part
