"""The dashboard's races: a page of past races, one race's report, and the prompt one judge
was shown in it; the server's ``races`` part reads them from the data folder.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.server.api import ApiRequest


def list_races(req: ApiRequest) -> dict:
    return req.parts.races.listing(req.query.get("limit"), req.query.get("before"))


def get_race(req: ApiRequest) -> dict:
    return req.parts.races.get(req.params["race"])


def get_race_prompt(req: ApiRequest) -> dict:
    return req.parts.races.prompt(req.params["race"], req.params["name"])


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/races", {"GET": list_races}),
    ("/api/races/{race}", {"GET": get_race}),
    ("/api/races/{race}/judge/{name}", {"GET": get_race_prompt}),
]
