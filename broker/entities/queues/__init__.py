"""Queue types (classic, quorum, stream) and the parts they share: the queue-type behaviour,
argument rules, consumer selection."""
