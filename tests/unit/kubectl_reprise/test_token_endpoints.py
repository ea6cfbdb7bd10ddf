"""`kubectl reprise plan` and `rollback` take the OAuth token endpoints a Secret may name as the chart does
(issue 26, C1): `--oauth-token-endpoint` (repeatable), else `REPRISE_OAUTH_TOKEN_ENDPOINTS`; none by default."""

from __future__ import annotations

from kubectl_reprise.__main__ import _token_endpoints, parser


def test_the_flag_wins_over_the_environment_and_none_is_the_default(monkeypatch):
    monkeypatch.delenv("REPRISE_OAUTH_TOKEN_ENDPOINTS", raising=False)
    assert _token_endpoints(parser().parse_args(["plan", "-f", "x.yaml"])) == ()
    monkeypatch.setenv("REPRISE_OAUTH_TOKEN_ENDPOINTS", "https://a.example/t, https://b.example/t")
    assert _token_endpoints(parser().parse_args(["rollback", "r"])) == ("https://a.example/t", "https://b.example/t")
    given = parser().parse_args(
        [
            "plan",
            "-f",
            "x.yaml",
            "--oauth-token-endpoint",
            "https://c.example/t",
            "--oauth-token-endpoint",
            "https://d/t",
        ]
    )
    assert _token_endpoints(given) == ("https://c.example/t", "https://d/t")
