"""Reading what users give: corpora (Parquet, CSV/TSV, JSONL; one file, many files or a URI),
vector columns, and the small files named on the command line."""
