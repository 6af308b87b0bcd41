"""The broker's rules, in pure Python: the window and key rule, durations, the broker model."""
