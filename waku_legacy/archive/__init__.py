"""Community history archives (61/Community History Archives, status-go flavour by default)."""
