"""What the Spark image (spark_app/Dockerfile) runs for a Spark pod, on a machine with no container runtime.

The real Spark operator's controller runs `spark-submit --deploy-mode cluster` against the local API server;
spark-submit creates the driver pod (label `spark-role=driver`, image whatever the SparkApplication names, no
`command`, args `driver --properties-file /opt/spark/conf/spark.properties --class ... <main> <args>`) and
the ConfigMap that holds that properties file. In the image, `/opt/entrypoint.sh` turns those args into a
client-mode spark-submit inside the container. The node agent runs this module in its place
(`python -m local_platform.spark_image driver ...`, see `node_agent.SPARK_ENTRYPOINT`): the agent has
already mapped the mounted paths in the args (the properties file is in the pod's ConfigMap volume), and this
module maps what the IMAGE holds:

- `/opt/reprise` (spark_app, the job) is this checkout;
- `/opt/spark/jars` is Spark's classpath: pyspark's own jars, plus the four jars spark_app/Dockerfile bakes in
  (the Kafka connector, its token provider, kafka-clients, commons-pool2), which are the jars `spark_jars`
  resolved from Maven Central and are added to `spark.jars`; a `spark.jars` entry naming a jar of
  `/opt/spark/jars` is on that classpath already and is dropped;
- Spark runs in local mode inside the driver (`LOCAL_MASTER`): the executors are threads of the driver JVM,
  so no executor pods are created; `spark.executor.instances` is not exercised here.

Everything else in the properties file (what the controller and spark-submit decided) is kept. The process
execs spark-submit, so the pod's exit code is the driver's own and the controller reads it from the pod.
Pure rules at the top (unit-tested), the entrypoint at the bottom.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent

#: The label spark-submit puts on the pods it creates (the driver) and the driver on its executors.
SPARK_ROLE_LABEL = "spark-role"
SPARK_ROLES = ("driver", "executor")
#: Where the Spark image keeps Spark's jars, and where spark_app/Dockerfile puts the job.
IMAGE_JARS_DIR = "/opt/spark/jars"
IMAGE_PATHS = {"/opt/reprise": str(REPO_ROOT)}
#: Executors as threads of the driver: two, the size of these machines.
LOCAL_MASTER = "local[2]"
#: Shared 2-core machines: no UI, few shuffle partitions. Only where the application set nothing.
SMALL_MACHINE_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}
#: Pods share the host's network here: fixed driver ports (7078/7079 in cluster mode) would collide between
#: two drivers, so the local driver binds loopback on free ports.
LOCAL_DRIVER_CONF = {
    "spark.master": LOCAL_MASTER,
    "spark.submit.deployMode": "client",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.port": "0",
    "spark.driver.blockManager.port": "0",
    "spark.blockManager.port": "0",
}
_PATH_LISTS = ("spark.jars", "spark.files", "spark.submit.pyFiles", "spark.archives")
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+(\.\d+)*([.-][A-Za-z0-9]+)*)\.jar$")


class SparkImageError(Exception):
    """The pod asks for something this machine cannot run (the message says what)."""


def is_spark_pod(pod: Mapping) -> bool:
    """Whether a pod is one spark-submit or a Spark driver created (whatever its image)."""
    labels = ((pod.get("metadata") or {}).get("labels")) or {}
    return labels.get(SPARK_ROLE_LABEL) in SPARK_ROLES


# ------------------------------------------------------------------------------------- properties files


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file (what spark-submit writes with `Properties.store`) as a dict."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line continues
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    out: dict[str, str] = {}
    for line in logical:
        key, value = _split_property(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            key = line[:i]
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":") and ch in " \t":
                rest = rest[1:].lstrip(" \t")
            elif ch in "=:":
                rest = line[i + 1 :].lstrip(" \t")
            return key, rest
        i += 1
    return line, ""


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def format_properties(props: Mapping[str, str]) -> str:
    """`props` as a properties file `Properties.load` reads back exactly."""

    def escape(text: str, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        if key:
            text = re.sub(r"([=: #!])", r"\\\1", text)
        elif text.startswith((" ", "#", "!")):
            text = "\\" + text
        return text

    return "".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in sorted(props.items()))


# ------------------------------------------------------------------------------------- the image's paths


def image_path(value: str, path_map: Mapping[str, str]) -> str:
    """`local:///opt/reprise/spark_app/main.py` -> `<checkout>/spark_app/main.py`; longest prefix first.
    A `local://` URI is a file of the container: the scheme goes, whether or not a prefix matched."""
    text = value[len("local://") :] if value.startswith("local://") else value
    for prefix in sorted(path_map, key=len, reverse=True):
        if text == prefix or text.startswith(prefix.rstrip("/") + "/"):
            return path_map[prefix] + text[len(prefix.rstrip("/")) :]
    return text


def image_jar(value: str, resolved: Mapping[str, str], spark_jars_dir: Path | None) -> str | None:
    """A `spark.jars` entry on this machine: None for a jar of the image's `/opt/spark/jars` (pyspark's own, or
    an artifact the image bakes in: both are on the classpath already), unchanged for any other jar."""
    text = value[len("local://") :] if value.startswith("local://") else value
    if not text.startswith(IMAGE_JARS_DIR.rstrip("/") + "/"):
        return value
    name = text.rsplit("/", 1)[1]
    if spark_jars_dir is not None and (spark_jars_dir / name).is_file():
        return None
    m = _JAR_NAME.match(name)
    if m and m.group("artifact") in resolved:
        return None
    raise SparkImageError(
        f"{text} is a jar of the Spark image that this machine does not have: the local "
        f"platform maps only Spark's own jars and {', '.join(sorted(resolved))}"
    )


def local_driver_properties(
    props: Mapping[str, str],
    *,
    resolved: Mapping[str, str],
    classpath: Sequence[str],
    spark_jars_dir: Path | None,
    path_map: Mapping[str, str] = IMAGE_PATHS,
) -> dict[str, str]:
    """The driver's properties, for a local-mode driver on this machine (see the module docstring).

    `resolved`: artifact -> local jar of what the image bakes into /opt/spark/jars; `classpath`: those local
    jars, added to spark.jars (the image has them on Spark's classpath).
    """
    out = dict(props)
    for key in _PATH_LISTS:
        if not out.get(key):
            continue
        mapped = []
        for item in out[key].split(","):
            item = item.strip()
            if not item:
                continue
            jar = image_jar(item, resolved, spark_jars_dir) if key == "spark.jars" else item
            if jar is not None:
                mapped.append(image_path(jar, path_map) if jar.startswith(("local://", "/")) else jar)
        out[key] = ",".join(mapped)
    jars = [j for j in (out.get("spark.jars") or "").split(",") if j]
    out["spark.jars"] = ",".join(jars + [j for j in classpath if j not in jars])
    for key, value in SMALL_MACHINE_CONF.items():
        out.setdefault(key, value)
    out.update(LOCAL_DRIVER_CONF)
    return out


def driver_argv(
    args: Sequence[str], spark_submit: str, properties: str, path_map: Mapping[str, str] = IMAGE_PATHS
) -> list[str]:
    """The local spark-submit for the driver container's args (what the image's entrypoint does with
    `driver ...`): client mode, the local properties file, the main file mapped, the job's args as given."""
    if not args or args[0] != "driver":
        raise SparkImageError(f"not a driver container: args {list(args[:1])}")
    rest = list(args[1:])
    argv = [spark_submit, "--deploy-mode", "client", "--properties-file", properties]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--properties-file" and i + 1 < len(rest):
            i += 2
            continue
        if arg.startswith("--") and arg != "--" and i + 1 < len(rest) and not _is_primary(rest[i + 1]):
            argv += [arg, rest[i + 1]]
            i += 2
            continue
        # The primary resource (the main file), then the application's own arguments, unchanged.
        argv.append(image_path(arg, path_map) if arg.startswith("local://") else arg)
        argv += rest[i + 1 :]
        break
    return argv


def _is_primary(arg: str) -> bool:
    return arg.startswith("local://") or arg.endswith((".py", ".jar", ".R"))


# ------------------------------------------------------------------------------------- the entrypoint


def spark_submit_executable() -> str:
    """The `spark-submit` script of the pyspark in this Python environment."""
    import pyspark

    script = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    if not script.is_file():
        raise SparkImageError(f"pyspark has no bin/spark-submit at {script}: reinstall pyspark (make venv)")
    return str(script)


def spark_home() -> Path:
    """pyspark's folder: Spark's bin/ and jars/ (the SPARK_HOME of the controller's spark-submit)."""
    return Path(spark_submit_executable()).parent.parent


def _image_jars() -> tuple[dict[str, str], list[str]]:
    from .spark_jars import COMMONS_POOL2, CONNECTOR, KAFKA_CLIENTS, TOKEN_PROVIDER, resolve_spark_jars

    resolved = resolve_spark_jars()
    local = dict(zip((CONNECTOR, TOKEN_PROVIDER, KAFKA_CLIENTS, COMMONS_POOL2), (str(p) for p in resolved.jars)))
    return local, list(local.values())


def run_driver(args: Sequence[str]) -> None:
    """Exec the local spark-submit of a driver container (never returns)."""
    from .spark_jvm import short_job_options

    try:
        i = list(args).index("--properties-file")
        source = Path(args[i + 1])
    except (ValueError, IndexError):
        raise SparkImageError("the driver's args name no --properties-file") from None
    if not source.is_file():
        raise SparkImageError(f"the driver's properties file {source} does not exist (is its ConfigMap mounted?)")
    resolved, classpath = _image_jars()
    spark_submit = spark_submit_executable()
    props = local_driver_properties(
        parse_properties(source.read_text()),
        resolved=resolved,
        classpath=classpath,
        spark_jars_dir=Path(spark_submit).parent.parent / "jars",
    )
    local = Path.cwd() / "spark-local.properties"
    local.write_text(format_properties(props))
    argv = driver_argv(args, spark_submit, str(local))
    env = dict(os.environ)
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.setdefault("SPARK_SUBMIT_OPTS", short_job_options())
    env.pop("SPARK_CONF_DIR", None)  # the container's conf dir holds only what `local` now holds, mapped
    print("local_platform.spark_image: " + json.dumps(argv), flush=True)
    os.execve(spark_submit, argv, env)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    role = args[0] if args else ""
    try:
        if role == "driver":
            run_driver(args)
        if role == "executor":
            raise SparkImageError(
                "executor pods are not run here: the local driver runs Spark in local mode, "
                "its executors are threads of the driver JVM"
            )
        raise SparkImageError(f"the Spark image's entrypoint runs `driver` or `executor`, not {role!r}")
    except SparkImageError as exc:
        print(f"local_platform.spark_image: {exc}", file=sys.stderr, flush=True)
        return 101


if __name__ == "__main__":
    sys.exit(main())
