"""Multi-process support: the key-value store processes meet through (store.py) and the
options of a multi-process client (options.py)."""
