"""What the language-server tests that run jobs share: a VS Code-like session on a workspace folder, and waiting for
a job (`forge/runs`) to end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pytest_lsp import LanguageClient, client_capabilities


def scripted_settings(base_url: str, **extra: Any) -> dict[str, Any]:
    """forge's settings for a job on the CPU whose model is the scripted OpenAI-compatible server at `base_url`: one
    linear round, no profile; `extra` adds or replaces keys."""
    return {
        "model": "scripted",
        "baseUrl": base_url,
        "device": "cpu",
        "search": "linear",
        "rounds": 1,
        "offline": False,
        "profile": False,
        **extra,
    }


async def open_session(client: LanguageClient, root: Path, forge: dict[str, Any]) -> None:
    """Initialize as VS Code does on `root` (one workspace folder), with forge's `initializationOptions`; the
    client answers the server's capability registrations and code-lens refreshes."""

    @client.feature(t.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: t.RegistrationParams) -> None:
        return None

    @client.feature(t.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        return None

    await client.initialize_session(
        t.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=root.as_uri(),
            workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name="ws")],
            initialization_options={"forge": forge},
        )
    )


async def job_done(client: LanguageClient, job_id: str, timeout: float) -> dict:
    """The job's row of `forge/runs` once it is neither queued nor running."""
    async with asyncio.timeout(timeout):
        while True:
            runs = await client.protocol.send_request_async("forge/runs", None)
            rows = runs.runs if hasattr(runs, "runs") else runs["runs"]
            job = next(j for j in (r._asdict() if hasattr(r, "_asdict") else r for r in rows) if j["id"] == job_id)
            if job["status"] not in ("queued", "running"):
                return job
            await asyncio.sleep(0.5)
