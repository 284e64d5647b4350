"""Queue types (classic, quorum, stream) and the parts they share: the queue-type interface and its
ports, argument rules, consumer selection, the ready list, the x-expires countdown."""
