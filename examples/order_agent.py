"""An order-lookup agent raced across its grade on the demo roster, offline.

    python examples/order_agent.py [--runs N] [--data DIR]

``OrderAgent`` answers a customer's question about an order with two tools: ``find_order``
(the order behind a receipt number) and ``shipping_status`` (where that order's parcel is). It
declares the grade it needs, ``general``; the race runs it once on the model the deployment pins
for that grade (the reference), then ``--runs`` times on every model of the grade, and has the
ceiling model judge each run blind against the reference, beside this file's own scorer.

Nothing here leaves the machine. The models are the demo's simulated ones (``sim-…``, served by
``scripts/sim_upstream.py`` as ``panelist serve --demo`` serves them), scripted here so the race
is the same every time:

* ``sim-steady`` (pinned for ``general``) and ``sim-vision`` look the order up, then its
  shipment, and answer with what the tools said;
* ``sim-flaky`` looks the order up but never asks for the shipment, and says so (its demo
  habit of failing every third call is left out here, so the race comes out the same every
  time);
* ``sim-careful``, the ceiling, judges: it marks down an answer that leaves the delivery out (a
  rule on the text it reads) and gives every other run the same marks. Code adds the tool
  difference (accuracy capped at 4) and the scorer, which takes part in the verdict. A judge
  that gave every run the same marks could not tell the models apart, and the verdict would
  name no model.

Six runs a model let the verdict's test name ``sim-vision`` at a first look's level (1.48%);
with two it says how many more runs would settle it, and names none.

The demo models are free; the race's verdict is about money, so this example prices them (the
prices are made up). The data folder is a temporary one unless ``--data`` names one to keep.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
if (CHECKOUT / "_bootstrap.py").is_file():  # in a checkout: this checkout is ``panelist``
    sys.path.insert(0, str(CHECKOUT))
    import _bootstrap  # noqa: F401

from panelist.metrics.roster import demo
from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import Benchmark, tool
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import DEMO_MODELS, SimUpstream

# -- the job ---------------------------------------------------------------------------------------
ORDERS = {"1042": {"order_id": "ord-1042", "placed": "2026-11-24", "items": ["kettle", "two mugs"]}}
SHIPMENTS = {
    "ord-1042": {"carrier": "Parcelwise", "status": "in transit", "expected": "2026-12-03"}
}


@tool(
    {
        "type": "object",
        "properties": {"number": {"type": "string", "description": "the number on the receipt"}},
        "required": ["number"],
    }
)
def find_order(number):
    """Find an order by the number on the customer's receipt."""
    found = ORDERS.get(str(number).lstrip("#"))
    if found is None:
        raise KeyError(f"no order numbered {number}")
    return found


@tool({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]})
def shipping_status(order_id):
    """Where an order's parcel is and when it is expected."""
    found = SHIPMENTS.get(order_id)
    if found is None:
        raise KeyError(f"no shipment for {order_id}")
    return found


class OrderAgent:
    grade = "general"
    system = (
        "You answer customers' questions about their orders. Look the order up with "
        "find_order, then its parcel with shipping_status, and say what you found."
    )

    def run(self, question, seat):
        return seat.chat(
            [{"role": "system", "content": self.system}, {"role": "user", "content": question}],
            tools=[find_order, shipping_status],
        )


QUESTION = "Hi, where is my order #1042? When will it arrive?"
RUBRIC = (
    "Gives the parcel's status and its expected delivery date as the tools reported them, "
    "and nothing the tools did not say."
)
FACTS = ("in transit", "2026-12-03")


def scorer(reference, output):
    """The share of the reference's facts (status, date) the output repeats; None when the
    reference gave none of them, so there is nothing to compare."""
    facts = [f for f in FACTS if f in reference]
    if not facts:
        return None
    return sum(f in output for f in facts) / len(facts)


# -- the simulated demo models, scripted for this job ----------------------------------------------
LOOKUP = {"name": "find_order", "arguments": {"number": "1042"}}
SHIPPING = {"name": "shipping_status", "arguments": {"order_id": "ord-1042"}}
SCRIPT = {
    "sim-steady": {"tool_calls": [LOOKUP, SHIPPING]},
    "sim-vision": {"tool_calls": [LOOKUP, SHIPPING]},
    "sim-flaky": {
        "tool_calls": [LOOKUP],
        "fail": None,  # no server errors: one outcome
        "answer": "[simulated sim-flaky] Order ord-1042 was placed on 2026-11-24; I "
        "did not look up its delivery.",
    },
    "sim-careful": {
        "json": {
            "accuracy": 7,
            "shown_work": 2,
            "reason": "Reports the order and its delivery as the tools gave "
            "them, naming each lookup.",
        },
        "json_rules": [
            {
                "contains": "I did not look up its delivery",
                "answer": {
                    "accuracy": 3,
                    "shown_work": 2,
                    "reason": "Reports the order but leaves out its delivery, which the "
                    "reference gives.",
                },
            }
        ],
    },
}
# made-up prices per million tokens (input, output), so the verdict has costs to weigh
PRICES = {
    "sim-swift": (0.10, 0.40),
    "sim-steady": (3.00, 15.00),
    "sim-careful": (5.00, 25.00),
    "sim-flaky": (0.15, 0.60),
    "sim-vision": (0.40, 1.60),
}


def simulated() -> SimUpstream:
    models = {
        name: dict(behaviour, **SCRIPT.get(name, {})) for name, behaviour in DEMO_MODELS.items()
    }
    return SimUpstream(models)


def price_demo(roster: Roster) -> None:
    for alias, (price_in, price_out) in PRICES.items():
        model = roster.view().models[alias]
        fields = {k: v for k, v in model.public().items() if k not in ("alias", "endpoint")}
        fields.update(price_in=price_in, price_out=price_out, currency="USD", tools=True)
        roster.add_model(alias, model.endpoint, by="example", **fields)


def race(data: Path, runs: int):
    """Race the agent on the demo roster in ``data``; (what the reference returned, report)."""
    with simulated() as sim:
        home = open_home(data)
        demo.install(home, sim.url)
        roster = Roster(home)
        price_demo(roster)
        # the demo pins sim-steady for general and sim-careful for strong (the ceiling)
        bench = Benchmark(OrderAgent, runs=runs, home=home)
        bench.set_input(QUESTION)
        bench.set_rubric(RUBRIC)
        bench.set_scorer(scorer)
        answer = bench.run()
        return answer, bench.report()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Race an order-lookup agent on the demo roster.")
    parser.add_argument("--runs", type=int, default=6, help="runs per model (default 6)")
    parser.add_argument(
        "--data", type=Path, help="keep the data folder here (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    if args.data is not None:
        answer, report = race(args.data, args.runs)
    else:
        with tempfile.TemporaryDirectory(prefix="panelist-race-") as data:
            answer, report = race(Path(data), args.runs)
    print(f"the reference answered: {answer}\n")
    print(report.table())
    if args.data is not None:
        print(f"\nreport: {args.data.resolve() / 'runs' / 'races' / report.race}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
