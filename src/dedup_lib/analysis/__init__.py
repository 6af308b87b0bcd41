"""Tables read from a replay: summaries, what detection misses and destroys, what-ifs."""
