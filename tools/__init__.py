"""Developer commands that are not part of the product (not shipped in the wheel)."""
