#!/usr/bin/env bash
# Type-checks metrics/, suite/, scripts/ and the entry points with mypy, under the settings in
# pyproject.toml's [tool.mypy]. The checkout's root is the package `panelist` (imports read
# `from panelist.metrics…`), so mypy is shown the checkout through a symlink named `panelist`
# in a temporary folder; nothing is written into the checkout but mypy's cache.
# Exit code: mypy's (0 when it finds nothing). Extra arguments go to mypy.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ln -s "$root" "$tmp/panelist"
cd "$tmp"
python -m mypy --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache" "$@" \
    panelist/metrics panelist/suite panelist/scripts panelist/gateway.py panelist/serve.py
