"""Markdown tables of the report: a cell holding a pipe (a name such as |L|*) stays one cell, written and read."""

from jaxmem.report.text import markdown_table, row_cells, spread


def test_a_pipe_in_a_cell_is_escaped_and_read_back_as_one_cell():
    table = markdown_table(["y", "slope"], [["|L|*", 0.5], ["N*", 1.25]])
    header, row = table.splitlines()[0], table.splitlines()[2]
    assert row_cells(header) == ["y", "slope"]
    assert row_cells(row) == [r"\|L\|*", "0.5"]
    assert row_cells(table.splitlines()[3]) == ["N*", "1.25"]


def test_a_cell_escaped_already_is_not_escaped_twice():
    assert markdown_table(["a"], [[r"x \| y"]]).splitlines()[2] == r"| x \| y |"


def test_equal_values_have_no_spread_whatever_their_float_mean():
    """Three equal values whose float mean is not exactly the value (a std of ~1e-16 printed "± 1.36e-16": a
    shipped export re-rendered differed from the store by it)."""
    value = 0.802811860293
    assert spread([value] * 3) == spread([value]) == "0.8028"
    assert spread([1.0, 2.0, 3.0]) == "2 ± 1"
