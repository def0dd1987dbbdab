"""Nearest-neighbour search behind one small interface, whatever library and device.

- `base`: the interface every backend implements (train, add with ids, remove, search with
  per-call parameters and filters, exact k-NN, write/read, memory estimate), and the
  vector preparation and id filter they all take.
- `exact`: the package's one exact k-NN (torch, on any device, tiled over queries and base).
- `torch_exact`: the torch backend, exact search on any device.
- `faiss_gpu`: FAISS indexes placed on a GPU and back (FAISS's own backend is
  `semsearch.ann.vector_index.VectorIndex`).
- `kmeans`: IVF's k-means and list assignment through the exact k-NN (spherical for inner
  products, as FAISS trains IVF).
- `devices`: where the work runs (`FaissDevice`), out-of-memory errors, the torch cache.
"""
