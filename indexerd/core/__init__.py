"""The foundation every other package may import: errors, dates and the date chain, the re-index
decision, outcomes and counts, units and time spans, secrets, node names, and the state store.

Nothing here imports a package of indexerd above it (config, extract, index, sources, pipeline,
runtime, daemon, cli): ``tests/test_layers.py`` checks it.
"""
