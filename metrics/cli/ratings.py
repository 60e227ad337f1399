"""``panelist ratings``: each model's rating per shape, from the verdicts' pairs, the suite and
the races (``ledger.ratings``), with its 95% interval; read from the pairs saved with the
ledger's snapshot and the verdicts after them, never by rereading the whole log.
"""

from __future__ import annotations

import contextlib

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import SHAPE


def register(nouns, common) -> None:
    r = nouns.add_parser(
        "ratings", parents=[common], help="each model's rating per shape, with its interval"
    )
    r.add_argument("--shape", metavar="S", help="only this shape (default: every shape rated)")


def check_shape(shape: str) -> str:
    if not SHAPE.fullmatch(shape):
        raise BadRequest(
            f"--shape '{shape}' is not a shape; use lower-case letters, digits "
            "and '-', e.g. general or review"
        )
    return shape


@contextlib.contextmanager
def book_of(home):
    """The data folder's ratings, over the saved pairs and the verdicts after them: the
    ledger's whole index is not loaded (``ledger.pairsfile``). With a database there is no
    evidence file to read after the pairs: the ledger is opened, from its own snapshot."""
    from panelist.metrics.ledger.ratings import Ratings

    if home.database:
        from panelist.metrics.ledger.ledger import Ledger

        with Ledger.of_home(home) as ledger:
            yield Ratings.of_home(home, ledger)
        return
    from panelist.metrics.ledger.pairsfile import PairsView

    yield Ratings.of_home(home, PairsView(home.gateway_runs))


def cmd_ratings(args, out: Out) -> int:
    home = open_home(args.data)
    shape = check_shape(args.shape) if args.shape else None
    with book_of(home) as book:
        found = [book.of(s).public() for s in ([shape] if shape else book.shapes())]
    if out.as_json:
        out.result({"shapes": found})
        return 0
    if not found:
        print(
            "no ratings yet: judge two or more answers of one panel (one useful, one not), "
            "or run the suite or a race"
        )
        return 0
    for i, rated in enumerate(found):
        if i:
            print()
        print(
            f"{rated['shape']}: {rated['comparisons']} comparisons ("
            + ", ".join(f"{n} from {k}" for k, n in rated["sources"].items())
            + ")"
        )
        out.table(
            [
                dict(
                    r, interval="{:.2f}-{:.2f}".format(*r["interval"]), rating=f"{r['rating']:.2f}"
                )
                for r in rated["models"]
            ],
            ["alias", "rating", "interval", "wins", "losses"],
        )
    return 0


COMMANDS = {"ratings": cmd_ratings}
