"""SQL change queues: full load, queue drain, rows."""
