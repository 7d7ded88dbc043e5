"""The sources: local trees, web sites, SQL change queues."""
