"""A scoring job keeps the score files whose inputs are unchanged (radrank.score_reuse): a new model pays for its
own pairs only, for every metric (the lexical ones skip the pair cache), on the group's references as the first run
prepared them; a changed submission, case set or setting is scored again; and a model whose file changed cannot keep
the scores of its old one."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

from radrank import io, jobs, metrics, provenance, scoring
from radrank.score_cache import ScoreCache
from test_ranking_integrity import assert_rank_inside_interval, cases_with_findings, predictions, run_group, \
    submission

REFS = ["No acute cardiopulmonary process.", "Small bilateral pleural effusions with bibasilar atelectasis.",
        "Mild cardiomegaly. No pleural effusion.", "Right lower lobe opacity, concerning for pneumonia."]
CASE_IDS = [f"c{i:02d}" for i in range(12)]


def write_pairs(path, hyps, ids=CASE_IDS):
    frame = pd.DataFrame({"sample_id": list(ids), "reference": [REFS[i % 4] for i in range(len(ids))],
                          "hypothesis": list(hyps)})
    io.write_parquet(frame, path, provenance.record("pairs", dataset="d", split="findings", n_pairs=len(frame)))
    return str(path)


def write_cases(path, ids=CASE_IDS):
    frame = pd.DataFrame({"sample_id": list(ids), "reference": [REFS[CASE_IDS.index(i) % 4] for i in ids]})
    io.write_parquet(frame, path, provenance.record("cases", dataset="d", split="findings"))
    return str(path)


class Group:
    """A dataset × split on disk: every model's pairs file, the case set, the score files of one metric."""

    def __init__(self, root, metric="bleu4", models=("a", "b", "c")):
        self.root, self.metric = root, metric
        self.models = list(models)
        self.cases = write_cases(root / "cases.parquet")
        for i, m in enumerate(self.models):
            self.set_model(m, [f"{REFS[j % 4]} Model {i} note {j % 3}." for j in range(len(CASE_IDS))])

    def set_model(self, model, hyps):
        write_pairs(self.root / f"pairs/{model}.parquet", hyps)
        if model not in self.models:
            self.models.append(model)

    def scores(self, model):
        return str(self.root / f"scores/{model}.parquet")

    def run(self, cache, settings=None, digest_memo=None, reference_memo=None, *, folder=False):
        """``folder``: the output named as the workflow's rule names it (the metric's folder of score files)."""
        (self.root / "pairs").mkdir(exist_ok=True)
        job = jobs.ScoreGroup.of(self.metric, self.models, settings, cache=cache, digest_memo=digest_memo,
                                 reference_memo=reference_memo)
        job.run(jobs.Files(pairs=[str(self.root / f"pairs/{m}.parquet") for m in self.models], cases=self.cases),
                jobs.Files(score_dir=str(self.root / "scores")) if folder else
                jobs.Files(scores=[self.scores(m) for m in self.models]))

    def fresh(self, model):
        """The model's scores computed now, from its pairs, by the metric itself (no job, no cache)."""
        pairs = jobs.scored_pairs([str(self.root / f"pairs/{model}.parquet")], [model], metrics.get(self.metric).reads,
                                  jobs.read_cases(self.cases))[model]
        return metrics.score(self.metric, pairs, metrics.get(self.metric).settings())


@pytest.fixture
def scored_rows(monkeypatch):
    """The models whose pairs the job reads, in every scoring call (kept models' pairs are not even read; the
    pair cache would otherwise serve them without a call, so the reads are what tells)."""
    read = []
    real = jobs.scored_pairs

    def spy(pair_paths, models, columns, cases=None):
        read.extend(models)
        return real(pair_paths, models, columns, cases)

    monkeypatch.setattr(jobs, "scored_pairs", spy)
    return read


@pytest.fixture
def group(tmp_path):
    (tmp_path / "pairs").mkdir()
    return Group(tmp_path)


def test_a_new_model_is_the_only_one_scored(group, tmp_path, scored_rows):
    cache = ScoreCache(tmp_path / "cache")
    group.run(cache)
    assert sorted(scored_rows) == ["a", "b", "c"]
    before = {m: open(group.scores(m), "rb").read() for m in "abc"}
    old = os.stat(group.scores("a")).st_mtime_ns
    os.utime(group.scores("a"), ns=(old - 10**9, old - 10**9))
    scored_rows.clear()
    group.set_model("d", [f"Model d {j}." for j in range(len(CASE_IDS))])
    group.run(cache)
    assert scored_rows == ["d"]
    assert {m: open(group.scores(m), "rb").read() for m in "abc"} == before  # kept as they were
    assert os.stat(group.scores("a")).st_mtime_ns > old - 10**9  # newer than the inputs it was checked against
    for m in "abcd":
        pd.testing.assert_frame_equal(pd.read_parquet(group.scores(m)), group.fresh(m), check_exact=True)
    scored_rows.clear()
    group.run(cache)  # a forced rerun with nothing changed scores nothing
    assert scored_rows == []


def test_a_metric_folder_holds_the_groups_models_and_keeps_theirs(group, tmp_path, scored_rows):
    """The rule's output is the metric's folder: every model's file is <folder>/<model>.parquet, the files named
    one by one are the same bytes, a model taken off the sheet leaves no file behind and the others are kept."""
    cache = ScoreCache(tmp_path / "cache")
    group.run(cache)
    listed = {m: open(group.scores(m), "rb").read() for m in "abc"}
    shutil.rmtree(tmp_path / "scores")
    group.run(cache, folder=True)
    assert {p.name for p in (tmp_path / "scores").iterdir()} == {"a.parquet", "b.parquet", "c.parquet"}
    assert {m: open(group.scores(m), "rb").read() for m in "abc"} == listed
    group.models.remove("b")
    scored_rows.clear()
    group.run(cache, folder=True)
    assert scored_rows == []  # a and c kept
    assert {p.name for p in (tmp_path / "scores").iterdir()} == {"a.parquet", "c.parquet"}
    assert {m: open(group.scores(m), "rb").read() for m in "ac"} == {m: listed[m] for m in "ac"}


def test_kept_and_fresh_files_are_the_same_bytes(group, tmp_path):
    """A file kept from the last run is the file a run from scratch writes (its key included)."""
    cache = ScoreCache(tmp_path / "cache")
    group.run(cache)
    group.set_model("d", [f"Model d {j}." for j in range(len(CASE_IDS))])
    group.run(cache)
    kept = {m: open(group.scores(m), "rb").read() for m in group.models}
    shutil.rmtree(tmp_path / "scores")
    group.run(None)  # no cache: everything scored
    assert {m: open(group.scores(m), "rb").read() for m in group.models} == kept


def test_a_changed_submission_is_scored_again(group, tmp_path, scored_rows):
    cache = ScoreCache(tmp_path / "cache")
    group.run(cache)
    scored_rows.clear()
    group.set_model("b", ["No acute findings."] * len(CASE_IDS))
    group.run(cache)
    assert scored_rows == ["b"]
    pd.testing.assert_frame_equal(pd.read_parquet(group.scores("b")), group.fresh("b"), check_exact=True)


def test_a_changed_case_set_or_weight_file_scores_every_model(group, tmp_path, scored_rows, monkeypatch):
    cache = ScoreCache(tmp_path / "cache")
    group.run(cache)
    scored_rows.clear()
    group.cases = write_cases(tmp_path / "cases.parquet", CASE_IDS[:-2])  # two cases leave the set
    group.run(cache)
    assert sorted(scored_rows) == ["a", "b", "c"]
    for m in "abc":
        assert len(pd.read_parquet(group.scores(m))) == len(CASE_IDS) - 2
    scored_rows.clear()
    real = scoring.cache_key  # the cache namespace: the metric's identity and the content of its weight files
    monkeypatch.setattr(scoring, "cache_key", lambda *a: {**real(*a), "weights": {"model": "other bytes"}})
    group.run(cache)
    assert sorted(scored_rows) == ["a", "b", "c"]


def test_a_damaged_or_foreign_file_is_not_kept(group, tmp_path, scored_rows):
    cache = ScoreCache(tmp_path / "cache")
    group.run(cache)
    scored_rows.clear()
    data = open(group.scores("a"), "rb").read()
    open(group.scores("a"), "wb").write(data[: len(data) // 2])  # truncated
    shutil.copy(group.scores("c"), group.scores("b"))  # another model's file, with its key
    group.run(cache)
    assert sorted(scored_rows) == ["a", "b"]
    for m in "ab":
        pd.testing.assert_frame_equal(pd.read_parquet(group.scores(m)), group.fresh(m), check_exact=True)


def test_a_file_with_a_failed_request_is_scored_again(group, tmp_path, scored_rows, monkeypatch):
    """A judge whose endpoint failed for some pairs wrote them as failures: that file is never kept, so the next
    run asks again (as the pair cache does not keep those rows)."""
    cache = ScoreCache(tmp_path / "cache")
    metric_type = type(metrics.get("bleu4"))
    failed = {"endpoint down"}  # while set, every row is a failed request's

    def cacheable(self, scores):
        import numpy as np

        return np.full(len(scores), not failed, dtype=bool)

    monkeypatch.setattr(metric_type, "cacheable", cacheable)
    group.run(cache)
    scored_rows.clear()
    failed.clear()  # the endpoint answers again
    group.run(cache)
    assert scored_rows == ["a", "b", "c"]  # no file of the failed run recorded a key
    scored_rows.clear()
    group.run(cache)
    assert scored_rows == []


def test_with_the_cache_off_nothing_is_kept(group, scored_rows):
    group.run(None)
    scored_rows.clear()
    group.run(None)
    assert sorted(scored_rows) == ["a", "b", "c"]


def test_a_model_that_swaps_in_a_worse_file_cannot_keep_its_first_rank(tmp_path):
    """The gamer first submits the careful model's answers (ranked first), then replaces its file with
    "No acute findings." everywhere in the same workdir: the rerun scores its new file, and it drops below the honest
    model; its per-case scores and the ranks equal a run from scratch."""
    cache = ScoreCache(tmp_path / "cache")
    ids = cases_with_findings()
    careful, hasty = predictions("careful"), predictions("hasty")
    subs = {"gamer": submission({c: careful[c] for c in ids}), "honest": submission({c: hasty[c] for c in ids})}
    board, _, _ = run_group(tmp_path, subs, cache=cache)
    assert board.loc["gamer", "Rank"] < board.loc["honest", "Rank"]
    subs["gamer"] = submission({c: "No acute findings." for c in ids})
    board, _, per_case = run_group(tmp_path, subs, cache=cache)
    assert_rank_inside_interval(board)
    assert per_case["honest"].mean() > per_case["gamer"].mean()
    assert board.loc["honest", "Rank"] < board.loc["gamer", "Rank"]
    fresh, _, fresh_cases = run_group(tmp_path / "fresh", subs, cache=None)
    pd.testing.assert_series_equal(per_case["gamer"], fresh_cases["gamer"], check_exact=True)
    assert board["Rank"].equals(fresh["Rank"])


# --- the bootstrap job's per-model summary folders (radrank.summaries) ----------------------------------------


def _bootstrap_outputs(tmp_path, models):
    """replicates and summary of a bootstrap over ``models`` ({model: its bleu2 scores}), and drops files."""
    from radrank.stats.bootstrap import bootstrap

    scores = {m: pd.DataFrame({"sample_id": CASE_IDS, "bleu2": values}) for m, values in models.items()}
    result = bootstrap(scores, metrics.leaves("bleu2"), n_boot=50, seed=0)
    drops = {}
    for m in models:
        drops[m] = tmp_path / f"{m}.drops.csv"
        drops[m].write_text("sample_id,reason,action\n")
    return result.replicates, result.summary, drops


def test_a_summary_folder_is_rewritten_only_when_its_numbers_change(tmp_path, monkeypatch):
    from radrank import summaries

    written = []
    real = summaries.write_model_files
    monkeypatch.setattr(summaries, "write_model_files",
                        lambda **kw: written.append(kw["out_results"].parent.name) or real(**kw))
    values = {m: [(i * (k + 2)) % 7 / 7 for i in range(len(CASE_IDS))] for k, m in enumerate("abc")}
    out = tmp_path / "summary"
    summaries.write_model_summaries(*_bootstrap_outputs(tmp_path, values), out)
    assert sorted(written) == ["a", "b", "c"]
    first = {p: p.read_bytes() for p in out.glob("*/*.csv")}
    written.clear()
    values["d"] = [0.5] * len(CASE_IDS)  # a model joins: the others' numbers are the same
    summaries.write_model_summaries(*_bootstrap_outputs(tmp_path, values), out)
    assert written == ["d"]
    assert {p: p.read_bytes() for p in first} == first
    written.clear()
    values["b"] = [0.1] * len(CASE_IDS)  # b's scores changed; c's results.csv was deleted; a left the group
    (out / "c/results.csv").unlink()
    del values["a"]
    summaries.write_model_summaries(*_bootstrap_outputs(tmp_path, values), out)
    assert sorted(written) == ["b", "c"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["b", "c", "d"]
    fresh = tmp_path / "fresh"
    summaries.write_model_summaries(*_bootstrap_outputs(tmp_path, values), fresh)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == \
        {p.relative_to(fresh): p.read_bytes() for p in fresh.rglob("*") if p.is_file()}


def test_the_group_remembers_its_pairs_files_digests_and_an_edit_in_place_is_still_scored_again(group, tmp_path,
                                                                                                 scored_rows,
                                                                                                 monkeypatch):
    """The metrics' jobs of a group, and the next run's, hash a pairs file only when it is new or changed
    (jobs.GROUP_DIGESTS); the memo is keyed by the file's stat with its ctime, so a submission edited in place
    to the same size with its mtime set back — what a model that wants to keep its old scores would do — is read,
    hashed and scored again."""
    from radrank import digests

    hashed = []
    real = digests.file_sha256
    monkeypatch.setattr(digests, "file_sha256", lambda path: hashed.append(os.path.basename(path)) or real(path))
    cache = ScoreCache(tmp_path / "cache")
    memo = tmp_path / "state/file-digests.json"
    group.run(cache, digest_memo=memo)
    assert sorted(hashed) == ["a.parquet", "b.parquet", "c.parquet"]
    hashed.clear()
    group.metric = "rouge"  # another metric's job of the same group
    group.run(cache, digest_memo=memo)
    group.metric = "bleu4"
    group.set_model("d", [f"Model d {j}." for j in range(len(CASE_IDS))])
    group.run(cache, digest_memo=memo)
    assert hashed == ["d.parquet"]
    # model a rewrites its file in place: same inode, same size, the mtime set back
    path = tmp_path / "pairs/a.parquet"
    original, st = path.read_bytes(), os.stat(path)
    hyps = pd.read_parquet(path)["hypothesis"].tolist()
    for letter in "xyzqwv":
        candidate = tmp_path / "candidate.parquet"
        write_pairs(candidate, [hyps[0][:-1] + letter, *hyps[1:]])
        if candidate.stat().st_size == len(original):
            break
    else:
        pytest.fail("no same-size edit found")
    with open(path, "r+b") as f:
        f.write(candidate.read_bytes())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    hashed.clear()
    scored_rows.clear()
    group.run(cache, digest_memo=memo)
    assert hashed == ["a.parquet"] and scored_rows == ["a"]
    pd.testing.assert_frame_equal(pd.read_parquet(group.scores("a")), group.fresh("a"), check_exact=True)


@pytest.mark.parametrize("metric", ["bleu2", "bleu4", "rouge"])
def test_a_new_model_is_scored_on_the_references_the_first_run_prepared(tmp_path, metric, caplog):
    """The first run prepares the group's references (its case set's) and keeps them; the next run, which scores a
    new model, serves them and prepares none; the new model's scores are its fresh ones. A case set with one
    reference changed is prepared again."""
    import logging

    caplog.set_level(logging.INFO, logger="radrank")
    (tmp_path / "pairs").mkdir()
    group, memo = Group(tmp_path, metric=metric), tmp_path / "references"
    group.run(None, reference_memo=memo)
    assert (memo / f"{metric}.pickle").exists()
    assert "the group's 4 references, prepared once for every model: made here 1, from an earlier run 0" in caplog.text
    caplog.clear()
    group.set_model("d", [f"Model d {j}." for j in range(len(CASE_IDS))])
    group.run(None, reference_memo=memo)
    assert "the group's 4 references, prepared once for every model: made here 0, from an earlier run 1" in caplog.text
    for m in "abcd":
        pd.testing.assert_frame_equal(pd.read_parquet(group.scores(m)), group.fresh(m), check_exact=True)
    caplog.clear()
    frame = pd.read_parquet(group.cases)
    frame.loc[0, "reference"] = "No acute cardiopulmonary process. Stable."
    io.write_parquet(frame, group.cases, provenance.record("cases", dataset="d", split="findings"))
    group.run(None, reference_memo=memo)
    assert "the group's 5 references, prepared once for every model: made here 1, from an earlier run 0" in caplog.text
