"""`python -m semsearch` runs the command line."""

from __future__ import annotations

from semsearch.cli.app import main

main()
