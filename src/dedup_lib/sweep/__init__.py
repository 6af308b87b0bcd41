"""Any window's verdicts from one Spark pass: the explorer's and the sweep's engine."""
