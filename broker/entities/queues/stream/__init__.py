"""The stream queue type: an append-only log read by offset, with retention by segment."""
