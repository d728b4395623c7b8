"""report.md's critical path section (jaxmem.report.critical_path) from a tiny store's timeline."""

import sqlite3

from jaxmem.persistence.store import COUNTS, Store, load_results
from jaxmem.report.critical_path import critical_path_section


def tiny_store(path):
    store = Store(path)
    store.add_compile("b", {"d": 8}, 4, 0.5, 1.0)
    store.add_timeline(
        [
            ("run", "a", 0, 512, 512, "done"),
            ("run", "b", 0, 128, 128, "frozen"),
            ("run", "c", 128, 256, 256, "done"),
            ("search", "u/0", 0, 512, 512, "done"),
            ("search", "u/1", 0, 256, 256, "done"),
        ]
    )
    store.close()


def section_of(path, budget=256):
    timeline, compiles = load_results(path, "timeline", expand=False), load_results(path, "compiles")
    return critical_path_section(timeline, compiles, budget)


def test_the_section_states_the_critical_path_in_steps_and_budgets_without_a_verdict(tmp_path):
    tiny_store(tmp_path)
    text = section_of(tmp_path)
    assert text.startswith("## Critical path")
    row = text.splitlines()[-1]
    assert row == "| 512 | 2.00 / 1.50 | 768 | 3 (1) | 38% of 4 slots |"  # 768 run-steps / (4 slots x 512)
    assert not any(verdict in text for verdict in ("PASS", "FAIL", "INCONCLUSIVE"))
    assert section_of(tmp_path, budget=None) == ""


def test_a_store_without_a_timeline_has_no_section(tmp_path):
    tiny_store(tmp_path)
    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.execute("DROP TABLE timeline")
    db.execute(f"DELETE FROM {COUNTS} WHERE name = 'timeline'")
    db.commit()
    db.close()
    assert section_of(tmp_path) == ""
