"""`semsearch serve`: an HTTP API and a search page over one or more index folders."""
