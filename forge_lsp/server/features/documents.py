"""Open, change, save, close; watched files. Keeps the index current and results honest (stale on change)."""

from __future__ import annotations

from lsprotocol import types as t

from ..feature import Unit
from ..server import MAX_DOC_BYTES, ForgeServer, indexed
from ..state import text_sha
from .lifecycle import file_changed_outside


def register(ls: ForgeServer) -> None:
    def reindex(uri: str) -> None:
        if ls.index is None:
            return
        path = ls.path_of(uri)
        doc = ls.workspace.text_documents.get(uri)
        if path is None or doc is None or len(doc.source) > MAX_DOC_BYTES:
            return
        ls.index.update(path, doc.source, doc.version)

    last_text: dict[str, str] = {}  # uri -> sha of the text the server last saw

    @ls.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ForgeServer, params: t.DidOpenTextDocumentParams) -> None:
        last_text[params.text_document.uri] = text_sha(params.text_document.text)
        reindex(params.text_document.uri)

    @ls.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ForgeServer, params: t.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        reindex(uri)
        doc = ls.workspace.text_documents.get(uri)
        sha = text_sha(doc.source) if doc is not None else ""
        if last_text.get(uri) == sha:  # an edit that left the text as it was (e.g. an undone review)
            return
        last_text[uri] = sha
        if uri not in ls.state.accepting:  # an edit forge itself sent does not make its own results stale twice
            ls.clear_file_results(uri, "edited")

    @ls.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: ForgeServer, params: t.DidSaveTextDocumentParams) -> None:
        reindex(params.text_document.uri)

    @ls.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ForgeServer, params: t.DidCloseTextDocumentParams) -> None:
        path = ls.path_of(params.text_document.uri)
        if ls.index is not None and path is not None:
            ls.index.refresh(path)  # back to the file on disk; the editor no longer owns it

    @ls.feature(t.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: ForgeServer, params: t.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            if change.uri in ls.workspace.text_documents:
                continue
            path = ls.path_of(change.uri)
            if path is not None and (ls.root is None or indexed(ls.root, path)):  # not .forge/proposals/...
                file_changed_outside(ls, change.uri, path)


FEATURE = Unit("documents", register)
