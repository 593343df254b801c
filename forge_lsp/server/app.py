"""The language server's composition root: the server and its features, put together. `server.py` is the server
alone and knows no feature; each feature module (`features/`) registers its own handlers and commands on it, and
what it must close when the session ends (`ForgeServer.on_session_end`)."""

from __future__ import annotations

from .features import actions, documents, hotspots, hover, jobs, lifecycle, model_wide, report
from .server import ForgeServer

#: The features, in the order they register.
FEATURES = (lifecycle, documents, actions, jobs, hotspots, model_wide, hover, report)


def create_server() -> ForgeServer:
    ls = ForgeServer()
    for feature in FEATURES:
        feature.register(ls)
    return ls
