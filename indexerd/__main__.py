"""`python -m indexerd` runs the command line (``ctl search`` through the daemon's fast path)."""

from indexerd.cli.entry import main

raise SystemExit(main())
