"""The index on disk: its folder, generations and manifest, segments and their parts, the
lexical (BM25) part of a segment, checksums and verification, and FAISS structures filled from
the stored vectors."""
