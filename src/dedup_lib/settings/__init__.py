"""The entities' real duplicate-detection settings, read from ARM templates, az and the emulator."""
