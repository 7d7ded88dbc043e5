"""The command line: `indexerd index|run|check-config|ctl ...`."""
