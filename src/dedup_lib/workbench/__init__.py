"""What the workbench notebooks show, apart from the analyses: tables styled for reading."""
