"""Actions to clusters and their confirmations."""
