"""One chat model behind any OpenAI-compatible endpoint, returning replies parsed into pydantic models.

`ChatModel.complete` sends chat messages and returns a `ChatResult` whose ``parsed`` field is an
instance of the requested pydantic schema. It asks for structured output in the strongest form
the endpoint accepts (strict ``json_schema``, then ``json_object``, then plain text with the
schema in the prompt) and remembers what worked; pulls JSON out of fenced or chatty replies;
re-asks when a reply does not validate; retries rate limits, server errors, timeouts and lost
connections with exponential backoff (honouring ``Retry-After``); and adds up token usage and
cost over every attempt. Failures raise `ProviderError`, whose ``kind`` says what went wrong.

Replies are streamed: a reply that has not begun within ``first_token_s`` (an endpoint that accepts
the request and never answers), or that stalls that long between two pieces, is abandoned and
retried once, then fails with a reason that says so; ``timeout_s`` bounds the whole reply. The
caller can follow a reply as it arrives (`complete`'s ``on_progress``).

The API key is passed to the SDK and nowhere else: it is not logged, and error messages are
scrubbed of it (servers sometimes echo a key back in their error text).
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Literal, Self, TypeVar

import openai
from openai.lib._pydantic import to_strict_json_schema
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, Field, ValidationError

from forge_lsp.agent.config import PLACEHOLDER_KEY, ModelSettings, display_url, resolve_prices
from forge_lsp.agent.config import api_key as env_api_key

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

ErrorKind = Literal[
    "auth", "not_found", "bad_request", "rate_limit", "timeout", "server", "connection", "refusal", "parse"
]
Mode = Literal["json_schema", "json_object", "text"]

#: Structured-output modes from strongest to weakest; a rejected mode falls back to the next one.
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "text")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
RETRY_AFTER_CAP_S = 60.0
MAX_REASKS = 2


_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object", "structured output")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)```", re.DOTALL)
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_*\-]{6,})")
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


@functools.cache
def _prompts() -> Any:
    from .roles import Prompts

    return Prompts()


def _template(name: str, **context: Any) -> str:
    """One of forge's own templates (the reply format and the re-ask are protocol, not per-workspace text)."""
    return str(_prompts().render(name, **context)).strip()


class Usage(BaseModel):
    """Tokens used and what they cost.

    ``cost_usd`` is the sum of the costs that are known (None when none is); ``cost_known`` is False
    when some part's price or token count was unknown, in which case ``cost_usd`` is a lower bound.
    An empty ``Usage()`` is known to cost nothing.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=sum(costs) if costs else None,
            cost_known=self.cost_known and other.cost_known,
        )

    def __radd__(self, other: object) -> Usage:
        if other == 0:  # sum(usages)
            return self
        if isinstance(other, Usage):
            return other + self
        return NotImplemented


class ProviderError(Exception):
    """A chat call failed; ``kind`` says why and ``retryable`` whether trying again later may help.

    ``attempts`` and ``usage`` tell what the failed call consumed (a call that failed to parse
    still paid for its replies).
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.attempts = 0
        self.usage = Usage()

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields travel in the state, so errors survive pickling across processes.
        return (self.__class__, (self.kind, self.message), self.__dict__.copy())


class ChatResult(BaseModel, Generic[T]):
    """A parsed reply and what it took to get it."""

    parsed: T
    text: str = Field(description="the raw content of the reply that parsed")
    usage: Usage = Field(description="summed over every attempt, failed ones included")
    model: str = Field(description="the model the endpoint says answered")
    attempts: int = Field(description="HTTP requests made: retries, fallbacks and re-asks included")
    latency_s: float
    mode: str = Field(description="the structured-output mode that worked: json_schema | json_object | text")


class _Silent(Exception):
    """A streamed reply that never began, or stalled, within ``first_token_s``."""


class _FormatRejected(Exception):
    """The endpoint refused the requested ``response_format``."""


class _Call:
    """Bookkeeping of one `ChatModel.complete` call."""

    def __init__(self, on_progress: Callable[[int], None] | None = None) -> None:
        self.attempts = 0
        self.usage = Usage()
        self.on_progress = on_progress


class _Reply(BaseModel):
    """One reply's first choice, streamed or not."""

    content: str = ""
    refusal: str | None = None
    finish_reason: str | None = None
    model: str | None = None


class ChatModel:
    """A chat model at an OpenAI-compatible endpoint; safe to share between threads."""

    def __init__(
        self,
        settings: ModelSettings,
        *,
        api_key: str | None = None,
        prices: Mapping[str, tuple[float, float]] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Build the client. ``api_key`` defaults to the env var ``settings.api_key_env`` names; an
        endpoint given by ``base_url`` may need none (a placeholder is sent then). ``prices``
        (model -> USD per Mtok in/out) extends the built-in table; ``sleep`` waits between retries.
        """
        self.settings = settings
        key = api_key if api_key is not None else env_api_key(settings)
        if not key:
            # The SDK itself falls back to $OPENAI_BASE_URL, then to OpenAI's API (which needs a key).
            if not (settings.base_url or os.environ.get("OPENAI_BASE_URL")):
                raise ProviderError(
                    "auth",
                    f"no API key for {display_url(None)}: set ${settings.api_key_env} to "
                    "your key (or set base_url to a local endpoint that needs none)",
                )
            key = PLACEHOLDER_KEY
        self._secret = key if key != PLACEHOLDER_KEY else None
        self._prices = dict(prices or {})
        self._sleep = sleep
        self._rng = random.Random()
        self._mode: Mode = "json_schema" if settings.structured == "auto" else settings.structured
        self._token_param = "max_tokens"
        self._send_temperature = True
        self._stream = settings.stream
        self._stream_usage = True  # ask for usage in the last chunk (stream_options); dropped if refused
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=key, timeout=settings.timeout_s, max_retries=0)
        self._where = display_url(str(self._client.base_url))

    @property
    def mode(self) -> Mode:
        """The structured-output mode the next call starts with."""
        return self._mode

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChatModel(model={self.settings.model!r}, endpoint={self._where!r}, mode={self._mode!r})"

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        schema: type[T],
        on_progress: Callable[[int], None] | None = None,
    ) -> ChatResult[T]:
        """Send ``messages`` and return the reply parsed into ``schema``.

        ``on_progress(pieces)`` is called as a streamed reply arrives, with the number of content pieces
        (about one token each) received so far in this attempt; it must be quick and must not raise.
        Raises `ProviderError` when the endpoint fails for good, refuses, never begins a reply, or never
        produces one that validates (after `MAX_REASKS` re-asks).
        """
        start = time.monotonic()
        call = _Call(on_progress)
        convo = [dict(m) for m in messages]
        anchor = max((i for i, m in enumerate(convo) if m.get("role") == "user"), default=None)
        reasks = 0
        try:
            while True:
                mode = self._mode
                try:
                    response = self._request(convo, anchor, schema, mode, call)
                except _FormatRejected:
                    fallback = MODES[MODES.index(mode) + 1]
                    log.info("%s rejected response_format %s; falling back to %s", self._where, mode, fallback)
                    self._mode = fallback
                    continue
                if response.refusal or response.finish_reason == "content_filter":
                    why = response.refusal or "the endpoint's content filter stopped the reply"
                    raise ProviderError("refusal", f"model '{self.settings.model}' refused: {self._scrub(why)}")
                text = response.content
                try:
                    parsed = parse_reply(text, schema)
                except ValueError as exc:
                    reason = str(exc)
                    if response.finish_reason == "length":
                        reason += " (the reply was cut off by the token limit)"
                    if reasks >= MAX_REASKS:
                        raise ProviderError(
                            "parse",
                            f"model '{self.settings.model}' gave no valid {schema.__name__} "
                            f"after {reasks} re-asks: {self._scrub(reason)}",
                        ) from None
                    reasks += 1
                    convo += [
                        {"role": "assistant", "content": text},
                        {"role": "user", "content": _template("reask.j2", reason=reason)},
                    ]
                    continue
                return ChatResult[schema](  # type: ignore[valid-type]  # a schema chosen at run time
                    parsed=parsed,
                    text=text,
                    usage=call.usage,
                    model=response.model or self.settings.model,
                    attempts=call.attempts,
                    latency_s=time.monotonic() - start,
                    mode=mode,
                )
        except ProviderError as err:
            err.attempts = call.attempts
            err.usage = call.usage
            raise

    def _request(
        self, convo: list[dict[str, Any]], anchor: int | None, schema: type[BaseModel], mode: Mode, call: _Call
    ) -> _Reply:
        """One logical request, retried on transient failures (a reply that never began or stalled: once)."""
        params = self._params(convo, anchor, schema, mode)
        retries = 0
        silent = 0  # attempts abandoned because the reply never began or stalled
        while True:
            call.attempts += 1
            attempt = f"attempt {retries + 1} of {self.settings.max_retries + 1}"
            err: ProviderError
            try:
                reply = self._stream_once(params, call, attempt) if self._stream else self._once(params, call)
            except openai.APIStatusError as exc:
                if self._adapt(params, exc):
                    continue
                if mode != "text" and exc.status_code in (400, 422) and _mentions(exc, _FORMAT_WORDS):
                    raise _FormatRejected() from None
                err = self._status_error(exc)
            except _Silent as exc:
                silent += 1
                err = ProviderError("timeout", str(exc), retryable=silent < 2)
            except openai.APITimeoutError:
                err = ProviderError(
                    "timeout",
                    f"no reply from {self._where} within {self.settings.timeout_s:g} s ({attempt})",
                    retryable=True,
                )
            except openai.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                err = ProviderError(
                    "connection", f"cannot reach {self._where}: {self._scrub(str(cause))}", retryable=True
                )
            except ProviderError as exc:
                err = exc
            else:
                if reply is not None:
                    return reply
                err = ProviderError("server", f"{self._where} returned a reply without choices", retryable=True)
            if not err.retryable or retries >= self.settings.max_retries:
                raise err
            self._sleep(self._backoff(retries, err.retry_after))
            retries += 1

    def _once(self, params: dict[str, Any], call: _Call) -> _Reply | None:
        """One request for a whole response (``stream = false``)."""
        return self._whole(self._client.chat.completions.create(**params), call)

    def _whole(self, response: ChatCompletion, call: _Call) -> _Reply | None:
        """A whole (not streamed) response's first choice; its usage added to the call's."""
        call.usage += self._usage(response)
        if not response.choices:
            return None
        choice = response.choices[0]
        return _Reply(
            content=choice.message.content or "",
            refusal=choice.message.refusal,
            finish_reason=choice.finish_reason,
            model=response.model,
        )

    def _stream_once(self, params: dict[str, Any], call: _Call, attempt: str) -> _Reply | None:
        """One streamed request. Raises `_Silent` when the reply has not begun within ``first_token_s`` or
        stalls that long, and a `ProviderError` of kind timeout when the whole reply takes over ``timeout_s``."""
        settings = self.settings
        silence = min(settings.first_token_s, settings.timeout_s)
        timeout = openai.Timeout(settings.timeout_s, connect=min(silence, 30.0), read=silence)
        extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if self._stream_usage else {}
        start = time.monotonic()
        pieces = reported = 0
        began = any_choice = False
        reply = _Reply()
        refusal: list[str] = []
        usage = None
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                **params, **extra, stream=True, timeout=timeout
            )
            if "text/event-stream" not in raw.headers.get("content-type", ""):
                # an endpoint that ignores `stream` and answers with one response: take it, and stop asking
                self._stream = False
                return self._whole(ChatCompletion.model_validate(json.loads(raw.http_response.read())), call)
            stream = raw.parse()
            try:
                for chunk in stream:
                    began = True
                    reply.model = chunk.model or reply.model
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices:
                        if choice.index != 0:
                            continue
                        any_choice = True
                        if choice.delta.content:
                            reply.content += choice.delta.content
                            pieces += 1
                        if getattr(choice.delta, "refusal", None):
                            refusal.append(choice.delta.refusal or "")
                        if choice.finish_reason:
                            reply.finish_reason = choice.finish_reason
                    if call.on_progress is not None and pieces != reported:
                        reported = pieces
                        call.on_progress(pieces)
                    if time.monotonic() - start > settings.timeout_s:
                        raise ProviderError(
                            "timeout",
                            f"the reply from {self._where} was not complete after {settings.timeout_s:g} s "
                            f"({pieces} pieces so far; timeout_s) ({attempt})",
                            retryable=True,
                        )
            finally:
                stream.close()
        except openai.APITimeoutError:
            if not began:
                raise _Silent(
                    f"no first token from {self._where} within {silence:g} s: the endpoint took the request "
                    f"and did not answer (first_token_s; {attempt})"
                ) from None
            raise _Silent(
                f"the reply from {self._where} stalled for {silence:g} s after {pieces} pieces "
                f"(first_token_s; {attempt})"
            ) from None
        call.usage += self._usage_of(usage, reply.model) if usage is not None else Usage(cost_known=False)
        if not any_choice:
            return None
        reply.refusal = "".join(refusal) or None
        return reply

    def _params(
        self, convo: list[dict[str, Any]], anchor: int | None, schema: type[BaseModel], mode: Mode
    ) -> dict[str, Any]:
        messages = list(convo)
        if mode != "json_schema":
            instruction = _template(
                "reply_format.j2", schema=json.dumps(schema.model_json_schema(), separators=(",", ":"))
            )
            if anchor is None:
                messages.append({"role": "user", "content": instruction})
            else:
                messages[anchor] = _append_text(messages[anchor], instruction)
        params: dict[str, Any] = {"model": self.settings.model, "messages": messages}
        if self.settings.temperature is not None and self._send_temperature:
            params["temperature"] = self.settings.temperature
        if self.settings.max_tokens is not None:
            params[self._token_param] = self.settings.max_tokens
        if mode == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": strict_json_schema(schema), "strict": True},
            }
        elif mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        return params

    def _adapt(self, params: dict[str, Any], exc: openai.APIStatusError) -> bool:
        """Adjust ``params`` to a 400 that names a parameter this model takes differently; True if changed."""
        if exc.status_code != 400:
            return False
        if self._stream and self._stream_usage and _mentions(exc, ("stream_options", "include_usage")):
            self._stream_usage = False  # the endpoint streams but cannot put usage in the last chunk
            return True
        if self._stream and _mentions(exc, ("stream",)) and _mentions(exc, ("unsupported", "not support")):
            self._stream = False  # an endpoint that cannot stream: whole responses, limited by timeout_s
            return True
        if "max_tokens" in params and _mentions(exc, ("max_completion_tokens",)):
            self._token_param = "max_completion_tokens"
            params["max_completion_tokens"] = params.pop("max_tokens")
            return True
        if (
            "temperature" in params
            and _mentions(exc, ("temperature",))
            and _mentions(exc, ("unsupported", "not support"))
        ):
            self._send_temperature = False
            del params["temperature"]
            return True
        return False

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        status = exc.status_code
        detail = self._scrub(_detail(exc))
        suffix = f": {detail}" if detail else ""
        retry_after = _retry_after(exc.response.headers)
        model = self.settings.model
        if status in (401, 403):
            extra = f", or the key lacks access to model '{model}'" if status == 403 else ""
            return ProviderError(
                "auth",
                f"the endpoint {self._where} rejected the API key ({status}): set "
                f"${self.settings.api_key_env} to a valid key for it{extra}{suffix}",
                status=status,
            )
        if status == 404:
            return ProviderError(
                "not_found",
                f"model '{model}' not found at {self._where} (404): check the model "
                f"name and that base_url is the API root (often ending in /v1){suffix}",
                status=status,
            )
        if status == 429:
            if getattr(exc, "code", None) == "insufficient_quota":
                return ProviderError("rate_limit", f"quota exhausted at {self._where} (429){suffix}", status=status)
            return ProviderError(
                "rate_limit",
                f"rate limited by {self._where} (429){suffix}",
                retryable=True,
                status=status,
                retry_after=retry_after,
            )
        if status == 408:
            return ProviderError(
                "timeout",
                f"{self._where} timed out the request (408){suffix}",
                retryable=True,
                status=status,
                retry_after=retry_after,
            )
        if status == 409 or status >= 500:
            return ProviderError(
                "server",
                f"server error at {self._where} ({status}){suffix}",
                retryable=True,
                status=status,
                retry_after=retry_after,
            )
        return ProviderError(
            "bad_request", f"{self._where} rejected the request for model '{model}' ({status}){suffix}", status=status
        )

    def _usage(self, response: ChatCompletion) -> Usage:
        if response.usage is None:
            return Usage(cost_known=False)
        return self._usage_of(response.usage, response.model)

    def _usage_of(self, usage: Any, model: str | None) -> Usage:
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        prices = resolve_prices(self.settings, self._prices, model)
        if prices is None:
            return Usage(prompt_tokens=prompt, completion_tokens=completion, cost_known=False)
        cost = (prompt * prices[0] + completion * prices[1]) / 1e6
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)

    def _backoff(self, retries: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), RETRY_AFTER_CAP_S)
        ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**retries)
        return ceiling * (0.5 + 0.5 * self._rng.random())

    def _scrub(self, text: str) -> str:
        """``text`` without the API key or anything shaped like one."""
        if self._secret:
            text = text.replace(self._secret, "***")
        text = _BEARER.sub(r"\1***", text)
        return _KEY_LIKE.sub("sk-***", text)


def parse_reply(text: str, schema: type[T]) -> T:
    """Parse a model's reply into ``schema``: the whole text, else a fenced block or the first balanced
    ``{...}`` object that validates. Raises ValueError saying why none did.
    """
    errors: list[ValidationError] = []
    for candidate in (text, *_json_candidates(text)):
        try:
            return schema.model_validate_json(candidate)
        except ValidationError as exc:
            errors.append(exc)
    if not text.strip():
        raise ValueError("the reply was empty")
    # Prefer a schema complaint about real JSON over a syntax complaint about prose.
    best = next((e for e in errors if not _is_json_error(e)), None)
    if best is None:
        if len(errors) == 1 and "{" not in text:
            raise ValueError("the reply contains no JSON object")
        best = errors[1] if len(errors) > 1 else errors[0]
    raise ValueError(_describe(best))


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def _is_json_error(exc: ValidationError) -> bool:
    return all(err["type"] == "json_invalid" for err in exc.errors(include_input=False, include_url=False))


def _json_candidates(text: str, limit: int = 8) -> list[str]:
    """Fenced code blocks, then balanced top-level ``{...}`` spans, in order of appearance."""
    found: list[str] = [m.group(1).strip() for m in _FENCE.finditer(text)]
    pos = 0
    while len(found) < limit:
        start = text.find("{", pos)
        if start < 0:
            break
        end = _matching_brace(text, start)
        if end is None:
            pos = start + 1
            continue
        found.append(text[start : end + 1])
        pos = end + 1
    unique: list[str] = []
    for span in found:
        if span and span != text and span not in unique:
            unique.append(span)
    return unique[:limit]


def _matching_brace(text: str, start: int) -> int | None:
    depth = 0
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


@functools.lru_cache(maxsize=128)
def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``schema`` in the form OpenAI's strict structured outputs accept
    (every property required, no additional properties), as the SDK's own ``parse()`` builds it.
    """
    return to_strict_json_schema(schema)


def _schema_name(schema: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "reply"


def _append_text(message: Mapping[str, Any], text: str) -> dict[str, Any]:
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [*content, {"type": "text", "text": text}]
    else:
        out["content"] = f"{content}\n\n{text}" if content else text
    return out


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str):
            return message.strip()
        return json.dumps(body)[:500]
    if isinstance(body, str):
        return body.strip()[:500]
    return ""


def _mentions(exc: openai.APIStatusError, words: Sequence[str]) -> bool:
    text = f"{exc.message} {_detail(exc)}".lower()
    return any(word in text for word in words)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date), if given."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())
