"""The submissions and models sheets (radrank.workflow.read_sheet): clear errors naming the row; the files a
sheet names are read from the sheet's own folder (radrank.sheets.resolve_sheet_path)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from radrank.errors import ConfigError
from radrank.sheets import resolve_sheet_path
from radrank.workflow import SHEET_COLUMNS, SHEET_OPTIONAL, Plan, read_sheet, validate_config


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sheet_reads_blank_cells_comments_and_blank_lines(tmp_path):
    path = write(tmp_path, "s.tsv", "# my models\nmodel\tdataset\tpath\treference_path\tsplit\n"
                                    "a\td\tx.json\t\t\n\n# b is not ready\n c \td\ty.csv\tgt.csv\tfindings\n")
    sheet = read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)
    assert sheet.to_dict("records") == [
        {"model": "a", "dataset": "d", "path": "x.json", "reference_path": "", "split": ""},
        {"model": "c", "dataset": "d", "path": "y.csv", "reference_path": "gt.csv", "split": "findings"},
    ]


def test_sheet_short_rows_and_trailing_empty_cells_are_blank(tmp_path):
    path = write(tmp_path, "s.tsv", "model\tdataset\tpath\na\td\tx.json\t\t\nb\td\n")
    sheet = read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)
    assert sheet[["model", "path", "split"]].values.tolist() == [["a", "x.json", ""], ["b", "", ""]]


@pytest.mark.parametrize("row,extra", [("b\td\t\ty.json", "['y.json']"), ("b\t\td\ty.json", "['y.json']"),
                                       ("b\td\ty.json\tfindings", "['findings']")])
def test_sheet_row_with_an_extra_tab_names_row_and_line(tmp_path, row, extra):
    path = write(tmp_path, "s.tsv", f"model\tdataset\tpath\n# comment\na\td\tx.json\n{row}\n")
    with pytest.raises(ConfigError) as info:
        read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)
    message = str(info.value)
    assert message.startswith(f"sheet {path}, row 2 (line 4): 4 cells but the header has 3 columns "
                              "(model, dataset, path)")
    assert f"extra {extra}" in message and "a stray tab?" in message


def test_every_row_with_a_trailing_value_does_not_shift_columns(tmp_path):
    # pandas took the first column as the index here and shifted every name one column left
    path = write(tmp_path, "s.tsv", "model\tdataset\tpath\na\td\tx.json\tz\nb\td\ty.json\tz\n")
    with pytest.raises(ConfigError, match=r"row 1 \(line 2\): 4 cells"):
        read_sheet(path, SHEET_COLUMNS, SHEET_OPTIONAL)


def test_csv_sheet_with_quoted_commas(tmp_path):
    path = write(tmp_path, "models.csv", 'model,name,institution\nm,"Model, large","Lab, Inc."\n')
    sheet = read_sheet(path, ("model",), ("name", "date", "institution", "url"))
    assert sheet.to_dict("records") == [{"model": "m", "name": "Model, large", "institution": "Lab, Inc.",
                                         "date": "", "url": ""}]


def test_sheet_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_sheet(tmp_path / "none.tsv", SHEET_COLUMNS)
    with pytest.raises(ConfigError, match="is empty"):
        read_sheet(write(tmp_path, "e.tsv", "# nothing\n\n"), SHEET_COLUMNS)
    with pytest.raises(ConfigError, match=r"lacks column\(s\) \['path'\]"):
        read_sheet(write(tmp_path, "m.tsv", "model\tdataset\na\tb\n"), SHEET_COLUMNS)
    with pytest.raises(ConfigError, match=r"unknown column\(s\) \['paht'\]"):
        read_sheet(write(tmp_path, "u.tsv", "model\tdataset\tpath\tpaht\na\tb\tc\td\n"), SHEET_COLUMNS)
    with pytest.raises(ConfigError, match="cannot be read"):
        (tmp_path / "b.tsv").write_bytes(b"model\tdataset\tpath\ncaf\xe9\td\tx\n")
        read_sheet(tmp_path / "b.tsv", SHEET_COLUMNS)


# --- relative paths are read from the sheet's own folder ------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


def test_relative_cells_are_read_from_the_sheets_folder(tmp_path):
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    # inside the project: relative to it, so the example's jobs and provenance keep their `example/...` paths
    assert resolve_sheet_path("../example/a.json", "config/submissions.tsv", project) == "example/a.json"
    assert resolve_sheet_path("a.json", "config/submissions.tsv", project) == "config/a.json"
    assert resolve_sheet_path("a.json", project / "config/s.tsv", project) == "config/a.json"  # an absolute sheet
    # outside the project: absolute
    assert resolve_sheet_path("../../subs/a.json", "config/s.tsv", project) == str(tmp_path.resolve() / "subs/a.json")
    assert resolve_sheet_path("b.json", tmp_path / "elsewhere/s.tsv", project) == str(
        tmp_path.resolve() / "elsewhere/b.json")
    assert resolve_sheet_path("/data/x.json", "config/s.tsv", project) == "/data/x.json"  # as written
    assert resolve_sheet_path("", "config/s.tsv", project) == ""


def plan_with_sheet(sheet, base_dir):
    config = validate_config({"submissions": str(sheet), "models": None, "metrics": ["bleu2"],
                              "splits": ["findings"], "metaeval": {"sets": []}})
    return Plan(config, base_dir=base_dir)


def test_the_example_sheet_names_the_example_from_its_own_folder():
    rows = (REPO / "config/submissions.tsv").read_text().splitlines()[1:]
    assert rows and all(row.split("\t")[2].startswith("../example/") for row in rows)
    plan = plan_with_sheet("config/submissions.tsv", REPO)
    sub = plan.submission("demo_clinic", "careful")
    assert (sub.path, sub.reference_path) == ("example/demo_clinic/careful.csv", "example/demo_clinic/ground_truth.csv")


def test_a_sheet_beside_its_submissions_works_wherever_it_is(tmp_path):
    """A sheet in its own folder naming files beside it, loaded from a project elsewhere: the files are found,
    as absolute paths (they are outside the project)."""
    folder = tmp_path / "my-models"
    folder.mkdir()
    shutil.copy(REPO / "example/demo_cxr/careful.json", folder / "careful.json")
    shutil.copy(REPO / "example/demo_clinic/hasty.csv", folder / "hasty.csv")
    shutil.copy(REPO / "example/demo_clinic/ground_truth.csv", folder / "gt.csv")
    sheet = write(folder, "subs.tsv", "model\tdataset\tpath\treference_path\tsplit\n"
                                      "careful\tdemo_cxr\tcareful.json\t\t\nhasty\tdemo_clinic\thasty.csv\tgt.csv\t\n")
    plan = plan_with_sheet(sheet, REPO)
    assert plan.submission("demo_cxr", "careful").path == str(folder.resolve() / "careful.json")
    hasty = plan.submission("demo_clinic", "hasty")
    assert (hasty.path, hasty.reference_path) == (str(folder.resolve() / "hasty.csv"), str(folder.resolve() / "gt.csv"))


def test_a_missing_file_names_the_row_the_cell_and_the_path_it_was_read_as(tmp_path):
    folder = tmp_path / "sheets"
    folder.mkdir()
    shutil.copy(REPO / "example/demo_cxr/careful.json", folder / "careful.json")
    sheet = write(folder, "subs.tsv", "model\tdataset\tpath\treference_path\tsplit\n"
                                      "careful\tdemo_cxr\tcareful.json\t\t\n"
                                      "hasty\tdemo_clinic\thasty.csv\t../gt/ground_truth.csv\t\n")
    with pytest.raises(ConfigError) as info:
        plan_with_sheet(sheet, REPO)
    assert str(info.value) == (f"sheet {sheet}, row 2 (line 3): path hasty.csv (read from the sheet's folder as "
                               f"{folder.resolve() / 'hasty.csv'}) does not exist")
    shutil.copy(REPO / "example/demo_clinic/hasty.csv", folder / "hasty.csv")
    with pytest.raises(ConfigError) as info:
        plan_with_sheet(sheet, REPO)
    assert str(info.value) == (f"sheet {sheet}, row 2 (line 3): reference_path ../gt/ground_truth.csv (read from the sheet's "
                               f"folder as {tmp_path.resolve() / 'gt/ground_truth.csv'}) does not exist")
    absolute = write(folder, "abs.tsv", f"model\tdataset\tpath\nm\td\t{tmp_path / 'nowhere.json'}\n")
    with pytest.raises(ConfigError) as info:
        plan_with_sheet(absolute, REPO)
    assert str(info.value) == f"sheet {absolute}, row 1 (line 2): path {tmp_path / 'nowhere.json'} does not exist"


def test_a_sheet_error_gives_the_data_row_and_the_file_line_an_editor_shows(tmp_path):
    """After '#' comments and blank lines the data row and the file line differ: the message gives both."""
    sheet = write(tmp_path, "subs.tsv", "model\tdataset\tpath\treference_path\tsplit\n"
                                        "# the example's rows, kept for later\n"
                                        "#careful\tdemo_cxr\t../example/demo_cxr/careful.json\t\t\n"
                                        "\n"
                                        f"careful\tdemo_cxr\t{REPO / 'example/demo_cxr/careful.json'}\t\t\n"
                                        "mine\tdemo_cxr\tmine.json\t\t\n")
    with pytest.raises(ConfigError) as info:
        plan_with_sheet(sheet, REPO)
    assert str(info.value) == (f"sheet {sheet}, row 2 (line 6): path mine.json (read from the sheet's folder as "
                               f"{tmp_path.resolve() / 'mine.json'}) does not exist")
    assert (sheet.read_text().splitlines()[5]).startswith("mine\t")  # line 6, counted from 1 as editors do
