"""A model's family when none is typed: the lineage its id names, so that models of one maker's
line (``gpt-4o`` and ``gpt-4o-mini``, ``llama-3.1-8b`` and ``llama-3.1-70b``) are one family.

A family is what keeps a judge from marking its own kind (``race.jury``) and an explorer from
sitting beside a member of its own kind (``panel.seating``), so the rule errs towards one family:
two models wrongly put together only cost a choice of judge or explorer, two wrongly kept apart
let a model judge its own line.

The rule (``stem``), on the served id (else the alias):

1. Lower case; keep what follows the last ``/`` (an aggregator's ``vendor/model`` path), and cut
   at the first ``:`` or ``@`` (a tag such as ``llama3.1:70b``, ``:free``, ``@20240620``).
2. The first word (words are split by ``-``, ``_`` and spaces); a ``maker.`` prefix before a
   name (``anthropic.claude-…``, ``meta.llama3-…``) is dropped.
3. The letters the word starts with are the family (``gpt``, ``llama`` of ``llama3.1``, ``qwen``
   of ``qwen2.5``); a word that starts with fewer than two letters (``o3``) is kept whole.
4. A few lines whose names do not show their maker are mapped to it (``LINES``: ``o1``, ``o3``
   and ``chatgpt`` are ``gpt``; ``mixtral`` and ``codestral`` are ``mistral``; ``codellama`` is
   ``llama``; ``qwq`` is ``qwen``).

So ``openai/gpt-4o-mini``, ``gpt-4.1`` and ``o3-mini`` are ``gpt``; ``claude-3-5-sonnet-20241022``
and ``claude-sonnet-4`` are ``claude``; ``meta-llama/llama-3.1-8b-instruct`` and
``llama3.1:70b`` are ``llama``. A family typed on the roster always wins; a family the catalog
knows for the model (a models.dev ``family``) comes next, read by this same rule, since catalogs
name size classes there (``gpt-mini``, ``o-mini``) that would split one line in two.
"""

from __future__ import annotations

import re

LINES = {
    "o": "gpt",
    "o1": "gpt",
    "o3": "gpt",
    "o4": "gpt",
    "chatgpt": "gpt",
    "mixtral": "mistral",
    "codestral": "mistral",
    "ministral": "mistral",
    "magistral": "mistral",
    "devstral": "mistral",
    "pixtral": "mistral",
    "codellama": "llama",
    "qwq": "qwen",
    "codegemma": "gemma",
}
_WORD = re.compile(r"[-_ ]+")
_MAKER = re.compile(r"([a-z]{2,})\.([a-z].*)")
_LETTERS = re.compile(r"[a-z]*")
_VALID = re.compile(r"[a-z0-9][a-z0-9._:/-]{0,95}")


def stem(model_id: str) -> str:
    """The family ``model_id`` names by the rule above; the id itself (lower-cased, what a
    family may not hold made ``-``) when the rule finds no name in it."""
    whole = (model_id or "").strip().lower()
    name = re.split(r"[:@]", whole.rsplit("/", 1)[-1], maxsplit=1)[0]
    words = [w for w in _WORD.split(name) if w]
    if not words:
        return whole
    first = words[0]
    maker = _MAKER.fullmatch(first)
    if maker:
        first = maker.group(2)
    found = _LETTERS.match(first)
    assert found is not None  # [a-z]* matches at the start of any string
    letters = found.group(0)
    family = letters if len(letters) >= 2 else first
    family = LINES.get(family, LINES.get(first, family))
    if _VALID.fullmatch(family):
        return family
    return re.sub(r"[^a-z0-9._:/-]+", "-", whole).strip("-._:/")[:96] or "model"
