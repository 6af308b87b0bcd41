"""Any window's verdicts from one Spark pass: the explorer's and the sweep's engine.

``collect`` (Spark to arrays, once), ``anchors`` (the window rule, in numpy), ``cache``
(:class:`ReplayCache` and the tables it answers), ``truth`` (ground truth), ``grid`` (which
windows to sweep).
"""
