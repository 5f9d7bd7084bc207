"""The stream processor: the single writer per operation key."""
