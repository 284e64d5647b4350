"""The quorum queue type: rabbit_fifo's observable behaviour, membership, restart order and
at-least-once dead-lettering."""
