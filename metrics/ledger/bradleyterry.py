"""Bradley–Terry strengths from win counts, with bootstrap standard errors.

Model: the chance that ``i`` is judged better than ``j`` is ``p_i / (p_i + p_j)``, that is
``σ(θ_i - θ_j)`` for log-strengths ``θ = log p`` (Bradley and Terry, 1952). ``fit`` finds them
by Newton's method on the log-likelihood, each step solved by conjugate gradients over the
pairs compared (a minorise–maximise iteration, Hunter 2004, crawls when counts are large).

A prior keeps every strength finite and the fit defined on any graph of comparisons: each
player is given ``PRIOR`` win and ``PRIOR`` loss against a fixed average player of strength 1.
That also anchors the scale (no renormalising), and pulls a lightly compared player towards
the average, which is what keeps a few lucky verdicts from reading as a clear difference.

``bootstrap`` plays every pair's comparisons again at the fitted chances (a parametric
bootstrap, which needs no list of the comparisons), refits each redraw (one Newton step from
the full fit) and returns the standard deviation of each log-strength over ``draws`` refits.
It is seeded: the same counts and seed give the same errors in every process.

Invariants: a player with no comparisons has log-strength 0 (the average) and is not listed;
more comparisons at the same rate never widen an error, up to bootstrap noise.
Standard library only.
"""

from __future__ import annotations

import math
import operator
import random

PRIOR = 1.0        # virtual wins and losses against an average player (strength 1)
TOLERANCE = 1e-7   # largest Newton step of a log-strength at which the fit stops
MAX_ITERATIONS = 100
NORMAL_FROM = 30   # comparisons of a pair from which its redraw is taken as normal
TAU = 2 * math.pi
MAX_STEP = 3.0     # the largest change of a log-strength one Newton step may make


class Comparisons:
    """Win counts among ``players`` (sorted, so the fit does not depend on dict order).

    ``cells`` holds ``(i, j, wins of i over j, wins of j over i)`` with ``i < j``."""

    def __init__(self, wins: dict[tuple[str, str], float]):
        names = sorted({a for pair in wins for a in pair})
        at = {a: i for i, a in enumerate(names)}
        both: dict[tuple[int, int], list[float]] = {}
        for (w, l), n in wins.items():
            if w == l or n <= 0:
                continue
            i, j = at[w], at[l]
            key = (i, j) if i < j else (j, i)
            cell = both.setdefault(key, [0.0, 0.0])
            cell[0 if i < j else 1] += n
        self.players = names
        self.cells = [(i, j, a, b) for (i, j), (a, b) in sorted(both.items())]

    def totals(self) -> list[tuple[float, float]]:
        """Each player's ``(wins, losses)``."""
        out = [[0.0, 0.0] for _ in self.players]
        for i, j, a, b in self.cells:
            out[i][0] += a
            out[i][1] += b
            out[j][0] += b
            out[j][1] += a
        return [tuple(x) for x in out]


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _gradient(n: int, cells, theta: list[float]) -> list[float]:
    """The log-likelihood's gradient at ``theta`` (the prior included)."""
    g = [PRIOR * (1.0 - 2.0 * _sigmoid(t)) for t in theta]
    for i, j, a, b in cells:
        expected = (a + b) * _sigmoid(theta[i] - theta[j])
        g[i] += a - expected
        g[j] -= a - expected
    return g


def _information(n: int, cells, theta: list[float]) -> list[list[float]]:
    """The negative Hessian at ``theta``: a weighted graph Laplacian plus the prior's diagonal,
    so always positive definite."""
    m = [[0.0] * n for _ in range(n)]
    for i, t in enumerate(theta):
        s = _sigmoid(t)
        m[i][i] = 2.0 * PRIOR * s * (1.0 - s)
    for i, j, a, b in cells:
        s = _sigmoid(theta[i] - theta[j])
        w = (a + b) * s * (1.0 - s)
        m[i][i] += w
        m[j][j] += w
        m[i][j] -= w
        m[j][i] -= w
    return m


def _inverse(m: list[list[float]]) -> list[list[float]]:
    """The inverse of a positive definite ``m``, by Gauss–Jordan elimination (no pivoting is
    needed: every pivot of a positive definite matrix is positive)."""
    n = len(m)
    rows = [list(r) + [1.0 if i == k else 0.0 for k in range(n)] for i, r in enumerate(m)]
    for k in range(n):
        pivot = rows[k]
        scale = 1.0 / pivot[k]
        pivot = rows[k] = [x * scale for x in pivot]
        for r in range(n):
            if r != k:
                row = rows[r]
                f = row[k]
                if f:
                    rows[r] = [x - f * y for x, y in zip(row, pivot)]
    return [r[n:] for r in rows]


def _times(matrix: list[list[float]], v: list[float]) -> list[float]:
    return [sum(map(operator.mul, row, v)) for row in matrix]


def _newton_step(n: int, cells, theta: list[float], g: list[float]) -> list[float]:
    """``x`` with ``I x = g`` for the information ``I`` at ``theta``, by conjugate gradients
    over the pairs (O(pairs) a round; no n×n matrix is made, which matters for a large roster
    whose pairs are few)."""
    diag = [0.0] * n
    for i, t in enumerate(theta):
        s = _sigmoid(t)
        diag[i] = 2.0 * PRIOR * s * (1.0 - s)
    edges = []
    for i, j, a, b in cells:
        s = _sigmoid(theta[i] - theta[j])
        w = (a + b) * s * (1.0 - s)
        diag[i] += w
        diag[j] += w
        edges.append((i, j, w))

    def times(v):
        out = [d * x for d, x in zip(diag, v)]
        for i, j, w in edges:
            out[i] -= w * v[j]
            out[j] -= w * v[i]
        return out

    x = [0.0] * n
    r = list(g)
    z = [ri / d for ri, d in zip(r, diag)]   # Jacobi preconditioning
    p = list(z)
    rz = sum(map(operator.mul, r, z))
    limit = 1e-24 * max(1.0, sum(map(operator.mul, g, g)))
    for _ in range(max(10, 4 * n)):
        if sum(map(operator.mul, r, r)) <= limit:
            break
        q = times(p)
        step = rz / sum(map(operator.mul, p, q))
        x = [xi + step * pi for xi, pi in zip(x, p)]
        r = [ri - step * qi for ri, qi in zip(r, q)]
        z = [ri / d for ri, d in zip(r, diag)]
        rz, old = sum(map(operator.mul, r, z)), rz
        p = [zi + (rz / old) * pi for zi, pi in zip(z, p)]
    return x


def fit(comparisons: Comparisons) -> list[float]:
    """Each player's log-strength (0: as good as the average player), by Newton's method on
    the log-likelihood, which the prior makes strictly concave; a step is cut short at
    ``MAX_STEP`` so a far start cannot overshoot."""
    n, cells = len(comparisons.players), comparisons.cells
    theta = [0.0] * n
    for _ in range(MAX_ITERATIONS):
        step = _newton_step(n, cells, theta, _gradient(n, cells, theta))
        biggest = max((abs(x) for x in step), default=0.0)
        scale = min(1.0, MAX_STEP / biggest) if biggest else 1.0
        theta = [t + scale * x for t, x in zip(theta, step)]
        if biggest < TOLERANCE:
            break
    return theta


def _binomial(rng: random.Random, n: float, s: float) -> float:
    """A binomial variate of ``n`` trials at chance ``s``: counted when few, else normal with
    the same mean and variance (not rounded: only its spread matters here)."""
    if n < NORMAL_FROM:
        # by inversion: walk the distribution from 0 wins until it passes one uniform
        n, q = int(n), 1.0 - s
        if q <= 0.0:
            return n
        u, k = rng.random(), 0
        chance = cumulative = q ** n
        ratio = s / q
        while u > cumulative and k < n:
            chance *= (n - k) / (k + 1) * ratio
            k += 1
            cumulative += chance
        return k
    z = math.sqrt(-2.0 * math.log(1.0 - rng.random())) * math.cos(TAU * rng.random())
    return min(n, max(0.0, n * s + math.sqrt(n * s * (1.0 - s)) * z))


def bootstrap(comparisons: Comparisons, theta: list[float], *, draws: int = 200,
              seed: int = 0) -> list[float]:
    """Each player's standard error of log-strength over ``draws`` parametric bootstrap
    redraws: every pair's comparisons are played again at the fitted chance (so a pair with
    no loss yet can lose in a redraw; a redraw of the observed counts could not, and would
    call three wins of three certain). Each redraw is refitted by one Newton step from the
    full fit ``theta`` with the full fit's information (a linearised bootstrap: first-order
    exact, and one inverse serves every draw, so a draw costs O(cells + players²))."""
    n, cells = len(comparisons.players), comparisons.cells
    if n == 0 or draws < 2:
        return [0.0] * n
    rng = random.Random(seed)
    inverse = _inverse(_information(n, cells, theta))
    prior = [PRIOR * (1.0 - 2.0 * _sigmoid(t)) for t in theta]
    played = [(i, j, a + b, _sigmoid(theta[i] - theta[j])) for i, j, a, b in cells]
    small = [c for c in played if c[2] < NORMAL_FROM]
    # the many-comparison pairs of a big ledger: a normal draw each, spread precomputed
    large = [(i, j, m * s, math.sqrt(m * s * (1.0 - s)))
             for i, j, m, s in played if m >= NORMAL_FROM]
    uniform, log, sqrt, cos = rng.random, math.log, math.sqrt, math.cos
    sums, squares = [0.0] * n, [0.0] * n
    for _ in range(draws):
        g = list(prior)
        for i, j, m, s in small:
            d = _binomial(rng, m, s) - m * s
            g[i] += d
            g[j] -= d
        for i, j, mean, spread in large:
            d = spread * sqrt(-2.0 * log(1.0 - uniform())) * cos(TAU * uniform())
            g[i] += d
            g[j] -= d
        for k, x in enumerate(_times(inverse, g)):
            sums[k] += x
            squares[k] += x * x
    return [math.sqrt(max(0.0, (sq - s * s / draws) / (draws - 1)))
            for s, sq in zip(sums, squares)]


def chance(theta: float) -> float:
    """The chance a player of log-strength ``theta`` is judged better than an average one."""
    return 1.0 / (1.0 + math.exp(-theta))
