"""What the analyst sees: charts, the window explorer, the headless postmortem report."""
