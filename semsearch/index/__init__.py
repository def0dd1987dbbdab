"""Indexes: choosing a FAISS structure, building it from a corpus, and storing it in a folder.

An index folder `indexes/<name>/` holds `index.faiss`, `metadata.parquet` (row i describes
vector i) and `manifest.json`, the one record of how the index was made.
"""
