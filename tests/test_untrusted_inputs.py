"""Untrusted inputs (issue 20): a leaderboard maintainer scores files written by the people being ranked.

Each case below once passed silently, blocked, or crashed late with a traceback; each is now an error
naming the file, the field and the row (a ConfigError when the workflow loads, an InputError in the
ingest job), or a documented behaviour. Items: 3 repeated columns, 6 name length, 7 lone surrogates,
8 special files and the size cap, 9 config bounds and load-time checks, 12 silent acceptances.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from _workflow import make_workdir
from radrank.errors import ConfigError, InputError
from radrank.ingest import detect, ingest_submission
from radrank.ingest.tables import read_csv_pair, read_csv_rows, read_parquet_pairs
from radrank.sheets import MAX_NAME_LENGTH, NAME_PATTERN, SHEET_COLUMNS, SHEET_OPTIONAL, is_name, read_models_sheet, \
    read_sheet
from radrank.workflow import Plan, load_config_file, read_config, validate_config

SHEET_HEADER = "model\tdataset\tpath\treference_path\tsplit\n"
JSON_SUB = "example/demo_cxr/careful.json"
CSV_SUB, CSV_GT = "example/demo_clinic/careful.csv", "example/demo_clinic/ground_truth.csv"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("untrusted"))


def base_config(workdir) -> dict:
    return yaml.safe_load((workdir / "config/config.yaml").read_text())


def plan_of(workdir, tmp_path, **override) -> Plan:
    """The plan as the Snakefile loads it (Plan.load: built, rank leaves and weights checked)."""
    config = base_config(workdir)
    config.update(override)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return Plan.load(read_config([path]), base_dir=workdir)


def sheet_file(tmp_path, *rows, name="subs.tsv") -> str:
    path = tmp_path / name
    path.write_text(SHEET_HEADER + "".join("\t".join(r) + "\n" for r in rows))
    return str(path)


def plan_error(workdir, tmp_path, monkeypatch, **override) -> str:
    monkeypatch.chdir(workdir)
    with pytest.raises(ConfigError) as info:
        plan_of(workdir, tmp_path, **override)
    message = str(info.value)
    assert "\n" not in message
    return message


def input_error(call, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    assert "\n" not in str(info.value)
    return info.value


def write_parquet(path, table: dict):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(table), path)
    return path


def finishes(call, seconds=20):
    """Run ``call`` in a thread; (True, its exception) when it ends within ``seconds`` (a FIFO read would block)."""
    box = {}

    def target():
        try:
            call()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), box.get("error")


# --- item 3: a header that repeats a column ---------------------------------------------------------

@pytest.mark.parametrize("which", ["prediction", "ground truth"])
def test_csv_header_repeating_a_column_names_file_column_and_header_row(tmp_path, which):
    good = "study_id,report\n1,Lungs clear.\n"
    bad = "study_id,report,case_id,report\n1,Lungs clear.,c1,Effusion.\n"
    pred, gt = tmp_path / "pred.csv", tmp_path / "gt.csv"
    pred.write_text(bad if which == "prediction" else good)
    gt.write_text(bad if which == "ground truth" else good)
    error = input_error(read_csv_pair, pred, gt, "full")
    assert error.path == str(pred if which == "prediction" else gt)
    assert (error.field, error.row) == ("report", 1)
    assert "appears twice in the header (columns 2 and 4)" in str(error)


def test_parquet_repeating_a_column_names_file_and_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["r"]), pa.array(["h1"]), pa.array(["h2"])],
                                 names=["sample_id", "reference", "hypothesis", "hypothesis"])
    path = tmp_path / "pairs.parquet"
    pq.write_table(table, path)
    error = input_error(read_parquet_pairs, path, None)
    assert (error.path, error.field) == (str(path), "hypothesis") and "appears twice (columns 3 and 4)" in str(error)


@pytest.mark.parametrize("header", ["model\tdataset\tpath\tmodel\n", "model\tdataset\tpath\tsplit\t dataset \n"])
def test_sheet_header_repeating_a_column_is_an_error(tmp_path, header):
    path = tmp_path / "subs.tsv"
    path.write_text("# my sheet\n" + header + "a\td\tx.json\tb\n")
    with pytest.raises(ConfigError) as info:
        read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)
    column = header.split("\t")[-1].strip()
    assert str(info.value).startswith(f"sheet {path}, line 2 (the header): column {column!r} appears twice")


def test_models_sheet_repeating_a_column_or_a_model_is_an_error(tmp_path):
    path = tmp_path / "models.tsv"
    path.write_text("model\tname\tname\nm\tA\tB\n")
    with pytest.raises(ConfigError, match=r"line 1 \(the header\): column 'name' appears twice \(columns 2 and 3\)"):
        read_models_sheet(path)
    path.write_text("model\tname\nm\tA\nn\tN\nm\tB\n")
    with pytest.raises(ConfigError, match=r"models.tsv, line 4: model 'm' is listed twice \(also on line 2\)"):
        read_models_sheet(path)


# --- item 6: names that become file names have a length limit ------------------------------------------

def test_name_length_limit():
    assert MAX_NAME_LENGTH == 100
    assert is_name("m" * 100) and not is_name("m" * 101)
    import re

    assert re.fullmatch(NAME_PATTERN, "m" * 100) and not re.fullmatch(NAME_PATTERN, "m" * 101)  # the wildcards too
    assert not is_name("careful\n")  # "$" matched before a trailing newline


@pytest.mark.parametrize("column, length", [("model", 300), ("dataset", 250)])
def test_a_long_model_or_dataset_name_is_refused_with_the_sheet(workdir, tmp_path, monkeypatch, column, length):
    name = "x" * length
    row = [name, "demo_cxr", JSON_SUB, "", ""] if column == "model" else ["careful", name, JSON_SUB, "", ""]
    sheet = sheet_file(tmp_path, row)
    message = plan_error(workdir, tmp_path, monkeypatch, submissions=sheet)
    assert message == (f"sheet {sheet}, row 1 (line 2): {column} is {length} characters long; a name has at most 100 "
                       "(it becomes part of file names)")


def test_names_of_meta_evaluation_sets_and_mrscore_runs_have_a_length_limit():
    user = {"name": "u" * 91, "path": "ratings.csv", "raters": ["r1"]}  # scored as dataset metaeval-<name>
    with pytest.raises(ConfigError, match=r"\['metaeval'\]\['user'\]\[0\]\['name'\]: 'u+' is too long"):
        validate_config({"submissions": "s.tsv", "metaeval": {"user": [user]}})
    validate_config({"submissions": "s.tsv", "metaeval": {"user": [dict(user, name="u" * 90)]}})
    with pytest.raises(ConfigError, match="is too long"):
        validate_config({"submissions": "s.tsv", "mrscore_training": {"name": "m" * 101, "references": [{}]}})


def test_a_long_generation_model_name_is_refused(workdir, tmp_path, monkeypatch):
    (workdir / "images").mkdir(exist_ok=True)
    entry = {"model": "g" * 101, "dataset": "demo_cxr", "adapter": "mimic_cxr", "root": "images",
             "generator": "mypkg.gen:run"}
    message = plan_error(workdir, tmp_path, monkeypatch, generation=[entry])
    assert "generation" in message and ("too long" in message or "101 characters long" in message)


# --- item 7: lone UTF-16 surrogates ---------------------------------------------------------------

def test_a_lone_surrogate_in_a_prediction_names_file_case_and_field(tmp_path):
    path = tmp_path / "sub.json"
    path.write_text('{"c1": {"model_prediction": "ok", "section_findings": "f"},'
                    ' "c2": {"model_prediction": "Effusion \\ud800.", "section_findings": "f"}}')
    error = input_error(ingest_submission, path, "findings")
    assert (error.path, error.row, error.field) == (str(path), "c2", "model_prediction")
    assert "lone UTF-16 surrogate \\ud800 at character 9" in str(error)


def test_a_lone_surrogate_in_a_case_id_names_the_entry(tmp_path):
    path = tmp_path / "sub.json"
    path.write_text('{"c1": {"model_prediction": "ok"}, "c\\udc00": {"model_prediction": "x"}}')
    error = input_error(ingest_submission, path, "findings")
    assert (error.field, error.row) == ("case_id", "c\\udc00")
    assert "key of entry 1" in str(error)
    str(error).encode("utf-8")  # the message itself can be printed


def test_invalid_utf8_in_a_parquet_string_names_column_and_row(tmp_path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = b"okbad\xed\xa0\x80"  # "ok", then "bad" + an encoded surrogate (not UTF-8)
    offsets = pa.py_buffer(np.array([0, 2, 8], dtype=np.int32).tobytes())
    hyp = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(data)])
    path = tmp_path / "pairs.parquet"
    pq.write_table(pa.table({"sample_id": ["a", "b"], "reference": ["r", "r"], "hypothesis": hyp}), path)
    error = input_error(read_parquet_pairs, path, None)
    assert (error.path, error.field, error.row) == (str(path), "hypothesis", 1)
    assert "not valid UTF-8 (byte 0xed at offset 3)" in str(error)


def test_an_encoded_surrogate_in_a_csv_is_not_utf8(tmp_path):
    pred, gt = tmp_path / "pred.csv", tmp_path / "gt.csv"
    pred.write_bytes(b"study_id,report\n1,ok\n2,bad \xed\xa0\x80\n")
    gt.write_text("study_id,report\n1,r\n2,r\n")
    error = input_error(read_csv_pair, pred, gt, "full")
    assert error.path == str(pred) and "is not valid UTF-8: byte 0xed at offset 27 (line 3)" in str(error)


# --- item 8: special files, and the size cap ---------------------------------------------------------

@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


def test_a_fifo_submission_is_refused_without_blocking(fifo, tmp_path):
    ended, error = finishes(lambda: ingest_submission(fifo, "findings"))
    assert ended, "reading a FIFO blocked"
    assert isinstance(error, InputError) and error.path == str(fifo)
    assert "is a FIFO (named pipe), not a regular file" in str(error)
    ended, error = finishes(lambda: read_csv_rows(fifo, ()))  # the meta-evaluation ratings' reader
    assert ended and "is a FIFO (named pipe)" in str(error)


def test_a_fifo_sheet_or_models_sheet_is_refused_without_blocking(fifo):
    for call in (lambda: read_sheet(fifo, SHEET_COLUMNS), lambda: read_models_sheet(fifo)):
        ended, error = finishes(call)
        assert ended, "reading a FIFO blocked"
        assert isinstance(error, ConfigError) and str(error).startswith(f"sheet {fifo} is a FIFO (named pipe)")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_and_a_link_to_it_are_refused(tmp_path):
    link = tmp_path / "sub.json"
    link.symlink_to("/dev/zero")
    for path in ("/dev/zero", link):
        ended, error = finishes(lambda: ingest_submission(path, "findings"))
        assert ended and isinstance(error, InputError)
        assert error.path == str(path) and "is a character device, not a regular file" in str(error)


def test_files_over_the_size_cap_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(detect, "MAX_FILE_BYTES", 100)
    path = tmp_path / "sub.json"
    path.write_text(json.dumps({"c": {"model_prediction": "x" * 200}}))
    error = input_error(ingest_submission, path, "findings")
    assert "over the limit of 100 bytes" in str(error) and error.path == str(path)
    with pytest.raises(ConfigError, match="over the limit of 100 bytes"):
        read_sheet(sheet_file(tmp_path, ["m" * 30, "d" * 30, "p" * 30, "", ""]), SHEET_COLUMNS, SHEET_OPTIONAL)
    assert detect.read_regular(path, head=10, limit=1000) == path.read_bytes()[:10]  # sniffing reads the head


def test_a_fifo_named_by_the_sheet_or_the_config_is_refused_when_the_workflow_loads(workdir, tmp_path, monkeypatch,
                                                                                   fifo):
    sheet = sheet_file(tmp_path, ["careful", "demo_cxr", str(fifo), "", ""])
    ended, error = finishes(lambda: plan_error(workdir, tmp_path, monkeypatch, submissions=sheet))
    assert ended and error is None
    monkeypatch.chdir(workdir)
    with pytest.raises(ConfigError, match=rf"sheet {sheet}, row 1 \(line 2\): path {fifo} is a FIFO \(named pipe\)"):
        plan_of(workdir, tmp_path, submissions=sheet)
    with pytest.raises(ConfigError, match=rf"config 'models': sheet {fifo} is a FIFO"):
        plan_of(workdir, tmp_path, models=str(fifo))
    with pytest.raises(ConfigError, match=rf"config file {fifo} is a FIFO"):
        load_config_file(fifo)


def test_a_file_from_the_future_is_refused_when_the_workflow_loads(workdir, tmp_path, monkeypatch):
    """A submitter's archive can carry a far-future mtime; Snakemake would then fail every job reading the file."""
    future = tmp_path / "future.json"
    future.write_text((workdir / "example/demo_cxr/careful.json").read_text())
    os.utime(future, (2_000_000_000, 2_000_000_000))  # 2033
    sheet = sheet_file(tmp_path, ["careful", "demo_cxr", str(future), "", ""])
    error = plan_error(workdir, tmp_path, monkeypatch, submissions=sheet)
    assert error.startswith(f"sheet {sheet}, row 1 (line 2): path {future} has a modification time in the future (2033")
    assert f"`touch {future}` sets it to now" in error
    os.utime(future, (time.time() + 60, time.time() + 60))  # a clock a minute ahead is not refused
    plan_of(workdir, tmp_path, submissions=sheet)


# --- item 9: config bounds, and what is checked when the workflow loads --------------------------------

@pytest.mark.parametrize("override, where", [
    ({"bootstrap": {"seed": 2**32}}, "['bootstrap']['seed']"),
    ({"bootstrap": {"n": 10**11}}, "['bootstrap']['n']"),
    ({"bootstrap": {"n": 1e11}}, "['bootstrap']['n']"),
    ({"bootstrap": {"n": 100001}}, "['bootstrap']['n']"),
    ({"metaeval": {"seed": 2**40}}, "['metaeval']['seed']"),
    ({"metaeval": {"n_bootstrap": 10**9}}, "['metaeval']['n_bootstrap']"),
    ({"max_report_chars": 10**12}, "['max_report_chars']"),
    ({"shards": {"rouge": 10**9}}, "['shards']['rouge']"),
])
def test_schema_bounds(override, where):
    with pytest.raises(ConfigError) as info:
        validate_config({"submissions": "s.tsv", **override})
    assert where in str(info.value) and "greater than the maximum" in str(info.value)


def test_schema_bounds_accept_the_limits_and_whole_floats_become_ints():
    config = validate_config({"submissions": "s.tsv", "bootstrap": {"n": 1.0e5, "seed": 2**32 - 1}})
    assert config["bootstrap"]["n"] == 100000 and type(config["bootstrap"]["n"]) is int
    assert config["bootstrap"]["seed"] == 2**32 - 1


def test_a_fallback_rank_leaf_that_is_not_computed_is_refused_when_the_workflow_loads(workdir, tmp_path,
                                                                                     monkeypatch):
    message = plan_error(workdir, tmp_path, monkeypatch,
                         leaderboard={"rank_by": "radcliq_v1", "fallback_rank_by": "bertscore"})
    assert message.startswith("config 'leaderboard.rank_by' and 'leaderboard.fallback_rank_by': the findings "
                              "leaderboards cannot be ranked: 'bertscore' and 'radcliq_v1' are not computed")
    assert "compute ['bleu2', 'bleu4', 'rouge1', 'rouge2', 'rougeL']" in message
    message = plan_error(workdir, tmp_path, monkeypatch, leaderboard={"fallback_rank_by": "blue2"})
    assert message.startswith("config 'leaderboard.fallback_rank_by' names 'blue2', which is no metric's leaf")
    monkeypatch.chdir(workdir)
    plan_of(workdir, tmp_path, leaderboard={"rank_by": "rougeL", "fallback_rank_by": "bertscore"})  # rank_by is


def test_models_sheet_is_read_when_the_workflow_loads(workdir, tmp_path, monkeypatch):
    message = plan_error(workdir, tmp_path, monkeypatch, models="config/nowhere.tsv")
    assert message == f"config 'models': sheet {workdir / 'config/nowhere.tsv'} does not exist"
    models = tmp_path / "models.tsv"
    models.write_text("model\tname\tinstitution\ncareful\tCareful\tLab\nhasty\t\"Hasty, v2\tLab\n")
    message = plan_error(workdir, tmp_path, monkeypatch, models=str(models))
    assert message.startswith(f"config 'models': sheet {models}, row 2 (line 3): a quote (\") opened in column "
                              "'name' is not closed on this line")
    monkeypatch.chdir(workdir)
    assert plan_of(workdir, tmp_path).models_sheet["hasty"]["name"] == "Hasty-RRG (fictional)"


def test_a_key_written_twice_in_the_config_names_file_line_and_key(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("submissions: s.tsv\nbootstrap:\n  n: 1000\n  seed: 1\n  n: 10\n")
    with pytest.raises(ConfigError) as info:
        read_config([path])
    assert str(info.value) == (f"config file {path}, line 5: key 'bootstrap.n' is written twice in one mapping "
                               "(also on line 3); YAML would keep the last silently: write it once")
    path.write_text("submissions: s.tsv\ngeneration:\n  - {model: a, model: b}\n")
    with pytest.raises(ConfigError, match=r"line 3: key 'generation\[0\].model' is written twice"):
        read_config([path])
    path.write_text('{"submissions": "a.tsv", "submissions": "b.tsv"}')  # JSON, as Snakemake reads it too
    with pytest.raises(ConfigError, match="key 'submissions' appears twice"):
        load_config_file(path)
    path.write_text("base: &b {n: 1}\nbootstrap:\n  <<: *b\n  n: 2\n")  # a merge key may be overridden
    assert load_config_file(path)["bootstrap"] == {"n": 2}


@pytest.mark.workflow
def test_snakemake_refuses_a_key_written_twice_in_its_configfile(workdir):
    config = workdir / "config/config.yaml"
    original = config.read_text()
    try:
        config.write_text(original + "\nempty_hypothesis: drop\n")  # the example config sets it already
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1"], cwd=workdir,
                              capture_output=True, text=True, timeout=300)
    finally:
        config.write_text(original)
    assert proc.returncode != 0
    assert "key 'empty_hypothesis' is written twice in one mapping" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    line = next(x for x in proc.stderr.splitlines() if "written twice" in x)
    assert line.startswith("radrank: config file config/config.yaml, line ")


# --- item 12: silent acceptances --------------------------------------------------------------------

@pytest.mark.parametrize("age", [float("inf"), -5.0, 1e9, "inf", "-5"])
def test_a_parquet_age_outside_a_plausible_range_names_file_row_and_field(tmp_path, age):
    path = write_parquet(tmp_path / "pairs.parquet", {"sample_id": ["a", "b"], "reference": ["r", "r"],
                                                       "hypothesis": ["h", "h"],
                                                       "age": ["40", age] if isinstance(age, str) else [40.0, age]})
    error = input_error(read_parquet_pairs, path, None)
    assert (error.path, error.row, error.field) == (str(path), 1, "age")
    assert "must be an age in years from 0 to 150" in str(error)


def test_plausible_parquet_ages_and_implausible_context_ages(tmp_path):
    path = write_parquet(tmp_path / "pairs.parquet", {"sample_id": ["a", "b", "c"], "reference": ["r"] * 3,
                                                       "hypothesis": ["h"] * 3, "age": [0.5, 82.0, None]})
    assert [r["age"] for r in read_parquet_pairs(path, None)] == [0.5, 82.0, None]
    from radrank.context import parse_context

    # the context string is free text: an implausible age there is missing, as an unreadable one is
    for text in ("Age:-5.Gender:F.", "Age:inf.Gender:F.", "Age:1e9.Gender:F."):
        context = parse_context(text)
        assert context["age"] != context["age"] and context["sex"] == "F"
    assert parse_context("Age:82.0.Gender:F.")["age"] == 82.0


@pytest.mark.parametrize("ids, found", [([[0], [1]], "list"), ([{"a": 1}, {"a": 2}], "dict"),
                                        ([1.5, 2.5], "float 1.5"), ([b"a", b"b"], "bytes")])
def test_a_parquet_sample_id_that_is_not_text_or_an_integer_is_an_error(tmp_path, ids, found):
    path = write_parquet(tmp_path / "pairs.parquet", {"sample_id": ids, "reference": ["r", "r"],
                                                       "hypothesis": ["h", "h"]})
    error = input_error(read_parquet_pairs, path, None)
    assert (error.path, error.row, error.field) == (str(path), 0, "sample_id")
    assert f"sample id must be text or an integer, found {found}" in str(error)


def test_integer_parquet_sample_ids_are_their_digits(tmp_path):
    path = write_parquet(tmp_path / "pairs.parquet", {"sample_id": [7, 8], "reference": ["r", "r"],
                                                       "hypothesis": ["h", "h"]})
    assert [r["sample_id"] for r in read_parquet_pairs(path, None)] == ["7", "8"]


def test_a_parquet_context_that_is_not_text_is_an_error(tmp_path):
    path = write_parquet(tmp_path / "pairs.parquet", {"sample_id": ["a", "b"], "reference": ["r", "r"],
                                                       "hypothesis": ["h", "h"], "context": [{"a": 1}, {"a": 2}]})
    error = input_error(read_parquet_pairs, path, None)
    assert (error.path, error.row, error.field) == (str(path), 0, "context")
    assert "must be text, found dict" in str(error)


def test_a_reference_path_beside_a_rexrank_json_is_refused(workdir, tmp_path, monkeypatch):
    # the sheets sit in the workdir: their relative paths are read from the sheet's folder
    sheet = sheet_file(workdir, ["careful", "demo_cxr", JSON_SUB, CSV_GT, ""], name="subs-json-reference.tsv")
    message = plan_error(workdir, tmp_path, monkeypatch, submissions=sheet)
    assert message == (f"sheet {sheet}, row 1 (line 2): file {JSON_SUB}, field 'reference_path': is a ReXrank JSON "
                       f"submission, which holds its own references: the reference_path {CSV_GT} given with it would "
                       "be ignored; leave reference_path empty (it is the ground truth of a CSV submission)")
    error = input_error(ingest_submission, workdir / JSON_SUB, "findings", reference_path=workdir / CSV_GT)
    assert error.field == "reference_path"  # the Python API refuses it too
    monkeypatch.chdir(workdir)
    plan_of(workdir, tmp_path, submissions=sheet_file(workdir, ["careful", "demo_clinic", CSV_SUB, CSV_GT, ""],
                                                       name="subs-csv-reference.tsv"))


def test_a_quoted_newline_in_a_sheet_cell_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "subs.tsv"
    path.write_text(SHEET_HEADER + "a\td\tx.json\t\t\n\"care\nful\"\td\ty.json\t\t\n")
    with pytest.raises(ConfigError) as info:
        read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)
    assert str(info.value).startswith(f"sheet {path}, row 2 (line 3): a quote (\") opened in column 'model' is not "
                                      "closed on this line; a cell cannot span lines")


def test_a_symlink_loop_is_called_a_symlink_loop(workdir, tmp_path, monkeypatch):
    loop = tmp_path / "loop.json"
    loop.symlink_to(tmp_path / "loop2.json")
    (tmp_path / "loop2.json").symlink_to(loop)
    error = input_error(ingest_submission, loop, "findings")
    assert error.path == str(loop) and "is a symlink loop" in str(error)
    with pytest.raises(ConfigError, match=rf"sheet {loop} is a symlink loop"):
        read_sheet(loop, SHEET_COLUMNS)
    sheet = sheet_file(tmp_path, ["careful", "demo_cxr", str(loop), "", ""])
    message = plan_error(workdir, tmp_path, monkeypatch, submissions=sheet)
    assert message.startswith(f"sheet {sheet}, row 1 (line 2): path {loop} is a symlink loop")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "gone.json")
    assert f"is a symlink to {tmp_path / 'gone.json'}, which does not exist" in str(
        input_error(ingest_submission, dangling, "findings"))


def test_prediction_case_ids_that_disagree_with_the_ground_truth_are_an_error(tmp_path):
    pred, gt = tmp_path / "pred.csv", tmp_path / "gt.csv"
    gt.write_text("study_id,case_id,report\n1,c1,Lungs clear.\n2,c2,Effusion.\n")
    pred.write_text("study_id,case_id,report\n1,c1,Clear.\n2,c7,Effusion.\n")
    error = input_error(read_csv_pair, pred, gt, "full")
    assert (error.path, error.row, error.field) == (str(pred), 3, "case_id")
    assert f"case_id 'c7' of study_id 2 differs from the ground truth's 'c2' ({gt}, row 3)" in str(error)
    pred.write_text("study_id,case_id,report\n2,c2,Effusion.\n1,c1,Clear.\n")  # same ids, any order: fine
    matched, _ = read_csv_pair(pred, gt, "full")
    assert [r["sample_id"] for r in matched] == ["c1", "c2"]


def test_the_example_still_loads(workdir, tmp_path, monkeypatch):
    monkeypatch.chdir(workdir)
    plan = plan_of(workdir, tmp_path)
    assert sorted(plan.models_sheet) == ["careful", "hasty", "template"]
    df = read_sheet(workdir / "config/submissions.tsv", SHEET_COLUMNS, SHEET_OPTIONAL)
    assert df.attrs["lines"] == [2, 3, 4, 5, 6, 7] and pd.api.types.is_object_dtype(df["model"])


# --- issue 24, the rest of the 118-case run -----------------------------------------------------------------

def test_a_small_file_is_read_under_a_capped_address_space(tmp_path):
    """W6: a read asks for what the file holds, not for the 2 GiB size cap (a buffered read allocates what it is
    asked for), so a process whose address space is capped (ulimit -v) reads a small sheet."""
    path = tmp_path / "models.tsv"
    path.write_text("model\tname\ncareful\tCareful\n")
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))\n"
            "from radrank.ingest.detect import read_regular\n"
            "sys.stdout.write(read_regular(sys.argv[1]).decode())\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == path.read_text()


def test_the_size_cap_still_refuses_a_big_sparse_file_and_chunks_add_up(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(detect.MAX_FILE_BYTES + 1)  # sparse: no disk used
    expected = (f"is {detect.MAX_FILE_BYTES + 1:,} bytes, over the limit of {detect.MAX_FILE_BYTES:,} bytes that "
                "radrank reads (radrank.ingest.detect.MAX_FILE_BYTES)")
    with pytest.raises(detect.FileProblem) as info:
        detect.read_regular(big)
    assert str(info.value) == expected
    small = tmp_path / "small.json"
    small.write_bytes(bytes(range(256)) * 40)
    monkeypatch.setattr(detect, "READ_CHUNK", 7)
    with open(small, "rb") as f:  # a stated size of 0 (a /proc-like file): chunk after chunk to the end
        assert detect._read_at_most(f, 10**9, 1) == small.read_bytes()
    with open(small, "rb") as f:  # never past the cap
        assert detect._read_at_most(f, 100, 1) == small.read_bytes()[:100]


def bomb(levels=9, width=10) -> str:
    lines = ["lol:", f"  a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_when_the_config_is_read(tmp_path):
    """W7: 9 levels of 10 aliases (10^9 leaves in under 1 kB) is refused from the node graph, before anything is
    expanded; in a subprocess with a timeout, since the old code never returned."""
    path = tmp_path / "config.yaml"
    path.write_text("submissions: s.tsv\n" + bomb())
    code = ("import sys\nfrom radrank.errors import ConfigError\nfrom radrank.workflow import check_config_files\n"
            "try:\n    check_config_files([sys.argv[1]])\nexcept ConfigError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # an independent count: a_k is a list of 10 a_(k-1) (a_0: 10 scalars), each counted with its key; the root
    # mapping, the two keys and the value of submissions, and lol's mapping
    sizes = [11]
    for _ in range(8):
        sizes.append(1 + 10 * sizes[-1])
    total = 1 + 3 + 1 + sum(1 + n for n in sizes)
    assert proc.stdout.strip() == (
        f"config file {path}, line 11 (alias *a7, standing for {sizes[7]:,} values) stands for {total:,} "
        "values once its YAML aliases (*name) are written out, over the limit of 1,000,000 "
        "(radrank.workflow.MAX_CONFIG_VALUES): an alias bomb (\"billion laughs\")? a config has hundreds of values")
    path.write_text("submissions: s.tsv\nloop: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="holds a value that contains itself \\(a recursive YAML alias\\)"):
        load_config_file(path)
    path.write_text("submissions: s.tsv\n" + bomb(levels=3))  # 1,110 values: aliases as people use them
    assert len(load_config_file(path)["lol"]["a2"]) == 10


def test_validate_config_refuses_a_shared_structure_bomb_and_cuts_long_values():
    """W7: the config Snakemake loaded (aliases shared, not copied) is measured before jsonschema formats it;
    a schema error shows at most SHOWN_VALUE_CHARS of the offending value."""
    leaves = ["x"] * 10
    for _ in range(8):
        leaves = [leaves] * 10
    code = ("import sys\nfrom radrank.errors import ConfigError\nfrom radrank.workflow import validate_config\n"
            "a = ['x'] * 10\nfor _ in range(8):\n    a = [a] * 10\n"
            "try:\n    validate_config({'submissions': 's.tsv', 'lol': a})\nexcept ConfigError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("config stands for 1,111,111,11")
    assert "alias bomb" in proc.stdout
    with pytest.raises(ConfigError) as info:
        validate_config({"submissions": ["report " * 10] * 2000})
    message = str(info.value)
    assert message.startswith("config is invalid at ['submissions']: ['report report")
    assert message.endswith("more characters)") and len(message) < 420


def numeric_keys(spec, trail=()):
    """Every path to a number or integer of the config schema (lists: item 0; free-form mappings: key 'k')."""
    types = spec.get("type")
    types = types if isinstance(types, list) else [types]
    if "number" in types or "integer" in types:
        yield trail
    for key, sub in (spec.get("properties") or {}).items():
        yield from numeric_keys(sub, (*trail, key))
    if isinstance(spec.get("additionalProperties"), dict):
        yield from numeric_keys(spec["additionalProperties"], (*trail, "k"))
    if isinstance(spec.get("items"), dict):
        yield from numeric_keys(spec["items"], (*trail, 0))


def nested(trail, value):
    for key in reversed(trail):
        value = [value] if key == 0 else {key: value}
    return value


def shown_key(trail) -> str:
    out = ""
    for key in trail:
        out += "[0]" if key == 0 else (f".{key}" if out else key)
    return out


SCHEMA_NUMBERS = list(numeric_keys(yaml.safe_load((Path(__file__).parents[1] / "schemas/config.schema.yaml")
                                                  .read_text())))


@pytest.mark.parametrize("trail", SCHEMA_NUMBERS, ids=shown_key)
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_nan_and_infinity_are_refused_for_every_number_of_the_schema(tmp_path, trail, value):
    """W8: JSON Schema's bounds are comparisons, all false for NaN: every numeric key refuses NaN and ±infinity
    when the config is read, naming the key."""
    path = tmp_path / "config.yaml"
    config = {"submissions": "s.tsv"}
    config.update(nested(trail, "VALUE"))
    path.write_text(yaml.safe_dump(config).replace("VALUE", value))
    with pytest.raises(ConfigError) as info:
        read_config([path])
    shown = {".nan": "nan", ".inf": "inf", "-.inf": "-inf"}[value]
    assert str(info.value) == (f"config {path}: key {shown_key(trail)!r} is {shown}; a number in the config must be "
                               "finite (NaN and infinity pass every bound of the schema)")


def test_the_schema_walk_finds_the_keys_of_the_run():
    found = {shown_key(t) for t in SCHEMA_NUMBERS}
    assert {"bootstrap.level", "leaderboard.min_coverage", "bootstrap.n", "metaeval.level"} <= found
    with pytest.raises(ConfigError, match="key 'mrscore_training.tiers\\[0\\]\\[1\\]' is nan"):
        validate_config({"submissions": "s.tsv", "mrscore_training": {"tiers": [[0, float("nan")]]}})


def test_an_mrscore_run_name_with_a_trailing_newline_is_refused(workdir, tmp_path, monkeypatch):
    """Item 8: names are checked with fullmatch (re's $ matches before a final newline)."""
    message = plan_error(workdir, tmp_path, monkeypatch,
                         mrscore_training={"name": "x\n", "demo_models": True, "references": [{"dataset": "demo_cxr"}]})
    assert message == "config mrscore_training.name: 'x\\n' must be letters, digits, _ . + - only"
    from radrank.metaeval import sets_from_config

    with pytest.raises(ConfigError, match="name 'u\\\\n' must be letters"):
        sets_from_config({"metaeval": {"user": [{"name": "u\n", "path": "r.csv", "raters": ["a"]}]}})


@pytest.mark.parametrize("template, message", [
    ("{nope} {reference.__class__}", "{nope} is an unknown field"),
    ("{reference.__class__} {hypothesis}", "{reference.__class__} is an attribute or index of a field"),
    ("{reference[0]} {hypothesis}", "{reference[0]} is an attribute or index of a field"),
    ("{} {hypothesis}", "{} is a positional field {}"),
])
def test_an_mrscore_prompt_template_naming_other_fields_is_refused_at_load(workdir, tmp_path, monkeypatch,
                                                                          template, message):
    found = plan_error(workdir, tmp_path, monkeypatch,
                       mrscore_training={"name": "m", "demo_models": True, "references": [{"dataset": "demo_cxr"}],
                                         "prompt": {"prompt_template": template}})
    assert found == (f"config mrscore_training.prompt.prompt_template: {message}; a template names only "
                     "{reference}, {hypothesis}, plainly (write a literal brace as {{ or }})")


def test_a_sheet_with_carriage_return_line_endings_is_read(tmp_path):
    """Item 7: a lone \\r ends a line (old Mac files, some exports), as \\n and \\r\\n do."""
    rows = [["careful", "demo_cxr", "a.json", "", ""], ["hasty", "demo_cxr", "b.json", "", ""]]
    text = SHEET_HEADER + "".join("\t".join(r) + "\n" for r in rows)
    path = tmp_path / "s_cr.tsv"
    path.write_bytes(text.replace("\n", "\r").encode())
    df = read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)
    assert df["model"].tolist() == ["careful", "hasty"] and df["path"].tolist() == ["a.json", "b.json"]
    assert df.attrs["lines"] == [2, 3]
    models = tmp_path / "models.tsv"
    models.write_bytes(b"model\tname\r\rcareful\tCareful\rhasty\tHasty\r")
    assert {m: r["name"] for m, r in read_models_sheet(models).items()} == {"careful": "Careful", "hasty": "Hasty"}


def test_a_submission_inside_the_runs_results_is_refused_at_load(workdir, tmp_path, monkeypatch):
    """Item 9: a leaderboard CSV as a submission would make the run depend on itself."""
    board = workdir / "results/leaderboard/demo_clinic_findings.csv"
    board.parent.mkdir(parents=True, exist_ok=True)
    board.write_text("study_id,report\n0,x\n")
    try:
        sheet = sheet_file(tmp_path, ["careful", "demo_clinic", str(board), str(workdir / CSV_GT), "findings"])
        message = plan_error(workdir, tmp_path, monkeypatch, submissions=sheet)
        assert message == (f"sheet {sheet}, row 1 (line 2): path {board} is inside results/, this workflow's own outputs: a "
                           "run's output as its input would make the run depend on itself; copy the file out of "
                           "results/ first")
        sheet = sheet_file(tmp_path, ["careful", "demo_clinic", str(workdir / CSV_SUB), str(board), "findings"])
        assert plan_error(workdir, tmp_path, monkeypatch, submissions=sheet).startswith(
            f"sheet {sheet}, row 1 (line 2): reference_path {board} is inside results/")
    finally:
        board.unlink()


def test_a_file_under_proc_is_refused_and_a_header_is_shown_cut(workdir, tmp_path, monkeypatch):
    """Item 10: a link to /proc/self/environ is a "regular file of size 0" holding the process environment:
    refused at load; and a "columns:" message shows at most 200 characters of a header."""
    if not os.path.exists("/proc/self/environ"):
        pytest.skip("no /proc")
    link = tmp_path / "env.csv"
    link.symlink_to("/proc/self/environ")
    message = plan_error(workdir, tmp_path, monkeypatch, references={"files": {"demo_clinic": str(link)}})
    real = os.path.realpath(link)
    assert message == (f"config 'references.files.demo_clinic': {link} is under /proc (it resolves to {real}), a "
                       "kernel or device file, not data: radrank reads no file under /proc, /sys, /dev; copy the "
                       "data to a file")
    error = input_error(ingest_submission, link, "findings")
    assert "is under /proc" in str(error)
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"column_{i}" for i in range(1000)) + "\n" + ",".join(["x"] * 1000) + "\n")
    error = input_error(ingest_submission, wide, "findings", reference_path=wide)
    shown = str(error).split("(columns: ", 1)[1]
    header = ", ".join(f"column_{i}" for i in range(1000))
    assert shown == f"{header[:200]}… ({len(header) - 200:,} more characters))"


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_file_is_named_as_such(tmp_path, encoding, name):
    """Item 11: a BOM of UTF-16 or UTF-32 says what the file is."""
    pred = tmp_path / "pred.csv"
    pred.write_bytes("study_id,report\n0,The lungs are clear.\n".encode(encoding))
    error = input_error(ingest_submission, pred, "findings", reference_path=pred)
    byte_order = "LE" if pred.read_bytes()[:1] == b"\xff" else "BE"
    assert str(error) == (f"file {pred}: is not valid UTF-8: byte 0x{pred.read_bytes()[0]:02x} at offset 0 (line 1) "
                          f"(it starts with a {name} {byte_order} byte-order mark: the file is {name}); re-encode "
                          "the file as UTF-8")
    sheet = tmp_path / "s.tsv"
    sheet.write_bytes(SHEET_HEADER.encode(encoding))
    with pytest.raises(ConfigError, match=f"byte-order mark: the file is {name}\\); re-encode it as UTF-8"):
        read_sheet(sheet, SHEET_COLUMNS)
    config = tmp_path / "config.yaml"
    config.write_bytes("submissions: s.tsv\n".encode(encoding))
    with pytest.raises(ConfigError, match=f"\\(it starts with a {name} {byte_order} byte-order mark"):
        load_config_file(config)


def canonical_error(workdir, tmp_path, monkeypatch, dataset, canonical, rows) -> str:
    sheet = sheet_file(tmp_path, *rows)
    return plan_error(workdir, tmp_path, monkeypatch, submissions=sheet,
                      references={"files": {dataset: str(canonical)}})


def test_a_canonical_file_of_another_format_than_the_submissions_is_refused_at_load(workdir, tmp_path,
                                                                                     monkeypatch):
    """W9: a ReXrank JSON's findings reference is "Findings: " + section_findings, a CSV's or parquet file's
    goes through the section parser: the two can never match, so every case would be blamed on the submission."""
    sheet_json = ["careful", "demo_cxr", str(workdir / JSON_SUB), "", ""]
    message = canonical_error(workdir, tmp_path, monkeypatch, "demo_cxr", workdir / CSV_GT, [sheet_json])
    rules = ("these formats cannot be compared — a ReXrank JSON's findings reference is 'Findings: ' + "
             "section_findings (ReXrank's rule), a CSV's or parquet file's goes through the section parser, so "
             "every case would differ. A ReXrank JSON canonical file serves ReXrank JSON submissions, a "
             "ground-truth CSV serves CSV and parquet submissions: name a canonical file of the submissions' format")
    sheet = str(tmp_path / "subs.tsv")
    assert message == (f"config 'references.files.demo_cxr': the canonical file {workdir / CSV_GT} is a ground-truth "
                       f"CSV and the submission {workdir / JSON_SUB} of sheet {sheet}, row 1 (model 'careful') is a "
                       f"ReXrank JSON: {rules}")
    parquet = write_parquet(tmp_path / "h1.parquet", {"sample_id": ["a"], "reference": ["Findings: x"],
                                                      "hypothesis": ["x"]})
    message = canonical_error(workdir, tmp_path, monkeypatch, "demo_cxr", workdir / "example/demo_cxr/ground_truth.json",
                              [["h1", "demo_cxr", str(parquet), "", ""]])
    assert message == (f"config 'references.files.demo_cxr': the canonical file "
                       f"{workdir / 'example/demo_cxr/ground_truth.json'} is a ReXrank JSON and the submission "
                       f"{parquet} of sheet {sheet}, row 1 (model 'h1') is parquet pairs: {rules}")
    monkeypatch.chdir(workdir)  # a parquet submission with a CSV canonical file can match: accepted
    sheet = sheet_file(tmp_path, ["h1", "demo_clinic", str(parquet), "", ""])
    assert plan_of(workdir, tmp_path, submissions=sheet).canonical_references["demo_clinic"] == CSV_GT


def test_a_canonical_csv_and_a_ground_truth_naming_cases_differently_are_refused_at_load(workdir, tmp_path,
                                                                                        monkeypatch):
    """W9: a CSV names its cases by case_id when its ground truth has that column, else by study_id."""
    canonical = tmp_path / "canon.csv"
    canonical.write_text("study_id,report\n0,FINDINGS: Clear.\n")
    row = ["careful", "demo_clinic", str(workdir / CSV_SUB), str(workdir / CSV_GT), "findings"]
    message = canonical_error(workdir, tmp_path, monkeypatch, "demo_clinic", canonical, [row])
    assert message == (f"config 'references.files.demo_clinic': the canonical file {canonical} has no case_id "
                       "column, so its cases are named by study_id, while the ground truth "
                       f"{workdir / CSV_GT} of sheet {tmp_path / 'subs.tsv'}, row 1 (model 'careful') has a case_id "
                       "column, so its cases are named by case_id: no case could be found in the other. Give both "
                       "files a case_id column, or neither")


@pytest.mark.workflow
def test_snakemake_refuses_a_yaml_alias_bomb_in_its_configfile(workdir):
    """W7 through the real run: Snakemake's own loading keeps aliases shared; radrank's check of the files it
    loaded (rules/common.smk) refuses the bomb before the schema check would format it."""
    config = workdir / "config/config.yaml"
    original = config.read_text()
    try:
        config.write_text(original + "\n" + bomb())
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1"], cwd=workdir,
                              capture_output=True, text=True, timeout=300)
    finally:
        config.write_text(original)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    line = next(x for x in proc.stderr.splitlines() if "alias bomb" in x)
    assert line.startswith("radrank: config file config/config.yaml, line ")
    assert "(alias *a7, standing for 111,111,111 values)" in line
