"""Deferred statements kept as runs: the same text deferred in a row joins one run, in order."""

from __future__ import annotations

from tools.db.deferred import DeferredRuns, add_deferred


def test_the_same_text_in_a_row_is_one_run_and_order_is_kept() -> None:
    runs: DeferredRuns = []
    for params in ([1], [2], [3]):
        add_deferred(runs, "INSERT a", params)
    add_deferred(runs, "UPDATE b", [4])
    add_deferred(runs, "INSERT a", [5])
    assert runs == [("INSERT a", [[1], [2], [3]]), ("UPDATE b", [[4]]), ("INSERT a", [[5]])]


def test_what_the_engine_cannot_batch_stays_a_run_of_one() -> None:
    runs: DeferredRuns = []
    add_deferred(runs, "SELECT 1", [], batchable=False)
    add_deferred(runs, "SELECT 1", [], batchable=False)
    assert runs == [("SELECT 1", [[]]), ("SELECT 1", [[]])]
