"""The run report: one self-contained HTML page of an optimization run (`forge report`, the editor's view).

`data.gather` reads a run from the run store as plain data; `render.render_html` turns it into the page.
"""

from .data import ModelWideModule, ModelWideSection, ReportData, gather
from .render import render_html

__all__ = ["ModelWideModule", "ModelWideSection", "ReportData", "gather", "render_html"]
