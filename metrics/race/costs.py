"""What model calls cost in money: the roster's prices (per million tokens) × the tokens used.

Invariants: an amount is always paired with its model's currency and amounts in different
currencies are never added (``Costs`` keeps one sum per currency). A call whose model has no
price, or whose upstream reported no token counts, has an unknown cost (None), which is never
taken as zero: a sum that met an unknown cost says so (``Costs.unknown``).
"""

from __future__ import annotations

from panelist.metrics.roster.roster import Model

PER = 1_000_000  # roster prices are per million tokens


def call_cost(model: Model, tokens: dict | None) -> float | None:
    """The cost of one call in ``model.currency``, or None when it cannot be known."""
    if model.price_in is None or model.price_out is None or not tokens:
        return None
    prompt, completion = tokens.get("prompt"), tokens.get("completion")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return (prompt * model.price_in + completion * model.price_out) / PER


class Costs:
    """Sums per currency; ``unknown`` counts the calls whose cost could not be known."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.unknown = 0

    def add(self, currency: str, amount: float | None) -> None:
        if amount is None:
            self.unknown += 1
        else:
            self.sums[currency] = self.sums.get(currency, 0.0) + amount

    def add_call(self, model: Model, tokens: dict | None) -> None:
        self.add(model.currency, call_cost(model, tokens))

    def public(self) -> dict:
        return {
            "by_currency": {c: round(v, 8) for c, v in sorted(self.sums.items())},
            "unknown_calls": self.unknown,
        }
