"""Agent configuration: which chat model(s) to call, how to search, and what a run may spend.

Settings come from ``[tool.forge]`` in the workspace's ``pyproject.toml`` and/or from
``forge.toml`` (whose keys win), then from explicit overrides such as CLI flags::

    [tool.forge]
    model = "gpt-4o"                     # shorthand: top-level model keys configure the coder
    base_url = "http://localhost:8000/v1" # any OpenAI-compatible endpoint (vLLM, Ollama, OpenRouter...)
    api_key_env = "OPENAI_API_KEY"        # the NAME of the env var holding the key
    search = "mcts"
    rounds = 10
    memory_limit_gib = 8                  # a worker's process tree over this is out_of_memory (0: no cap)
    compile_modes = ["default", "reduce-overhead"]  # torch.compile offline candidates (default: all three)
    executor = "local"                    # where evaluations run: local (one worker per visible device),
                                          # ray (RAY_ADDRESS's cluster, else a local Ray) or ray://HOST:PORT
    build_workers = 8                     # processes compiling candidates at once (default: from cores, memory)
    strict = false                        # true: a candidate must hold on the full domain (any layout, any
                                          # current stream), not only where the task calls it

    [tool.forge.judge]                    # per-role settings; the judge inherits the coder's
    model = "gpt-4o-mini"                 # settings and overrides what it names

    [tool.forge.prices]                   # USD per million tokens: [input, output]
    "my-finetune" = [0.5, 1.5]

``forge.toml`` holds the same keys at its top level (or under ``[tool.forge]``). API keys are
never read from or written to configuration: they live in the environment variable that
``api_key_env`` names, and a config file that carries one is rejected.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_KEY_ENV = "OPENAI_API_KEY"

#: Key sent to endpoints that need none (local Ollama, vLLM, LM Studio): the SDK insists on one.
PLACEHOLDER_KEY = "no-key-needed"

#: Built-in prices of a few well-known models, USD per million tokens (input, output), as listed
#: by their vendors when this table was written. Extend or override them with ``[tool.forge.prices]``
#: (``AgentConfig.prices``) or per role with ``price_in_per_mtok`` / ``price_out_per_mtok``.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
}

HOW_TO_CONFIGURE = """\
No chat model is configured for the forge agent. Configure one of these ways:

  * in the workspace's pyproject.toml (or the same keys at the top level of forge.toml):

        [tool.forge]
        model = "gpt-4o"                        # the model name the endpoint knows
        base_url = "http://localhost:11434/v1"  # optional: any OpenAI-compatible endpoint
                                                # (vLLM, Ollama, LM Studio, OpenRouter, Azure)
        api_key_env = "OPENAI_API_KEY"          # optional: NAME of the env var holding the key

  * on the command line with --model NAME, or in the environment with
    FORGE_MODEL=NAME (and FORGE_BASE_URL=URL for a non-OpenAI endpoint).

Put the API key itself in the environment (export OPENAI_API_KEY=...), never in a config file.
Local servers that need no key (Ollama, vLLM) only need base_url.
"""

_SECRET_WORDS = ("key", "secret", "token", "password")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class ConfigError(ValueError):
    """The agent configuration cannot be used; the message says what to change."""


def is_secret_name(name: str) -> bool:
    """Whether a setting's name suggests it holds a credential.

    Names ending in ``_env`` (they name an environment variable) and ``_tokens`` (token counts such as
    ``max_tokens``) are not secrets.
    """
    low = name.lower()
    if low.endswith(("_env", "_tokens")):
        return False
    return any(word in low for word in _SECRET_WORDS)


def display_url(url: str | None) -> str:
    """The endpoint as it may be shown to users: no credentials, no query string."""
    if not url:
        return "https://api.openai.com/v1"
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


class ModelSettings(BaseModel):
    """One chat model behind an OpenAI-compatible endpoint."""

    model_config = ConfigDict(hide_input_in_errors=True, protected_namespaces=())

    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, description="None means OpenAI's own API")
    api_key_env: str = Field(default=DEFAULT_KEY_ENV, description="name of the env var holding the key")
    timeout_s: float = Field(default=300.0, gt=0, description="the whole reply must have arrived by then")
    first_token_s: float = Field(
        default=90.0,
        gt=0,
        description="the reply must have begun by then, and may not stall longer between two pieces; a call "
        "abandoned this way is retried once (raise it for reasoning models that think long before they answer)",
    )
    stream: bool = Field(default=True, description="stream replies (false: one response, limited by timeout_s)")
    max_retries: int = Field(default=4, ge=0)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    structured: Literal["auto", "json_schema", "json_object", "text"] = "auto"
    price_in_per_mtok: float | None = Field(default=None, ge=0)
    price_out_per_mtok: float | None = Field(default=None, ge=0)

    @field_validator("api_key_env")
    @classmethod
    def _names_a_variable(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            # Never echo the value: it may be the key itself, pasted into the wrong field.
            raise ValueError(
                f"api_key_env must be the NAME of an environment variable (like {DEFAULT_KEY_ENV}), not the key itself"
            )
        return value


class AgentConfig(BaseModel):
    """Everything an optimization run needs to know besides the task."""

    model_config = ConfigDict(hide_input_in_errors=True)

    coder: ModelSettings | None = None
    judge: ModelSettings | None = Field(default=None, description="defaults to the coder's settings")
    search: Literal["mcts", "linear"] = "mcts"
    rounds: int = Field(default=10, ge=1)
    budget_usd: float | None = Field(default=None, ge=0)
    wall_s: float | None = Field(default=None, gt=0)
    concurrency: int = Field(default=4, ge=1)
    roofline_stop: float | None = Field(default=0.9, gt=0)
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="model -> (input, output) USD per Mtok"
    )
    device: str = "auto"
    entry: str | None = Field(
        default=None,
        description="how the whole model is reached for `forge hotspots`: a script, or file.py:function returning "
        "(model, args)",
    )
    memory_limit_gib: float | None = Field(
        default=None,
        ge=0,
        description="resident memory a worker's process tree may hold before its verdict is out_of_memory, GiB; "
        "0: no cap; unset: $FORGE_HOST_MEMORY_LIMIT_GIB, else min(16 GiB, 75% of the RAM)",
    )

    compile_modes: list[str] | None = Field(
        default=None,
        description="the torch.compile modes offered as offline candidates (default: default, "
        "max-autotune-no-cudagraphs and reduce-overhead on a GPU, default on the CPU)",
    )

    offline_library: bool | None = Field(
        default=None,
        description="offer forge's Triton library kernels as offline candidates (default: on a GPU only; on the "
        "CPU they run under Triton's interpreter, hundreds of times slower than the reference, so they could "
        "only be checked for correctness, never win)",
    )

    executor: str = Field(
        default="local",
        description="where evaluations run: local (one persistent worker per visible device, builds spread over "
        "the CPU cores), ray (the cluster RAY_ADDRESS names, else a Ray instance on this machine; needs "
        "forge-lsp[ray]) or ray://HOST:PORT (that cluster through the Ray Client)",
    )

    build_workers: int | None = Field(
        default=None,
        ge=1,
        description="processes that compile candidates at once (default: $FORGE_BUILD_WORKERS, else one per core but "
        "one, as many as half the available memory holds at 2 GiB each)",
    )
    strict: bool = Field(
        default=False,
        description="ask for the full domain: a candidate wrong only for strided inputs or on a side stream is "
        "incorrect, instead of correct on a narrowed domain that the guard keeps calls inside",
    )

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, value: str) -> str:
        text = value.strip()
        if text in ("local", "ray") or (text.startswith("ray://") and len(text) > len("ray://")):
            return text
        raise ValueError(f"unknown executor {value!r}: use local, ray or ray://HOST:PORT")

    @model_validator(mode="after")
    def _judge_defaults_to_coder(self) -> AgentConfig:
        if self.judge is None and self.coder is not None:
            self.judge = self.coder.model_copy()
        return self

    def redacted(self) -> dict[str, Any]:
        """A JSON-able copy safe to persist: settings whose names look like credentials are dropped."""
        data = self.model_dump(mode="json")
        prices = data.pop("prices")
        scrubbed = _drop_secrets(data)
        scrubbed["prices"] = prices  # model names, not setting names: kept as they are
        return scrubbed


def _drop_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_secrets(v) for k, v in value.items() if not is_secret_name(str(k))}
    if isinstance(value, list):
        return [_drop_secrets(v) for v in value]
    return value


def api_key(settings: ModelSettings) -> str | None:
    """The API key for ``settings``, read only from the environment variable it names."""
    return os.environ.get(settings.api_key_env) or None


def model_configured(config: AgentConfig) -> bool:
    """Whether a coder model is configured (the judge falls back to it)."""
    return config.coder is not None


def resolve_prices(
    settings: ModelSettings, prices: Mapping[str, tuple[float, float]] | None = None, served_model: str | None = None
) -> tuple[float, float] | None:
    """USD per million (input, output) tokens for ``settings``, or None when unknown.

    Explicit ``price_*_per_mtok`` settings win per field; the rest comes from ``prices`` (config
    overrides) over the built-in `PRICES`, looked up by the configured model name, then by the
    name the endpoint reports (``served_model``). A provider prefix (``openai/gpt-4o``) and a dated
    snapshot suffix (``gpt-4o-2024-08-06``) are ignored when the exact name is not listed.
    """
    table = {**PRICES, **(prices or {})}
    listed = None
    for name in (settings.model, served_model):
        if name and (listed := _lookup(table, name)) is not None:
            break
    price_in = settings.price_in_per_mtok if settings.price_in_per_mtok is not None else (listed or (None, None))[0]
    price_out = settings.price_out_per_mtok if settings.price_out_per_mtok is not None else (listed or (None, None))[1]
    if price_in is None or price_out is None:
        return None
    return float(price_in), float(price_out)


def _lookup(table: Mapping[str, tuple[float, float]], name: str) -> tuple[float, float] | None:
    bare = name.rsplit("/", 1)[-1]
    for candidate in (name, bare, _DATE_SUFFIX.sub("", name), _DATE_SUFFIX.sub("", bare)):
        if candidate in table:
            return table[candidate]
    return None


_MODEL_KEYS = frozenset(ModelSettings.model_fields)
_AGENT_KEYS = frozenset(AgentConfig.model_fields) - {"coder", "judge"}


def load_config(workspace: Path, overrides: dict[str, Any] | None = None) -> AgentConfig:
    """Read the agent configuration of ``workspace`` and apply ``overrides``.

    Sources, later ones winning key by key: ``[tool.forge]`` of ``pyproject.toml``, then
    ``forge.toml``, then ``overrides``. Top-level model keys (``model``, ``base_url``, ...) are
    shorthand for the coder; ``coder`` / ``judge`` tables set one role. The judge inherits the
    coder's settings and overrides what its table names. Overrides use the same keys as the file
    (e.g. ``{"model": "gpt-4o", "search": "linear", "rounds": 3}``); None values are ignored, so
    unset CLI flags can be passed as they are. When no model is configured anywhere, ``FORGE_MODEL``
    (and optionally ``FORGE_BASE_URL``) from the environment name the coder.

    Raises `ConfigError` for unreadable files, invalid values, unknown override keys, and any
    credential found in a config file.
    """
    workspace = Path(workspace)
    merged: dict[str, Any] = {}
    for path in (workspace / "pyproject.toml", workspace / "forge.toml"):
        section = _read_section(path)
        _reject_secrets(section, path)
        merged = _deep_merge(merged, section)

    if overrides:
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(clean) - _MODEL_KEYS - _AGENT_KEYS - {"coder", "judge"})
        if unknown:
            raise ConfigError(f"unknown agent setting(s): {', '.join(unknown)}")
        _reject_secrets(clean, None)
        merged = _deep_merge(merged, clean)

    coder = {k: v for k, v in merged.items() if k in _MODEL_KEYS}
    coder.update(_table(merged, "coder"))
    judge_table = _table(merged, "judge")
    if "model" not in coder and os.environ.get("FORGE_MODEL"):
        coder["model"] = os.environ["FORGE_MODEL"]
        if "base_url" not in coder and os.environ.get("FORGE_BASE_URL"):
            coder["base_url"] = os.environ["FORGE_BASE_URL"]

    data: dict[str, Any] = {k: v for k, v in merged.items() if k in _AGENT_KEYS}
    if "model" in coder:
        data["coder"] = coder
        inherited = dict(coder)
        if judge_table.get("model", coder["model"]) != coder["model"]:
            # Another model: the coder's prices say nothing about it.
            inherited.pop("price_in_per_mtok", None)
            inherited.pop("price_out_per_mtok", None)
        data["judge"] = {**inherited, **judge_table}
    elif "model" in judge_table:
        data["judge"] = judge_table
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise ConfigError(f"invalid agent configuration in {workspace}: {problems}") from None


def _read_section(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    tool = doc.get("tool")
    section = tool.get("forge") if isinstance(tool, dict) else None
    if section is None and path.name == "forge.toml":
        section = {k: v for k, v in doc.items() if k != "tool"}
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.forge] must be a table")
    return section


def _table(merged: Mapping[str, Any], name: str) -> dict[str, Any]:
    table = merged.get(name) or {}
    if isinstance(table, BaseModel):
        table = table.model_dump(exclude_unset=True)
    if not isinstance(table, dict):
        raise ConfigError(f"'{name}' must be a table of model settings")
    return dict(table)


def _reject_secrets(section: Mapping[str, Any], path: Path | None, where: str = "") -> None:
    for key, value in section.items():
        if key == "prices":
            continue
        if is_secret_name(str(key)):
            env = DEFAULT_KEY_ENV
            named = section.get("api_key_env")
            if isinstance(named, str) and _ENV_NAME.fullmatch(named):
                env = named
            source = str(path) if path else "the overrides"
            raise ConfigError(
                f"{source} sets '{where}{key}': API keys and other secrets belong in the environment, not in "
                f"configuration. Remove it and run `export {env}=...` instead (api_key_env names the variable "
                "to read)."
            )
        if isinstance(value, Mapping):
            _reject_secrets(value, path, f"{where}{key}.")


def _deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
