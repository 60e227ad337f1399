"""Who can be asked: the roster of models and endpoints (``roster``), named panels
(``collection``), quality tiers (``grades``), what is known of each served model and where from
(``catalog``, ``learned``, ``known``), what endpoints serve (``discover``) and the demo roster.

Imports ``metrics.store``, ``metrics.errors``, ``metrics.home``, ``metrics.plaintext``, and the
alert log. The roster's own nouns (``Model``, ``Roster``) import from here as well, as code
written against the flat layout does (the suite's claim fixtures among it).
"""

from panelist.metrics.roster.roster import Model, Roster

__all__ = ["Model", "Roster"]
