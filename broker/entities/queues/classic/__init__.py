"""The classic queue type: its ready list, in-memory window and paging."""
