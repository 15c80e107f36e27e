"""The submissions and models sheets (radrank.workflow.read_sheet): clear errors naming the row."""

from __future__ import annotations

import pytest

from radrank.errors import ConfigError
from radrank.workflow import SHEET_COLUMNS, SHEET_OPTIONAL, read_sheet


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
