"""The broker's rules, in pure Python: the window and key rule, durations, the broker model.

- :mod:`~dedup_lib.rules.policy`: one entity's duplicate-detection policy: its window, its
  partitioning mode and the key rule.
- :mod:`~dedup_lib.rules.durations`: durations as people and Azure write them.
- :mod:`~dedup_lib.rules.broker`: a message-at-a-time model of the broker, the rule book kept
  obvious.
"""
