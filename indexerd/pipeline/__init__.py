"""What a source's documents go through: candidate -> extract -> resolve date -> decide -> the
one writer (:mod:`~indexerd.pipeline.stages`, :mod:`~indexerd.pipeline.writer`).

Sources feed it (:class:`~indexerd.pipeline.fetched.Fetched`, :class:`~indexerd.pipeline.stages.Pipeline`);
it sits above the foundation (:mod:`indexerd.core`), extraction and the index engines, below the
sources and the runtime that wires them.
"""
