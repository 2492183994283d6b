"""Sphinx configuration: the user guide (``guide/``), the API reference (``api.rst``) and the
decision records (``decisions/``), built with warnings as errors by ``tests/test_docs.py``."""

import polydom

project = "polydom"
author = "the polydom authors"
release = version = polydom.__version__

extensions = ["sphinx.ext.autodoc", "numpydoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# The API reference documents what a user imports from ``polydom``; members are listed in
# source order, and numpydoc renders the Parameters / Returns sections.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Decision records quote file paths (``benchmarks/results/...``) that are not pages of this site.
myst_heading_anchors = 3
suppress_warnings = ["myst.xref_missing"]

html_theme = "alabaster"
html_title = "polydom"
