"""Let a checkout import itself as the package ``panelist``, whatever its folder is called.

Entry points run straight from a checkout (``python gateway.py``, ``python metrics/offload.py``,
``python scripts/sim_upstream.py``) import this first. Installed, the same modules are reached as
``panelist.*`` and this file does nothing, so there is one import style for both ways in and no
generic top-level name such as ``metrics`` ever lands in site-packages.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def register() -> None:
    if "panelist" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "panelist", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the checkout at {ROOT} as the package panelist")
    module = importlib.util.module_from_spec(spec)
    sys.modules["panelist"] = module
    spec.loader.exec_module(module)


register()
