"""The entities' real duplicate-detection settings, read from ARM templates, az and the emulator.

:mod:`.load` reads a file of any format; :mod:`.model` holds :class:`~.model.EntitySettings`
and the checks the service would make; :mod:`.arm` (with :mod:`.arm_expressions`), :mod:`.az`
and :mod:`.emulator` are the readers.
"""
