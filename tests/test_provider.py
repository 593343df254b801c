"""The model-provider layer against a real local HTTP server speaking the OpenAI protocol, and config loading."""

from __future__ import annotations

import json
import pickle
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from forge_lsp.agent.config import (
    HOW_TO_CONFIGURE,
    PLACEHOLDER_KEY,
    AgentConfig,
    ConfigError,
    ModelSettings,
    api_key,
    load_config,
    model_configured,
    resolve_prices,
)
from forge_lsp.agent.provider import ChatModel, ProviderError, Usage, parse_reply

if TYPE_CHECKING:
    from fake_openai import FakeOpenAI

pytest_plugins = ["fake_openai"]  # the `fake_openai` fixture

KEY = "sk-test-S3CRET-0123456789abcdef"
GOOD = '{"name": "tile", "score": 3}'
USER = [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": "Plan the next step."}]


class Plan(BaseModel):
    name: str
    score: int


class Waits(list[float]):
    """An injected sleep that records what it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_model(fake: FakeOpenAI, waits: Waits | None = None, **settings) -> ChatModel:
    settings = {"model": "fake-model", "base_url": fake.base_url, "timeout_s": 5.0, **settings}
    return ChatModel(ModelSettings(**settings), api_key=KEY, sleep=waits if waits is not None else Waits())


def error_of(fake: FakeOpenAI, *entries, **settings) -> ProviderError:
    fake.script(*entries)
    with make_model(fake, **settings) as model, pytest.raises(ProviderError) as info:
        model.complete(USER, Plan)
    return info.value


def assert_no_key(err: ProviderError) -> None:
    for text in (str(err), repr(err), err.message, *map(str, err.args)):
        assert KEY not in text
        assert "S3CRET" not in text


# -- structured output -----------------------------------------------------------------------------


def test_structured_reply_is_parsed_with_strict_json_schema(fake_openai):
    fake_openai.script(GOOD)
    with make_model(fake_openai) as model:
        result = model.complete(USER, Plan)
    assert result.parsed == Plan(name="tile", score=3)
    assert (result.mode, result.attempts, result.text, result.model) == ("json_schema", 1, GOOD, "fake-model")
    [req] = fake_openai.chat_requests
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == "fake-model"
    assert req.body["messages"] == USER  # json_schema mode sends the messages untouched
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "Plan"
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["name", "score"]


def test_malformed_json_is_reasked_once_and_then_parsed(fake_openai):
    fake_openai.script('{"name": "tile", "score": ', GOOD)
    with make_model(fake_openai) as model:
        result = model.complete(USER, Plan)
    assert result.parsed.score == 3 and result.attempts == 2
    _, second = fake_openai.chat_requests
    assert second.messages[: len(USER)] == USER
    assert second.messages[-2] == {"role": "assistant", "content": '{"name": "tile", "score": '}
    assert second.messages[-1]["role"] == "user" and "not valid JSON" in second.messages[-1]["content"]


def test_schema_violation_reask_names_the_bad_field(fake_openai):
    fake_openai.script('{"name": "tile", "score": "high"}', GOOD)
    with make_model(fake_openai) as model:
        assert model.complete(USER, Plan).attempts == 2
    assert "score" in fake_openai.chat_requests[1].messages[-1]["content"]


def test_parse_error_after_two_reasks_reports_attempts_and_usage(fake_openai):
    err = error_of(fake_openai, "no json here", "still none", "nope")
    assert err.kind == "parse" and not err.retryable
    assert err.attempts == 3 and len(fake_openai.chat_requests) == 3
    assert err.usage.prompt_tokens == 300 and err.usage.completion_tokens == 60
    assert "no JSON object" in err.message


def test_json_inside_fences_or_prose_is_extracted(fake_openai):
    fake_openai.script(
        f"Here is the plan:\n```json\n{GOOD}\n```\nGood luck!",
        'Sure {not json} then {"name": "b", "score": 2} and {"x": 1}',
    )
    with make_model(fake_openai) as model:
        fenced = model.complete(USER, Plan)
        prose = model.complete(USER, Plan)
    assert fenced.parsed == Plan(name="tile", score=3) and fenced.attempts == 1
    assert prose.parsed == Plan(name="b", score=2) and prose.attempts == 1


def test_parse_reply_explains_failures():
    assert parse_reply('{"score": 1, "name": "a"}', Plan) == Plan(name="a", score=1)
    with pytest.raises(ValueError, match="empty"):
        parse_reply("  ", Plan)
    with pytest.raises(ValueError, match="score"):
        parse_reply('```json\n{"name": "a"}\n```', Plan)


def test_rejected_json_schema_falls_back_to_json_object_and_remembers(fake_openai):
    fake_openai.script({"status": 400, "error": "response_format json_schema is not supported"}, GOOD, GOOD)
    with make_model(fake_openai) as model:
        first = model.complete(USER, Plan)
        second = model.complete(USER, Plan)
    assert (first.mode, first.attempts) == ("json_object", 2)
    assert (second.mode, second.attempts) == ("json_object", 1)
    reqs = fake_openai.chat_requests
    assert len(reqs) == 3
    assert reqs[0].body["response_format"]["type"] == "json_schema"
    assert reqs[1].body["response_format"] == {"type": "json_object"}
    assert reqs[2].body["response_format"] == {"type": "json_object"}
    # The schema travels in the last user message, which asks for JSON only.
    last = reqs[2].messages[-1]
    assert last["role"] == "user" and last["content"].startswith("Plan the next step.")
    assert "one JSON object only" in last["content"] and '"score"' in last["content"]
    assert reqs[2].messages[0] == USER[0]


def test_endpoint_without_response_format_falls_back_to_text(fake_openai):
    rejected = {"status": 400, "error": "Unrecognized request argument supplied: response_format"}
    fake_openai.script(rejected, rejected, f"```json\n{GOOD}\n```")
    with make_model(fake_openai) as model:
        result = model.complete(USER, Plan)
        assert model.mode == "text"
    assert (result.mode, result.attempts) == ("text", 3)
    assert "response_format" not in fake_openai.chat_requests[-1].body


def test_configured_text_mode_sends_no_response_format(fake_openai):
    fake_openai.script(GOOD)
    with make_model(fake_openai, structured="text") as model:
        assert model.complete(USER, Plan).mode == "text"
    assert "response_format" not in fake_openai.chat_requests[0].body


def test_max_tokens_renamed_when_the_model_wants_max_completion_tokens(fake_openai):
    fake_openai.script(
        {
            "status": 400,
            "error": "Unsupported parameter: 'max_tokens' is not supported with this "
            "model. Use 'max_completion_tokens' instead.",
        },
        GOOD,
        GOOD,
    )
    with make_model(fake_openai, max_tokens=256, temperature=0.2) as model:
        assert model.complete(USER, Plan).attempts == 2
        assert model.complete(USER, Plan).attempts == 1
    first, second, third = fake_openai.chat_requests
    assert first.body["max_tokens"] == 256 and first.body["temperature"] == 0.2
    for req in (second, third):
        assert req.body["max_completion_tokens"] == 256 and "max_tokens" not in req.body


# -- retries ---------------------------------------------------------------------------------------


def test_429_is_retried_honouring_retry_after(fake_openai):
    fake_openai.script({"status": 429, "headers": {"Retry-After": "2"}}, GOOD)
    waits = Waits()
    with make_model(fake_openai, waits) as model:
        result = model.complete(USER, Plan)
    assert result.attempts == 2 and result.parsed.name == "tile"
    assert waits == [2.0]


def test_retry_after_is_capped(fake_openai):
    fake_openai.script({"status": 429, "headers": {"retry-after-ms": "3600000"}}, GOOD)
    waits = Waits()
    with make_model(fake_openai, waits) as model:
        model.complete(USER, Plan)
    assert waits == [60.0]


def test_server_errors_back_off_exponentially_with_jitter(fake_openai):
    fake_openai.script({"status": 500}, {"status": 503}, {"status": 502}, GOOD)
    waits = Waits()
    with make_model(fake_openai, waits) as model:
        result = model.complete(USER, Plan)
    assert result.attempts == 4 and len(waits) == 3
    for i, wait in enumerate(waits):
        assert 0.5 * 2**i / 2 <= wait <= 0.5 * 2**i


def test_server_errors_exhaust_retries(fake_openai):
    err = error_of(fake_openai, {"status": 500}, {"status": 500}, GOOD, max_retries=1)
    assert (err.kind, err.status, err.attempts, err.retryable) == ("server", 500, 2, True)
    assert fake_openai.pending == 1


@pytest.mark.integration
def test_timeout_is_retried_then_succeeds(fake_openai):
    fake_openai.script({"delay": 3.0, "content": GOOD}, GOOD)
    started = time.monotonic()
    with make_model(fake_openai, timeout_s=0.3, max_retries=2) as model:
        result = model.complete(USER, Plan)
    assert result.attempts == 2 and time.monotonic() - started < 2.5


@pytest.mark.integration
def test_timeout_exhausted_raises_timeout(fake_openai):
    slow = {"delay": 3.0, "content": GOOD}
    started = time.monotonic()
    err = error_of(fake_openai, slow, slow, timeout_s=0.3, max_retries=1)
    assert (err.kind, err.attempts) == ("timeout", 2)
    assert "0.3 s" in err.message
    assert time.monotonic() - started < 2.5


@pytest.mark.integration
def test_not_streamed_timeout_exhausted_raises_timeout(fake_openai):
    slow = {"delay": 3.0, "content": GOOD}
    err = error_of(fake_openai, slow, slow, timeout_s=0.3, max_retries=1, stream=False)
    assert (err.kind, err.attempts, err.retryable) == ("timeout", 2, True)
    assert "no reply" in err.message and "0.3 s" in err.message
    assert not any(r.body.get("stream") for r in fake_openai.chat_requests)


# -- streamed replies ----------------------------------------------------------------------------


def test_replies_are_streamed_with_usage_and_progress(fake_openai):
    fake_openai.script({"content": GOOD, "usage": {"prompt_tokens": 50, "completion_tokens": 7}})
    seen: list[int] = []
    with make_model(fake_openai) as model:
        result = model.complete(USER, Plan, on_progress=seen.append)
    (request,) = fake_openai.chat_requests
    assert request.body["stream"] is True and request.body["stream_options"] == {"include_usage": True}
    assert result.parsed == Plan(name="tile", score=3)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (50, 7)
    pieces = -(-len(GOOD) // 8)  # the fake sends 8 characters a piece
    assert seen == list(range(1, pieces + 1))


@pytest.mark.integration
def test_an_endpoint_that_takes_the_request_and_never_answers_is_abandoned_after_two_waits(fake_openai):
    """However many retries are configured: a silent endpoint costs two first-token waits, not ten minutes."""
    silent = {"delay": 30.0, "content": GOOD}
    started = time.monotonic()
    err = error_of(fake_openai, silent, silent, silent, GOOD, first_token_s=0.4, max_retries=4)
    elapsed = time.monotonic() - started
    assert (err.kind, err.attempts, err.retryable) == ("timeout", 2, False)
    assert "no first token" in err.message and "0.4 s" in err.message and "first_token_s" in err.message
    assert elapsed < 3.0
    assert fake_openai.pending == 2


@pytest.mark.integration
def test_a_reply_that_stalls_is_abandoned_and_retried_once(fake_openai):
    fake_openai.script({"stall": 30.0, "content": GOOD}, GOOD)
    with make_model(fake_openai, first_token_s=0.4) as model:
        result = model.complete(USER, Plan)
    assert result.attempts == 2 and result.parsed == Plan(name="tile", score=3)
    stalled = {"stall": 30.0, "content": GOOD}
    err = error_of(fake_openai, stalled, stalled, first_token_s=0.4)
    assert err.kind == "timeout" and "stalled for 0.4 s after 1 pieces" in err.message


@pytest.mark.integration
def test_a_slow_but_steady_reply_is_bounded_by_timeout_s(fake_openai):
    """A reply whose pieces keep coming is not silent, but the whole of it must arrive within timeout_s."""
    drip = {"drip": 0.25, "content": GOOD}  # 7 events: 1.75 s
    err = error_of(fake_openai, drip, drip, timeout_s=1.0, first_token_s=5.0, max_retries=1)
    assert err.kind == "timeout" and "not complete after 1 s" in err.message


def test_an_endpoint_that_cannot_stream_gets_whole_requests(fake_openai):
    fake_openai.script({"no_stream": True}, GOOD, GOOD)
    with make_model(fake_openai) as model:
        first = model.complete(USER, Plan)
        second = model.complete(USER, Plan)
    assert first.parsed == second.parsed == Plan(name="tile", score=3)
    streamed = [bool(r.body.get("stream")) for r in fake_openai.chat_requests]
    assert streamed == [True, False, False]  # refused once, then remembered


def test_an_endpoint_that_ignores_stream_and_answers_whole_is_read_and_then_asked_whole(fake_openai):
    fake_openai.script(
        {"ignore_stream": True, "content": GOOD, "usage": {"prompt_tokens": 9, "completion_tokens": 4}}, GOOD
    )
    with make_model(fake_openai) as model:
        first = model.complete(USER, Plan)
        second = model.complete(USER, Plan)
    assert first.parsed == second.parsed == Plan(name="tile", score=3) and first.attempts == 1
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (9, 4)
    assert [bool(r.body.get("stream")) for r in fake_openai.chat_requests] == [True, False]


def test_an_endpoint_that_refuses_stream_options_streams_without_them(fake_openai):
    fake_openai.script({"status": 400, "error": "Unrecognized request argument supplied: stream_options"}, GOOD)
    with make_model(fake_openai) as model:
        result = model.complete(USER, Plan)
    assert result.parsed == Plan(name="tile", score=3) and not result.usage.cost_known
    first, second = fake_openai.chat_requests
    assert "stream_options" in first.body and "stream_options" not in second.body and second.body["stream"]


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits = Waits()
    settings = ModelSettings(model="m", base_url=f"http://user:pw@127.0.0.1:{port}/v1?k=v", max_retries=2, timeout_s=2)
    with ChatModel(settings, api_key=KEY, sleep=waits) as model, pytest.raises(ProviderError) as info:
        model.complete(USER, Plan)
    err = info.value
    assert (err.kind, err.attempts, len(waits)) == ("connection", 3, 2)
    assert f"127.0.0.1:{port}/v1" in err.message and "pw" not in err.message and "k=v" not in err.message


# -- errors that are not retried -------------------------------------------------------------------


def test_401_is_an_auth_error_naming_the_env_var_without_the_key(fake_openai):
    err = error_of(
        fake_openai, {"status": 401, "error": f"Incorrect API key provided: {KEY}"}, api_key_env="MY_LLM_KEY"
    )
    assert (err.kind, err.status, err.attempts, err.retryable) == ("auth", 401, 1, False)
    assert "$MY_LLM_KEY" in err.message and "401" in err.message
    assert_no_key(err)


def test_error_messages_never_echo_a_key_of_any_shape(fake_openai):
    key = "local-vllm-key-42"
    fake_openai.script({"status": 400, "error": f"bad request from key {key}"})
    settings = ModelSettings(model="fake-model", base_url=fake_openai.base_url)
    with ChatModel(settings, api_key=key) as model, pytest.raises(ProviderError) as info:
        model.complete(USER, Plan)
    assert info.value.kind == "bad_request" and "bad request from key" in info.value.message
    assert key not in str(info.value) and key not in repr(info.value)


def test_provider_error_survives_pickling(fake_openai):
    err = error_of(fake_openai, {"status": 429, "headers": {"Retry-After": "1"}}, max_retries=0)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.kind, copy.message, copy.retryable, copy.status, copy.retry_after, copy.attempts) == (
        "rate_limit",
        err.message,
        True,
        429,
        1.0,
        1,
    )


def test_403_is_an_auth_error(fake_openai):
    err = error_of(fake_openai, {"status": 403, "error": "Bearer " + KEY + " lacks access"})
    assert err.kind == "auth" and "fake-model" in err.message
    assert_no_key(err)


def test_404_is_not_found_naming_the_model_and_endpoint(fake_openai):
    err = error_of(fake_openai, {"status": 404}, model="no-such-model")
    assert (err.kind, err.attempts) == ("not_found", 1)
    assert "'no-such-model'" in err.message and fake_openai.base_url in err.message and "404" in err.message


def test_other_4xx_is_a_bad_request_not_retried(fake_openai):
    err = error_of(fake_openai, {"status": 400, "error": "messages: too long"}, GOOD)
    assert (err.kind, err.attempts) == ("bad_request", 1)
    assert "messages: too long" in err.message and fake_openai.pending == 1


def test_quota_exhausted_429_is_not_retried(fake_openai):
    err = error_of(fake_openai, {"status": 429, "code": "insufficient_quota", "error": "You exceeded your quota"}, GOOD)
    assert (err.kind, err.retryable, err.attempts) == ("rate_limit", False, 1)


def test_refusal_is_reported(fake_openai):
    err = error_of(fake_openai, {"refusal": "I can't help with that"})
    assert (err.kind, err.attempts) == ("refusal", 1)
    assert "I can't help with that" in err.message


def test_content_filter_is_a_refusal(fake_openai):
    err = error_of(fake_openai, {"content": "", "finish_reason": "content_filter"})
    assert err.kind == "refusal"


# -- keys ------------------------------------------------------------------------------------------


def test_key_comes_from_the_named_env_var(fake_openai, monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", "sk-from-env-123456")
    fake_openai.script(GOOD)
    settings = ModelSettings(model="fake-model", base_url=fake_openai.base_url, api_key_env="MY_LLM_KEY")
    assert api_key(settings) == "sk-from-env-123456"
    with ChatModel(settings) as model:
        model.complete(USER, Plan)
    assert fake_openai.chat_requests[0].headers["authorization"] == "Bearer sk-from-env-123456"


def test_local_endpoint_without_key_gets_a_placeholder(fake_openai, monkeypatch):
    monkeypatch.delenv("LOCAL_KEY", raising=False)
    fake_openai.script(GOOD)
    settings = ModelSettings(model="fake-model", base_url=fake_openai.base_url, api_key_env="LOCAL_KEY")
    assert api_key(settings) is None
    with ChatModel(settings) as model:
        assert model.complete(USER, Plan).parsed.score == 3
    assert fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


def test_openai_without_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("MISSING_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderError) as info:
        ChatModel(ModelSettings(model="gpt-4o", api_key_env="MISSING_KEY"))
    assert info.value.kind == "auth" and "$MISSING_KEY" in info.value.message


# -- usage and cost --------------------------------------------------------------------------------


def test_usage_and_cost_sum_over_every_attempt(fake_openai):
    fake_openai.script(
        {"content": "not json", "usage": {"prompt_tokens": 1000, "completion_tokens": 200}},
        {"status": 500},
        {"content": GOOD, "usage": {"prompt_tokens": 3000, "completion_tokens": 100}},
    )
    settings = ModelSettings(model="fake-model", base_url=fake_openai.base_url)
    with ChatModel(settings, api_key=KEY, prices={"fake-model": (1.0, 10.0)}, sleep=Waits()) as model:
        result = model.complete(USER, Plan)
    assert result.attempts == 3
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (4000, 300)
    assert result.usage.cost_known
    assert result.usage.cost_usd == pytest.approx((4000 * 1.0 + 300 * 10.0) / 1e6)


def test_cost_unknown_without_a_price(fake_openai):
    fake_openai.script(GOOD)
    with make_model(fake_openai, model="mystery-model") as model:
        usage = model.complete(USER, Plan).usage
    assert usage.cost_usd is None and not usage.cost_known and usage.prompt_tokens == 100


def test_cost_from_the_served_snapshot_name(fake_openai):
    fake_openai.script(
        {
            "content": GOOD,
            "model": "gpt-4o-mini-2024-07-18",
            "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000},
        }
    )
    with make_model(fake_openai, model="my-alias") as model:
        result = model.complete(USER, Plan)
    assert result.model == "gpt-4o-mini-2024-07-18"
    assert result.usage.cost_usd == pytest.approx(0.15 + 0.60)


def test_usage_addition():
    known = Usage(prompt_tokens=10, completion_tokens=1, cost_usd=0.5)
    unknown = Usage(prompt_tokens=5, completion_tokens=2, cost_known=False)
    total = known + unknown
    assert (total.prompt_tokens, total.completion_tokens, total.cost_usd, total.cost_known) == (15, 3, 0.5, False)
    both = sum([known, known], Usage())
    assert both.cost_usd == pytest.approx(1.0) and both.cost_known and both.total_tokens == 22
    assert sum([known, unknown]).cost_known is False
    assert (Usage() + Usage()).cost_usd is None


def test_resolve_prices():
    gpt = ModelSettings(model="openai/gpt-4o-2024-08-06")
    assert resolve_prices(gpt) == (2.5, 10.0)
    assert resolve_prices(gpt, {"gpt-4o": (1.0, 2.0)}) == (1.0, 2.0)
    assert resolve_prices(ModelSettings(model="gpt-4o", price_out_per_mtok=7.0)) == (2.5, 7.0)
    assert resolve_prices(ModelSettings(model="gpt-4o-audio-preview")) is None
    assert resolve_prices(ModelSettings(model="local", price_in_per_mtok=0, price_out_per_mtok=0)) == (0.0, 0.0)


# -- configuration ---------------------------------------------------------------------------------


@pytest.fixture()
def clean_env(monkeypatch):
    for name in ("FORGE_MODEL", "FORGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_config_from_pyproject(tmp_path, clean_env):
    write(
        tmp_path / "pyproject.toml",
        """
[project]
name = "x"

[tool.forge]
model = "qwen2.5-coder"
base_url = "http://localhost:11434/v1"
search = "linear"
rounds = 3
max_tokens = 4096

[tool.forge.prices]
"qwen2.5-coder" = [0.0, 0.0]
""",
    )
    config = load_config(tmp_path)
    assert config.coder == ModelSettings(model="qwen2.5-coder", base_url="http://localhost:11434/v1", max_tokens=4096)
    assert config.judge == config.coder
    assert (config.search, config.rounds, config.concurrency) == ("linear", 3, 4)
    assert config.prices == {"qwen2.5-coder": (0.0, 0.0)}
    assert model_configured(config)


def test_forge_toml_wins_and_judge_inherits_coder(tmp_path, clean_env):
    write(
        tmp_path / "pyproject.toml",
        """
[tool.forge]
model = "from-pyproject"
base_url = "http://vllm:8000/v1"
rounds = 7
price_in_per_mtok = 1.0
price_out_per_mtok = 2.0
""",
    )
    write(
        tmp_path / "forge.toml",
        """
model = "from-forge-toml"
budget_usd = 2.5

[judge]
model = "small-judge"
temperature = 0.0
""",
    )
    config = load_config(tmp_path)
    assert config.coder.model == "from-forge-toml" and config.coder.base_url == "http://vllm:8000/v1"
    assert config.coder.price_in_per_mtok == 1.0
    assert (config.rounds, config.budget_usd) == (7, 2.5)
    assert config.judge.model == "small-judge" and config.judge.base_url == "http://vllm:8000/v1"
    assert config.judge.temperature == 0.0
    assert config.judge.price_in_per_mtok is None  # another model: the coder's price does not apply


def test_forge_toml_tool_table_and_coder_table(tmp_path, clean_env):
    write(
        tmp_path / "forge.toml",
        """
[tool.forge]
concurrency = 2

[tool.forge.coder]
model = "coder-x"
structured = "json_object"
""",
    )
    config = load_config(tmp_path)
    assert config.concurrency == 2
    assert config.coder.model == "coder-x" and config.coder.structured == "json_object"
    assert config.judge == config.coder


def test_overrides_apply_last_and_ignore_none(tmp_path, clean_env):
    write(tmp_path / "pyproject.toml", '[tool.forge]\nmodel = "a"\nrounds = 5\nwall_s = 60\n')
    config = load_config(
        tmp_path, {"model": "b", "search": "linear", "rounds": 2, "wall_s": None, "judge": {"model": "j"}}
    )
    assert (config.coder.model, config.judge.model, config.search, config.rounds, config.wall_s) == (
        "b",
        "j",
        "linear",
        2,
        60,
    )
    with pytest.raises(ConfigError, match="unknown agent setting"):
        load_config(tmp_path, {"modle": "typo"})
    with pytest.raises(ConfigError, match="rounds"):
        load_config(tmp_path, {"rounds": 0})


def test_literal_api_key_in_config_is_rejected(tmp_path, clean_env):
    write(tmp_path / "pyproject.toml", f'[tool.forge]\nmodel = "gpt-4o"\napi_key = "{KEY}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "environment" in message and KEY not in message


def test_literal_api_key_in_a_role_table_names_its_env_var(tmp_path, clean_env):
    write(tmp_path / "forge.toml", f'[judge]\nmodel = "j"\napi_key_env = "JUDGE_KEY"\napi_key = "{KEY}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "JUDGE_KEY" in str(info.value) and "judge.api_key" in str(info.value) and KEY not in str(info.value)


def test_key_pasted_into_api_key_env_is_rejected_without_echo(tmp_path, clean_env):
    write(tmp_path / "forge.toml", f'model = "m"\napi_key_env = "{KEY}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "api_key_env" in str(info.value) and KEY not in str(info.value)


def test_invalid_toml_is_a_config_error(tmp_path, clean_env):
    write(tmp_path / "forge.toml", "model = \n")
    with pytest.raises(ConfigError, match="forge.toml"):
        load_config(tmp_path)


def test_forge_model_env_fallback(tmp_path, clean_env):
    assert not model_configured(load_config(tmp_path))
    clean_env.setenv("FORGE_MODEL", "env-model")
    clean_env.setenv("FORGE_BASE_URL", "http://localhost:1234/v1")
    config = load_config(tmp_path)
    assert (config.coder.model, config.coder.base_url) == ("env-model", "http://localhost:1234/v1")
    assert config.judge == config.coder
    write(tmp_path / "pyproject.toml", '[tool.forge]\nmodel = "file-model"\n')
    config = load_config(tmp_path)
    assert (config.coder.model, config.coder.base_url) == ("file-model", None)


def test_how_to_configure_names_every_way():
    for needle in ("OPENAI_API_KEY", "[tool.forge]", "pyproject.toml", "base_url", "--model", "FORGE_MODEL"):
        assert needle in HOW_TO_CONFIGURE


def test_redacted_drops_secret_like_names_and_is_json():
    class WithSecrets(AgentConfig):
        auth_token: str = "tok-999"
        db_password: str = "hunter2"
        client_secret: str = "shh"

    config = WithSecrets(coder=ModelSettings(model="m", max_tokens=100), prices={"monkey-7b": (1.0, 2.0)})
    data = config.redacted()
    text = json.dumps(data)
    for secret in ("tok-999", "hunter2", "shh", "auth_token", "db_password", "client_secret"):
        assert secret not in text
    assert data["coder"]["api_key_env"] == "OPENAI_API_KEY" and data["coder"]["max_tokens"] == 100
    assert data["judge"]["model"] == "m"
    assert data["prices"] == {"monkey-7b": [1.0, 2.0]}
    assert AgentConfig.model_validate(data) == AgentConfig.model_validate(config.model_dump())
