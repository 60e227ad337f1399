"""``python metrics/offload.py verdict <call> --useful|--not-useful ...``: the same commands as
``panelist``, for scripts written against the offload log's command line."""

import sys
from pathlib import Path

if not __package__:
    # run as a file, this folder would shadow the package; import the checkout as ``panelist``
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    import _bootstrap  # noqa: F401

from panelist.metrics.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
