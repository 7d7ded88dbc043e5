"""The core: dates, the re-index decision, the pipeline, the one writer thread, the state store."""
