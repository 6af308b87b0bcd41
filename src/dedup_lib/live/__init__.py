"""The live monitor: the broker's verdicts on sends as they land (SPEC section 8)."""
