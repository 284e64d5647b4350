"""Erlang's phash2 and the exs1024 jump hash the hash exchanges route with (the core compiled
with mypyc when it can be)."""
