"""`curriculum sql` in a terminal: floats rounded for display, a result wider than the terminal
printed one field per line, and csv / json still exact."""

import json

import pytest

from cli.sql_output import Format, display_float, print_tables
from pipeline.catalog.bounded_sql import Table

V = 0.5495768821173777
FUNNEL = [
    "run_id",
    "generated",
    "posed",
    "valid",
    "verbatim",
    "above_v_threshold",
    "not_contaminated",
    "not_shortcut",
    "unique_answer",
    "accepted",
    "shortcut_undetermined",
    "uniqueness_undetermined",
    "duplicates",
    "template_questions",
    "v_threshold",
    "mean_v",
    "mean_v_accepted",
    "mean_proposer_reward",
]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (V, "0.5496"),
        (0.8, "0.8"),
        (3.0, "3.0"),
        (-0.00012345, "-0.0001234"),
        (155.123456, "155.1235"),
        (1e-7, "1e-07"),
        (2.5e12, "2.500e+12"),
        (0.0, "0.0"),
        (float("nan"), "nan"),
    ],
)
def test_floats_are_rounded_for_display_never_to_zero(value, shown):
    assert display_float(value) == shown


def _funnel() -> Table:
    row = ("20261125-embedded-296b70cf", 32, 22, 16, 16, 13, 13, 13, 9, 9, 0, 4, 0, 7, V, V, V, V)
    return Table("statement 1", FUNNEL, [row])


def test_a_result_wider_than_the_terminal_is_one_field_per_line(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    print_tables([_funnel()], Format.table)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100
    assert "record 1" in out
    for name in FUNNEL:  # each field on a line of its own, its name first
        assert any(line.startswith(name + " ") for line in lines), name
    assert any(line.split() == ["mean_v", "0.5496"] for line in lines)
    assert str(V) not in out


def test_a_result_that_fits_stays_a_table(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    print_tables([Table("statement 1", ["run_id", "mean_v"], [("r1", V)])], Format.table)
    out = capsys.readouterr().out
    assert "record 1" not in out
    assert "0.5496" in out and "┃ run_id" in out


@pytest.mark.parametrize("fmt", [Format.csv, Format.json])
def test_csv_and_json_keep_every_digit(monkeypatch, capsys, fmt):
    monkeypatch.setenv("COLUMNS", "100")
    print_tables([_funnel()], fmt)
    out = capsys.readouterr().out
    assert str(V) in out
    if fmt is Format.json:
        assert json.loads(out)["rows"][0]["mean_v"] == V
