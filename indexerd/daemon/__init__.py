"""The daemon (`indexerd run`): control socket, systemd notify, write access checks."""
