"""Approximate and exact nearest-neighbour search behind one small interface.

- `exact`: the package's one exact k-NN (torch, on any device, tiled over queries and base).
- `devices`: where the work runs and what happens when a GPU runs out of memory.
- `kmeans`: IVF's k-means and list assignment through the exact k-NN (spherical for inner
  product, as FAISS trains IVF).
"""
