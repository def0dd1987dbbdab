"""`semsearch serve`: an HTTP API and a search page over one or more index folders.

`app.py` (routes, errors, auth), `registry.py` (the served indexes, kept on their current
generation), `batcher.py` (queries of concurrent requests encoded together), `metrics.py`
(Prometheus), `schemas.py` (settings, limits, request bodies), `page.html` (the page).
"""
