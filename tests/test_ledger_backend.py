"""Both homes of the ledger's records satisfy one interface (``metrics.ledger.backend.Logs``):
every method of it, with the same parameters, on the JSONL files and on PostgreSQL. The check
reads the classes; it needs no database."""

import inspect

import pytest

from panelist.metrics.ledger.backend import Logs
from panelist.metrics.ledger.logs import FileLogs
from panelist.metrics.ledger.pglogs import DatabaseLogs

METHODS = sorted(
    name for name, value in vars(Logs).items() if callable(value) and not name.startswith("_")
)


def parameters(fn) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default (annotations may name each home's own types)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_the_interface_names_what_the_ledger_calls():
    assert len(METHODS) >= 20
    assert {
        "follow",
        "append",
        "reader",
        "exclusive",
        "reserve",
        "append_panels",
        "panel_at",
        "close",
    } <= set(METHODS)


@pytest.mark.parametrize("home", [FileLogs, DatabaseLogs], ids=["files", "postgres"])
def test_each_home_has_every_method_with_its_parameters(home):
    missing = [m for m in METHODS if not callable(getattr(home, m, None))]
    assert not missing, f"{home.__name__} lacks {missing}"
    differ = {
        m: (parameters(getattr(home, m)), parameters(getattr(Logs, m)))
        for m in METHODS
        if parameters(getattr(home, m)) != parameters(getattr(Logs, m))
    }
    assert not differ, differ
    assert isinstance(getattr(home, "snapshots", None), bool)


def test_an_opened_file_home_is_one_by_isinstance(tmp_path):
    logs = FileLogs(tmp_path / "gateway")
    try:
        assert isinstance(logs, Logs)
    finally:
        logs.close()
