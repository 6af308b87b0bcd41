"""Sphinx configuration of the documentation site (``make docs``).

Sphinx rather than MkDocs because the docstrings are reStructuredText (``:func:`` roles,
double-backquoted literals), which autodoc renders as written; the public names' docstrings
are in numpydoc sections, read by napoleon; the guide pages are Markdown (MyST). The PyData
theme, as the PyData projects use. Nothing is fetched from the network (no intersphinx): the
build runs on machines without it.
"""

from __future__ import annotations

import dedup_lib

project = "dedup-lib"
author = "dedup-lib"
release = dedup_lib.__version__
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    # The public docstrings' numpydoc sections (Parameters, Returns, Raises, Examples), as
    # Sphinx ships it: no package of its own to install.
    "sphinx.ext.napoleon",
]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# Attributes as fields of the class, not entries of their own beside autodoc's members.
napoleon_use_ivar = True
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]
autosummary_generate = True
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {
    "members": True,
    "show-inheritance": False,
    # What a class inherits from the library's own bases is shown on its page.
    "inherited-members": "Exception, BaseException",
}
html_theme = "pydata_sphinx_theme"
html_title = "dedup-lib"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_show_sourcelink = False
html_static_path: list[str] = []
