# syntax=docker/dockerfile:1
#
# The Reprise image: the operator and the replay worker, one image for both.
#   operator:      the ENTRYPOINT, `python -m reprise_operator` (the chart's Deployment adds no command)
#   replay worker: `python -m replay_worker` (what Backfill Jobs and LakeReplay drains run; the operator
#                  sets that command itself, see operator/reprise_operator/rules/workloads.py)
# The Spark image of LakeReplay has its own recipe, spark_app/Dockerfile. Build both with `make image`:
#   docker build -t reprise:dev -f Dockerfile .
#
# Slim and locked down: no compiler, no pip, no shell tools beyond the base's; a numeric non-root USER, so
# `runAsNonRoot` can be verified by the kubelet; nothing is written at run time (bytecode is compiled here
# and PYTHONDONTWRITEBYTECODE is set), so `readOnlyRootFilesystem: true` works with only /tmp as emptyDir.

# Pinned to an exact patch release of Python 3.11 (pyproject requires 3.11) on Debian 12. To pin by
# digest as well, pass --build-arg PYTHON_BASE=python:3.11.14-slim-bookworm@sha256:<digest>.
ARG PYTHON_BASE=python:3.11.14-slim-bookworm

# ---- dependencies: the runtime requirements of pyproject.toml at the exact versions of constraints.txt
FROM ${PYTHON_BASE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ONLY_BINARY=:all:
COPY constraints.txt /build/constraints.txt
# Only the runtime dependencies (not pyspark, pytest or lupa, which constraints.txt also pins for tests);
# tests/unit/test_dockerfile.py checks this list against pyproject.toml's [project] dependencies.
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --constraint /build/constraints.txt \
      kopf kubernetes confluent-kafka pydantic prometheus-client PyYAML fastavro protobuf \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} + \
 && /opt/venv/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/venv/lib

# ---- the project's own code: only the two programs this image runs
FROM ${PYTHON_BASE} AS source
COPY operator/reprise_operator /opt/reprise/reprise_operator
COPY replay_worker /opt/reprise/replay_worker
RUN find /opt/reprise -name '__pycache__' -prune -exec rm -rf {} + \
 && python -m compileall -q --invalidation-mode unchecked-hash /opt/reprise

# ---- the image
FROM ${PYTHON_BASE}
LABEL org.opencontainers.image.title="reprise" \
      org.opencontainers.image.description="Reprise: a Kubernetes operator for reprocessing Kafka history (operator and replay worker)" \
      org.opencontainers.image.source="https://github.com/reprise-io/reprise" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=deps /opt/venv /opt/venv
COPY --from=source /opt/reprise /opt/reprise
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/reprise \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /opt/reprise
# 65532: the conventional "nonroot" UID/GID (distroless); no entry in /etc/passwd is needed.
USER 65532:65532
# 8080: the operator's /metrics and /healthz (REPRISE_METRICS_PORT); 9400: the replay worker's.
EXPOSE 8080 9400
ENTRYPOINT ["python", "-m", "reprise_operator"]
