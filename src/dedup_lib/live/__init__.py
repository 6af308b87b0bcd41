"""The live monitor: the broker's verdicts on sends as they land (docs/rules.md, section 8)."""
