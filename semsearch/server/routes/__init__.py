"""The API's routes, one router per resource (FastAPI's "bigger applications" layout):
`status` (the page, /health, /ready, /metrics), `search` and `indexes`."""
