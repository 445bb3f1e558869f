#!/usr/bin/env bash
# The project's standing checks, in the order a failure is cheapest to see: lint, import
# layers, types, then the test suite (pytest + the lit/FileCheck suite). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
lint-imports
# mypy needs the repository seen as the `mirage_xdsl` package it installs as
view="$(mktemp -d)"
trap 'rm -rf "$view"' EXIT
ln -s "$PWD" "$view/mirage_xdsl"
(cd "$view" && mypy --config-file "$OLDPWD/pyproject.toml" -p mirage_xdsl)
python -m pytest -q -p no:cacheprovider "$@"
