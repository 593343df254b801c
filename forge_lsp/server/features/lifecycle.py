"""Initialize (settings, workspace root, index, run store, the last hot-spot report, file watcher) and exit (kill
every worker)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from lsprotocol import types as t

from ..feature import Unit
from ..server import ForgeServer, indexed
from ..settings import parse_settings

log = logging.getLogger("forge_lsp.server")


def register(ls: ForgeServer) -> None:
    @ls.feature(t.INITIALIZE)
    def initialize(ls: ForgeServer, params: t.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        folder = params.workspace_folders[0] if params.workspace_folders else None
        root = ls.path_of(folder.uri) if folder else (ls.path_of(params.root_uri) if params.root_uri else None)
        ls.root = Path(root) if root else None
        _apply_settings(ls, params.initialization_options)

    @ls.feature(t.INITIALIZED)
    async def initialized(ls: ForgeServer, params: t.InitializedParams) -> None:
        from ...workspace.index import WorkspaceIndex

        if ls.root is not None:
            ls.index = WorkspaceIndex(ls.root)
            await asyncio.get_running_loop().run_in_executor(None, ls.index.scan)
            for opened in ls.on_workspace_open:  # what features read from the workspace (.forge/hotspots.json)
                await asyncio.get_running_loop().run_in_executor(None, opened, ls)
            try:
                ls.run_store()
            except Exception as exc:  # noqa: BLE001 - a read-only workspace still gets editor features
                ls.message(f"forge: cannot open the run store in {ls.root / '.forge'}: {exc}", t.MessageType.Warning)
        caps = ls.client_capabilities.workspace
        client_watches = bool(
            caps and caps.did_change_watched_files and caps.did_change_watched_files.dynamic_registration
        )
        if ls.root is not None and not client_watches:
            _watch(ls)
        _freeze_long_lived_objects()
        await _pull_configuration(ls)
        if client_watches:  # the editor's own watcher (and its exclude settings) reports outside changes
            await ls.client_register_capability_async(
                t.RegistrationParams(
                    registrations=[
                        t.Registration(
                            id="forge-watch",
                            method=t.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=t.DidChangeWatchedFilesRegistrationOptions(
                                watchers=[t.FileSystemWatcher(glob_pattern="**/*.{py,cu,cuh}")]
                            ),
                        )
                    ]
                )
            )

    @ls.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: ForgeServer, params: t.DidChangeConfigurationParams) -> None:
        if params.settings:
            _apply_settings(ls, params.settings)
        else:
            await _pull_configuration(ls)

    @ls.feature(t.SHUTDOWN)
    def shutdown(ls: ForgeServer, params: None) -> None:
        ls.shutdown_jobs()

    @ls.feature(t.EXIT)
    def exit_(ls: ForgeServer, params: None) -> None:
        ls.shutdown_jobs()


def _freeze_long_lived_objects() -> None:
    """Move what lives as long as the server (libraries, the index) out of the collector's reach: a full
    collection over ~150k objects paused the event loop 100-250 ms (benchmarks/lsp_latency.py)."""
    import gc

    from ...usecases import preload

    preload()  # what a run imports, imported now so that it is frozen too
    gc.collect()
    gc.freeze()


async def _pull_configuration(ls: ForgeServer) -> None:
    caps = ls.client_capabilities.workspace
    if not (caps and caps.configuration):
        return
    try:
        (section,) = await asyncio.wait_for(
            ls.workspace_configuration_async(t.ConfigurationParams(items=[t.ConfigurationItem(section="forge")])), 5.0
        )
    except Exception as exc:  # noqa: BLE001 - a client that cannot answer keeps the current settings
        log.info("workspace/configuration failed: %s", exc)
        return
    if section is not None:
        _apply_settings(ls, section)


def _apply_settings(ls: ForgeServer, raw) -> None:
    """New settings on top of the current ones: each problem shown once, each change logged (settings hold
    no secrets: keys are refused)."""
    before = ls.settings
    ls.settings, problems = parse_settings(raw, before)
    for p in problems:
        ls.message(f"forge: {p}", t.MessageType.Warning, once=True)
    changed = {k: v for k, v in ls.settings.model_dump().items() if getattr(before, k) != v}
    if changed:
        log.info("settings changed: %s", ", ".join(f"{k}={_shown(k, v)!r}" for k, v in sorted(changed.items())))


def _shown(key: str, value):
    """A setting as the log shows it: an endpoint without any user:password part."""
    if key == "base_url" and isinstance(value, str):
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        return (
            parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")).geturl()
            if parts.hostname
            else "<unparsable URL>"
        )
    return value


def _watch(ls: ForgeServer) -> None:
    """Changes made outside the editor, for clients that do not watch files for the server: reindex and
    mark that file's results stale (watchdog). Only the folders the index covers are watched: the root
    itself, and each top-level folder it does not skip (forge's own `.forge/` never is)."""
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        return
    from ...workspace.index import SKIP_DIRS
    from ..server import uri_of

    if ls.root is None:
        return
    root: Path = ls.root
    observer = Observer()
    scheduled: set[str] = set()

    def schedule(folder: Path) -> None:
        if folder.name in SKIP_DIRS or folder.name.startswith(".") or str(folder) in scheduled:
            return
        try:
            observer.schedule(handler, str(folder), recursive=True)
            scheduled.add(str(folder))
        except OSError as exc:  # gone already, or not readable: nothing to watch there
            log.debug("not watching %s: %s", folder, exc)

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event) -> None:
            path = str(getattr(event, "dest_path", "") or event.src_path)
            if event.is_directory:
                if event.event_type in ("created", "moved") and Path(path).parent == root:
                    schedule(Path(path))  # a new top-level folder
                return
            if event.event_type not in ("modified", "created", "moved", "deleted") or not indexed(root, path):
                return
            uri = uri_of(path)
            if uri in ls.workspace.text_documents:
                return  # the editor owns open files; its didChange says when they change
            ls.call_soon(lambda: file_changed_outside(ls, uri, path))

    handler = Handler()
    observer.schedule(handler, str(root), recursive=False)
    try:
        for entry in os.scandir(root):
            if entry.is_dir(follow_symlinks=False):
                schedule(Path(entry.path))
    except OSError:
        pass
    observer.daemon = True
    observer.start()
    ls._observer = observer


def file_changed_outside(ls: ForgeServer, uri: str, path: str) -> None:
    if ls.index is not None:
        ls.index.refresh(path)
    ls.clear_file_results(uri, "changed outside the editor")


FEATURE = Unit("lifecycle", register)
