"""A `ReportData` as one self-contained HTML page.

The page is the Jinja2 template `report.html.j2` with everything inlined: the vendored chart library
(uPlot), highlighter (highlight.js) and diff (jsdiff) from `vendor/`, the page's own script and style, and
the data as gzip-compressed JSON in base64, which the page inflates with the browser's own
`DecompressionStream`. Its Content-Security-Policy allows only the page's own nonce'd script and style
and `data:` images: a report cannot make a network request, from `file://`, from the language server's
page or inside the editor's webview.
"""

from __future__ import annotations

import base64
import gzip
import json
import secrets
from functools import cache
from importlib import resources

import jinja2
from markupsafe import Markup

from .data import ReportData

VENDOR_SCRIPTS = ("uPlot.iife.min.js", "highlight.min.js", "diff.min.js")
VENDOR_STYLES = ("uPlot.min.css", "highlight-github.min.css")


@cache
def _asset(name: str) -> str:
    return (resources.files("forge_lsp.report") / name).read_text(encoding="utf-8")


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(_asset("report.html.j2"))


def content_security_policy(nonce: str) -> str:
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'nonce-{nonce}'",
            f"style-src 'nonce-{nonce}'",
            "img-src data:",
            "connect-src 'none'",
            "font-src 'none'",
            "frame-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        ]
    )


def pack(data: ReportData) -> str:
    """The data as the page reads it: JSON, gzip, base64."""
    raw = json.dumps(data.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def render_html(data: ReportData, *, nonce: str | None = None, title: str | None = None) -> str:
    """The report page. `nonce` (random when not given) is the CSP nonce of its script and style."""
    nonce = nonce or secrets.token_urlsafe(18)
    return _template().render(
        nonce=nonce,
        csp=content_security_policy(nonce),
        title=title or f"forge report {data.run_id}",
        data=data,
        payload=pack(data),
        vendor_scripts=[Markup(_asset(f"vendor/{n}")) for n in VENDOR_SCRIPTS],
        vendor_styles=[Markup(_asset(f"vendor/{n}")) for n in VENDOR_STYLES],
        app_script=Markup(_asset("report.js")),
        app_style=Markup(_asset("report.css")),
    )
