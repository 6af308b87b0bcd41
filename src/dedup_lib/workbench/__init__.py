"""What the analyst sees: charts, the window explorer, the headless postmortem report.

- The notebooks' sections: :mod:`~dedup_lib.workbench.findings` (one function per section),
  :mod:`~dedup_lib.workbench.section` (what a section shows), :mod:`~dedup_lib.workbench.sizing`
  (sizing the window, notebook 03), :mod:`~dedup_lib.workbench.incident` (the incident
  postmortem, notebook 04) and :mod:`~dedup_lib.workbench.monitor` (the live monitor in a
  notebook, notebook 05).
- Charts and tables: :mod:`~dedup_lib.workbench.charts` (plotly figures from small tables),
  :mod:`~dedup_lib.workbench.figures` (the house style, every text made safe),
  :mod:`~dedup_lib.workbench.redraw` (charts that redraw in place),
  :mod:`~dedup_lib.workbench.delay_bins` (resend delays for any histogram) and
  :mod:`~dedup_lib.workbench.style` (one style for every table).
- The window explorer: :mod:`~dedup_lib.workbench.explorer` (``WindowExplorer``, its
  controls), :mod:`~dedup_lib.workbench.view` (what it shows for one setting) and
  :mod:`~dedup_lib.workbench.modes` (its caches per partitioning mode).
- Files: :mod:`~dedup_lib.workbench.report` (the postmortem run headless, as one HTML file),
  :mod:`~dedup_lib.workbench.csp` (that page's Content-Security-Policy) and
  :mod:`~dedup_lib.workbench.notebooks` (the notebooks, copied into a folder).
"""
