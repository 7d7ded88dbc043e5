"""Local trees: the stat scan, live watching, confined opens."""
