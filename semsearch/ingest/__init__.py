"""Rows into an index: source -> parts -> encode -> write, for `build`, `add`/`delete` and the
maintenance that makes new generations from stored vectors (reindex, compact, rollback)."""
