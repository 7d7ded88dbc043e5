"""Web sites: the crawl, its frontier, politeness, robots.txt, sitemaps, URLs, fetch, mirror."""
