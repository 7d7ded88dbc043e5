"""What the command line and the daemon both show: the text layouts of ``ctl`` and the escaping
of untrusted values (:mod:`~indexerd.output.terminal`), writing to standard output
(:mod:`~indexerd.output.stdout`), and the read-only reports from the state store
(:mod:`~indexerd.output.reports`).

:mod:`~indexerd.output.terminal` and :mod:`~indexerd.output.stdout` import nothing of indexerd,
so the fast path of ``ctl search`` (:mod:`indexerd.cli.entry`) stays light.
"""
