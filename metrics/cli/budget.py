"""The spend-cap options ``panelist key create|budget`` and ``panelist collection save`` share
(``panel.budgets``), and how a cap is said in a line of text.
"""

from __future__ import annotations

from panelist.metrics.panel.budgets import CURRENCY, Budgets


def add_options(parser) -> None:
    parser.add_argument(
        "--budget-day",
        metavar="AMOUNT",
        help=f"spend cap per UTC day in {CURRENCY} ('none' removes it)",
    )
    parser.add_argument(
        "--budget-month",
        metavar="AMOUNT",
        help=f"spend cap per UTC month in {CURRENCY} ('none' removes it)",
    )
    parser.add_argument(
        "--allow-unpriced",
        action="store_true",
        default=None,
        help="let models with no price sit under the cap (their cost is not counted)",
    )
    parser.add_argument(
        "--no-allow-unpriced",
        dest="allow_unpriced",
        action="store_false",
        help="refuse models with no price under the cap (the default)",
    )


def given(args) -> bool:
    return any(v is not None for v in (args.budget_day, args.budget_month, args.allow_unpriced))


def check(args) -> None:
    """Refuse a bad amount before anything is made."""
    from panelist.metrics.panel.budgets import amount

    for period in ("day", "month"):
        value = getattr(args, f"budget_{period}")
        amount(None if str(value).lower() == "none" else value, f"--budget-{period}")


def apply(home, kind: str, name: str, args) -> dict:
    """Set ``name``'s caps from the options given; its report (caps and spend), or {}."""
    budgets = Budgets.of_home(home)
    try:
        if given(args):
            budgets.set(
                kind,
                name,
                day=args.budget_day,
                month=args.budget_month,
                allow_unpriced=args.allow_unpriced,
            )
        return budgets.report(kind, name) or {}
    finally:
        budgets.close()


def said(report: dict) -> str:
    """``5.0000 of 10.00 USD today``-style text, or ``no cap``."""
    parts = [
        f"{report[p]['spent']:.4f} of {report[p]['cap']:.2f} {report['currency']} this {p}"
        for p in ("day", "month")
        if p in report
    ]
    if parts and report.get("allow_unpriced"):
        parts.append("unpriced allowed")
    return "; ".join(parts) or "no cap"
