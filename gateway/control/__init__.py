"""Actions to clusters and their confirmations; cluster metrics; presence."""
