"""Run the simulated OpenAI-compatible provider on its own (``metrics.upstream.sim``)::

python scripts/sim_upstream.py [--host H] [--port P] [--models FILE.json]
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa: F401

from panelist.metrics.upstream.sim import main

if __name__ == "__main__":
    sys.exit(main())
