"""Markdown tables of the report: a cell holding a pipe (a name such as |L|*) stays one cell, written and read."""

from jaxmem.report.text import markdown_table, row_cells


def test_a_pipe_in_a_cell_is_escaped_and_read_back_as_one_cell():
    table = markdown_table(["y", "slope"], [["|L|*", 0.5], ["N*", 1.25]])
    header, row = table.splitlines()[0], table.splitlines()[2]
    assert row_cells(header) == ["y", "slope"]
    assert row_cells(row) == [r"\|L\|*", "0.5"]
    assert row_cells(table.splitlines()[3]) == ["N*", "1.25"]


def test_a_cell_escaped_already_is_not_escaped_twice():
    assert markdown_table(["a"], [[r"x \| y"]]).splitlines()[2] == r"| x \| y |"
