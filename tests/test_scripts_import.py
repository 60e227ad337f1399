"""Every script under scripts/ imports. The scripts are run by hand, not by the tests, so a
module they use that moved elsewhere in the code base would otherwise be noticed only by whoever
next runs them."""

import importlib
import pkgutil

import pytest

from panelist import scripts

NAMES = sorted(m.name for m in pkgutil.iter_modules(scripts.__path__))


def test_the_scripts_are_found():
    assert "bench_mechanisms" in NAMES and "benchkit" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_script_imports(name):
    module = importlib.import_module(f"panelist.scripts.{name}")
    assert module.__name__ == f"panelist.scripts.{name}"
    assert module.__doc__, f"scripts/{name}.py says nothing of what it does"
