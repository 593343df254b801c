"""Server settings: `initializationOptions` and `workspace/configuration` (section ``forge``).

Invalid values fall back to the defaults; every problem becomes a message the server shows
once. A literal API key is never accepted in settings: keys come from the server's environment
(the editor puts the one from its secret store there) and are never echoed back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError


class Settings(BaseModel):
    model: str | None = None
    base_url: str | None = None
    judge_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    search: Literal["mcts", "linear"] = "mcts"
    rounds: int = Field(10, ge=1, le=1000)
    budget_usd: float | None = Field(None, ge=0)
    wall_s: float | None = Field(None, gt=0)
    concurrency: int = Field(4, ge=1, le=64)
    device: str = "auto"
    executor: str = Field("local", pattern=r"^(local|ray|ray://\S+)$", description="local, ray or ray://HOST:PORT")
    workers: int = Field(2, ge=1, le=16, description="runs that may go at once")
    offline: bool = True
    profile: bool = True
    strict: bool = Field(False, description="candidates must hold on the full domain (any layout, any stream)")

    def agent_overrides(self) -> dict[str, Any]:
        """The overrides for `forge_lsp.agent.config.load_config`."""
        out: dict[str, Any] = {
            "search": self.search,
            "rounds": self.rounds,
            "concurrency": self.concurrency,
            "budget_usd": self.budget_usd,
            "wall_s": self.wall_s,
            "executor": self.executor,
            "strict": self.strict,
        }
        if self.model:
            out["model"] = self.model
        if self.base_url:
            out["base_url"] = self.base_url
        if self.api_key_env != "OPENAI_API_KEY":
            out["api_key_env"] = self.api_key_env
        if self.judge_model:
            out["judge"] = {"model": self.judge_model}
        return {k: v for k, v in out.items() if v is not None}


_SECRET_FIELDS = ("api_key", "apiKey", "key", "token", "secret")


def parse_settings(raw: Any, previous: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's JSON (``{"forge": {...}}`` or the section itself), and the problems found.

    Unknown keys are reported and ignored; an invalid value keeps the previous (or default) value.
    """
    base = previous or Settings()
    problems: list[str] = []
    if raw is None:
        return base, problems
    if isinstance(raw, dict) and isinstance(raw.get("forge"), dict):
        raw = raw["forge"]
    if not isinstance(raw, dict):
        return base, [f"forge settings must be an object, got {type(raw).__name__}; using the defaults"]
    data = {_snake(k): v for k, v in raw.items()}
    for k in list(data):
        if k in _SECRET_FIELDS or k.endswith("_key") and k != "api_key_env":
            problems.append(
                f"forge.{k} is ignored: API keys are read from the environment only "
                f"(set {base.api_key_env} or use the editor's 'Forge: Set API Key')"
            )
            del data[k]
        elif k not in Settings.model_fields:
            problems.append(f"unknown setting forge.{k} ignored")
            del data[k]
    merged = base.model_dump() | data
    try:
        return Settings.model_validate(merged), problems
    except ValidationError as exc:
        good = dict(base.model_dump())
        for k, v in data.items():  # keep every valid field, drop the invalid ones
            try:
                Settings.model_validate(good | {k: v})
                good[k] = v
            except ValidationError as one:
                problems.append(f"forge.{k}={v!r} is invalid ({one.errors()[0]['msg']}); using {good.get(k)!r}")
        del exc
        return Settings.model_validate(good), problems


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper():
            out += ["_", ch.lower()]
        else:
            out.append(ch)
    return "".join(out).lstrip("_")
