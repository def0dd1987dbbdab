"""Indexes: a living store of segments (vectors, ids, metadata, a FAISS index each) and
generations, built from a corpus, changed in place, searched with filters.

See `store` for the folder layout, `vector_index` for everything FAISS, and `living.Index`
for the Python face of build/add/delete/reindex/compact/rollback.
"""
