"""The dashboard server's entry point (the dashboard arrives in a later change).

For now it runs the gateway, which serves the same routes the dashboard will answer on its
own port: ``python serve.py`` is ``panelist gateway``.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bootstrap  # noqa: F401

from panelist.metrics.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["gateway", *sys.argv[1:]]))
