"""The human-readable report: every leaderboard with intervals, whether adjacent
ranks are distinguishable, and what was dropped. Markdown and standalone HTML
from the same tables."""

from __future__ import annotations

import html as _html
import math

from radrank.leaderboard import META_COLUMNS


def _fmt(x, decimals=3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{decimals}f}"
    return str(x)


def _p(p) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


class Table:
    def __init__(self, header, rows):
        self.header, self.rows = list(header), [list(map(str, r)) for r in rows]

    def markdown(self) -> str:
        def esc(cell: str) -> str:
            return cell.replace("|", "\\|")

        lines = ["| " + " | ".join(map(esc, self.header)) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(map(esc, r)) + " |" for r in self.rows]
        return "\n".join(lines)

    def html(self) -> str:
        head = "".join(f"<th>{_html.escape(h)}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{_html.escape(c)}</td>" for c in r) + "</tr>" for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _metric_columns(board) -> list[str]:
    skip = {"Rank", *META_COLUMNS, "n", "Dropped", "Scored as empty", "Ranked by", "rank_metric", "model"}
    return [c for c in board.columns if c not in skip and not c.endswith((" CI low", " CI high"))
            and board[c].notna().any()]


def _with_ci(board, row, column) -> str:
    value = _fmt(row[column])
    low, high = f"{column} CI low", f"{column} CI high"
    if low in board.columns and row[low] is not None and not _is_nan(row[low]):
        return f"{value} [{_fmt(row[low])}, {_fmt(row[high])}]"
    return value


def _is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _sections(leaderboards, comparisons, config):
    """Yield (heading, paragraphs, tables) per dataset × split."""
    import pandas as pd

    level = config["bootstrap"]["level"]
    for (dataset, split), path in sorted(leaderboards.items()):
        board = pd.read_csv(path)
        board = board.astype(object).where(board.notna(), None)
        cols = _metric_columns(board)
        lead = Table(["Rank", "Model", *cols, "n", "Dropped", "Scored as empty"],
                     [[r["Rank"], r["Model Name"], *[_with_ci(board, r, c) for c in cols], r["n"], r["Dropped"],
                       r["Scored as empty"]] for _, r in board.iterrows()])
        paragraphs = [f"Ranked by {board['Ranked by'].iloc[0]}. Brackets: {level:.0%} percentile bootstrap "
                      f"interval ({config['bootstrap']['n']} paired resamples over cases, seed "
                      f"{config['bootstrap']['seed']})."]
        tables = [lead]
        comp = pd.read_parquet(comparisons[(dataset, split)])
        rank_leaf = board["rank_metric"].iloc[0]
        order = list(board["model"])
        rows = []
        for a, b in zip(order, order[1:]):
            sel = comp[(comp["metric"] == rank_leaf) & (((comp["model_a"] == a) & (comp["model_b"] == b))
                                                        | ((comp["model_a"] == b) & (comp["model_b"] == a)))]
            if sel.empty:
                continue
            c = sel.iloc[0]
            sign = 1 if c["model_a"] == a else -1
            lo, hi = sorted((sign * c["ci_lower"], sign * c["ci_upper"]))
            distinct = "yes" if c["p_value"] < 1 - level else "no"
            rows.append([f"{a} vs {b}", _fmt(sign * c["delta"]), f"[{_fmt(lo)}, {_fmt(hi)}]", _p(c["p_value"]),
                         c["n_common"], distinct])
        if rows:
            paragraphs.append(f"Adjacent ranks on {rank_leaf}: difference (upper − lower row), its interval and "
                              "the two-sided paired bootstrap p-value.")
            tables.append(Table(["Pair", "Δ", "Interval", "p", "Common cases", f"Distinct at {level:.0%}"], rows))
        yield f"{dataset} — {split}", paragraphs, tables


def render_report(leaderboards: dict, comparisons: dict, config, metaeval: dict | None = None) -> tuple[str, str]:
    intro = ("radrank leaderboard report. Every number is computed from per-sample scores in results/scores; "
             "intervals come from an exact paired bootstrap over cases (no metric is re-run per resample). "
             "Rows listed in the drop files were removed or scored as empty reports as the config says "
             f"(empty_hypothesis: {config['empty_hypothesis']}).")
    md = ["# radrank report", "", intro, ""]
    body = [f"<h1>radrank report</h1><p>{_html.escape(intro)}</p>"]
    for heading, paragraphs, tables in _sections(leaderboards, comparisons, config):
        md += [f"## {heading}", ""]
        body.append(f"<h2>{_html.escape(heading)}</h2>")
        for i, table in enumerate(tables):
            if i < len(paragraphs):
                md += [paragraphs[i], ""]
                body.append(f"<p>{_html.escape(paragraphs[i])}</p>")
            md += [table.markdown(), ""]
            body.append(table.html())
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>radrank report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
    return "\n".join(md), page
