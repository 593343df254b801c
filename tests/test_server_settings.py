"""Server settings: client JSON in, typed settings out; bad values fall back with a message; keys refused."""

from __future__ import annotations

from forge_lsp.server.settings import Settings, parse_settings


def test_camel_case_section_and_defaults():
    s, problems = parse_settings(
        {
            "forge": {
                "model": "gpt-4o",
                "baseUrl": "http://localhost:8000/v1",
                "rounds": 3,
                "budgetUsd": 1.5,
                "search": "linear",
                "workers": 3,
            }
        }
    )
    assert problems == []
    assert (s.model, s.base_url, s.rounds, s.budget_usd, s.search, s.workers) == (
        "gpt-4o",
        "http://localhost:8000/v1",
        3,
        1.5,
        "linear",
        3,
    )
    assert s.agent_overrides()["base_url"] == "http://localhost:8000/v1"


def test_invalid_values_keep_the_previous_ones_and_say_so():
    previous = Settings(rounds=7)
    s, problems = parse_settings({"rounds": -1, "search": "greedy", "device": "cuda:1"}, previous)
    assert s.rounds == 7 and s.search == "mcts" and s.device == "cuda:1"
    assert any("forge.rounds" in p for p in problems) and any("forge.search" in p for p in problems)


def test_api_keys_in_settings_are_refused_and_never_echoed():
    secret = "sk-should-never-be-echoed-123"
    s, problems = parse_settings({"apiKey": secret, "model": "m"})
    assert s.model == "m" and not hasattr(s, "api_key")
    assert problems and all(secret not in p for p in problems) and "environment" in problems[0]


def test_unknown_keys_and_wrong_types_are_reported():
    s, problems = parse_settings({"colour": "blue"})
    assert s == Settings() and problems == ["unknown setting forge.colour ignored"]
    s, problems = parse_settings(["not", "an", "object"])
    assert s == Settings() and "must be an object" in problems[0]


def test_setting_changes_are_logged_without_credentials(caplog):
    """The log says which settings changed (the e2e test waits on it), never a password in an endpoint URL."""
    import logging
    from types import SimpleNamespace

    from forge_lsp.server.features.lifecycle import _apply_settings

    ls = SimpleNamespace(settings=Settings(), message=lambda *a, **k: None)
    with caplog.at_level(logging.INFO, logger="forge_lsp.server"):
        _apply_settings(ls, {"forge": {"model": "m", "baseUrl": "http://user:hunter2@models.example:8080/v1"}})
        _apply_settings(ls, {"forge": {"model": "m"}})  # nothing new: nothing logged
    lines = [r.getMessage() for r in caplog.records if "settings changed" in r.getMessage()]
    assert lines == ["settings changed: base_url='http://models.example:8080/v1', model='m'"], lines
    assert ls.settings.base_url == "http://user:hunter2@models.example:8080/v1"  # used as given, only hidden in logs
