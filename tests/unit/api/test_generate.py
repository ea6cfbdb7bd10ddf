"""The CRD generator: deterministic, and the committed CRDs match the models (the drift check)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from reprise_operator.api import KINDS
from reprise_operator.api import generate
from reprise_operator.api.generate import CHART_CRD_DIR, CHART_TEMPLATE_DIR, CRD_DIR, REPOSITORY

HINT = "run `make crds` and commit crds/ and charts/reprise/ (the models in operator/reprise_operator/api changed)"


def test_render_is_deterministic_across_processes(tmp_path: Path) -> None:
    # Different hash seeds change set and dict iteration order in a fresh interpreter; output must not.
    outputs = []
    for seed in ("0", "12345"):
        root = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": f"{REPOSITORY}:{REPOSITORY / 'operator'}"}
        subprocess.run(
            [sys.executable, "-m", "reprise_operator.api.generate", "--root", str(root)],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        outputs.append({p.relative_to(root): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()})
    assert outputs[0] == outputs[1]
    assert outputs[0] == generate.render()


def test_committed_crds_match_the_models(tmp_path: Path) -> None:
    written = generate.write(tmp_path)
    assert len(written) == 3 * len(KINDS) + 1  # three CRD copies per kind, and the RBAC plurals
    drifted = [
        str(rel)
        for rel in written
        if not (REPOSITORY / rel).exists() or (REPOSITORY / rel).read_text() != (tmp_path / rel).read_text()
    ]
    assert not drifted, f"generated CRDs drifted from the models: {drifted}; {HINT}"
    assert generate.stale(REPOSITORY, generate.render()) == [], f"stale generated files; {HINT}"


def test_check_mode_passes_on_the_committed_files(capsys) -> None:
    assert generate.main(["--check"]) == 0, f"{capsys.readouterr().out}\n{HINT}"


def test_check_mode_fails_with_a_diff_when_a_file_drifts(tmp_path: Path, capsys) -> None:
    generate.write(tmp_path)
    target = tmp_path / CRD_DIR / "reprise.io_reconsumes.yaml"
    target.write_text(target.read_text().replace("Rewind, Parallel or Handover.", "edited by hand"))
    (tmp_path / CRD_DIR / "reprise.io_olds.yaml").write_text("kind: CustomResourceDefinition\n")
    assert generate.main(["--check", "--root", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "-    - description: edited by hand" in captured.out
    assert "+    - description: Rewind, Parallel or Handover." in captured.out
    assert "reprise.io_olds.yaml: not produced by the models any more" in captured.out
    assert "make crds" in captured.err


def test_the_three_copies_hold_the_same_crd() -> None:
    files = generate.render()
    for kind in KINDS:
        plain = yaml.safe_load(files[CRD_DIR / f"reprise.io_{kind.plural}.yaml"])
        assert yaml.safe_load(files[CHART_CRD_DIR / f"reprise.io_{kind.plural}.yaml"]) == plain
        template = files[CHART_TEMPLATE_DIR / f"{kind.plural}.yaml"]
        assert template.splitlines()[1] == "{{- if .Values.crds.enabled }}"
        assert template.rstrip().endswith("{{- end }}")
        # Rendered by hand the way Helm would with crds.keep=true: the same CRD plus the keep annotation.
        rendered = "\n".join(line for line in template.splitlines() if not line.lstrip().startswith("{{"))
        document = yaml.safe_load(rendered)
        assert document["metadata"].pop("annotations") == {"helm.sh/resource-policy": "keep"}
        assert document == plain


def test_crd_names_and_kubectl_ergonomics() -> None:
    expected = {
        "Reconsume": ("reconsumes", ["rcs"], ["Phase", "Mode", "Progress", "Lag", "ETA", "Verified", "Age"]),
        "Backfill": ("backfills", ["bf"], ["Phase", "Keys", "Barrier", "Age"]),
        "LakeReplay": ("lakereplays", ["lr"], ["Phase", "Spark", "Lag", "Verified", "Age"]),
    }
    for kind in KINDS:
        crd = generate.crd(kind)
        plural, short, columns = expected[kind.kind]
        names = crd["spec"]["names"]
        assert crd["metadata"]["name"] == f"{plural}.reprise.io"
        assert (names["plural"], names["shortNames"], names["categories"]) == (plural, short, ["replays"])
        assert crd["spec"]["scope"] == "Namespaced"
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
        shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
        assert shown == columns
