"""`python -m indexerd.cli.main` runs the command line."""

from indexerd.cli.main import main

raise SystemExit(main())
