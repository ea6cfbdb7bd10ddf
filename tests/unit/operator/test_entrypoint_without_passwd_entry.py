"""The operator's entrypoint as the image runs it: uid 65532, gid 65532, no /etc/passwd entry, and no USER,
LOGNAME, LNAME or USERNAME in the environment (a pod's env has none of them).

Kopf's default peering identity asks `getpass.getuser()`, which then falls back to `pwd.getpwuid(65532)` and
raises KeyError: the chart's operator pod crash-looped on a real node (issue 29). The child process runs `main()` against an API server that is not there: the startup handler logs its line before Kopf logs in,
so that line shows the operator got past its identity. The child's real uid and gid become 65532 (what
`getuser()` and `getpwuid()` look up); its effective ids stay the test's, so that the imports Kopf and the
kubernetes client make lazily can still read the checkout and the venv whatever their permissions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
IMAGE_USER = 65532

CHILD = textwrap.dedent(
    """
    import os, pwd, sys
    import reprise_operator.__main__ as entry
    try:
        pwd.getpwuid(%(uid)d)
        sys.exit("uid %(uid)d has a passwd entry on this machine; the test needs one without")
    except KeyError:
        pass
    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        os.environ.pop(name, None)
    os.setgroups([])
    os.setresgid(%(uid)d, 0, 0)
    os.setresuid(%(uid)d, 0, 0)
    sys.exit(entry.main([]))
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to uid 65532 needs root")
def test_operator_starts_as_a_uid_without_passwd_entry(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Config
            clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
            users: [{name: none, user: {token: not-a-secret}}]
            contexts: [{name: none, context: {cluster: none, user: none}}]
            current-context: none
            """
        )
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'operator'}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "KUBECONFIG": str(kubeconfig),
        "REPRISE_LEADER_ELECTION": "false",
        "REPRISE_METRICS_PORT": "0",
        "REPRISE_WEBHOOK_PORT": "0",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD % {"uid": IMAGE_USER}],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:  # ends when the child exits (a crash) or once the startup line is read
            seen.append(line)
            if "reprise operator watching" in line:
                break
    finally:
        child.kill()
        child.wait()
    output = "".join(seen)
    assert "getpwuid" not in output, output
    assert "reprise operator watching" in output, output
