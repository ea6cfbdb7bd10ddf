"""The `restricted` Pod Security Standard as a pure check of a pod spec, for the chart's unit tests.

The integration tests prove admission on a real API server (a namespace labelled
`pod-security.kubernetes.io/enforce=restricted`); this gives the same answer without one, with a message
per rule, following https://kubernetes.io/docs/concepts/security/pod-security-standards/ (v1.35).
"""

from __future__ import annotations

from typing import Any

RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}


def restricted_violations(pod_spec: dict[str, Any]) -> list[str]:
    """Every rule of `restricted` (baseline included) that `pod_spec` breaks; [] when it is admitted."""
    problems: list[str] = []
    pod_sc = pod_spec.get("securityContext") or {}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(host):
            problems.append(f"spec.{host} must not be true")
    for volume in pod_spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume.get('name')}: type {sorted(kinds - RESTRICTED_VOLUMES)} is not allowed")
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"sysctl {sysctl.get('name')} is not allowed")
    pod_non_root = pod_sc.get("runAsNonRoot")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    if pod_sc.get("runAsUser") == 0:
        problems.append("spec.securityContext.runAsUser must not be 0")
    if pod_seccomp == "Unconfined":
        problems.append("spec.securityContext.seccompProfile must not be Unconfined")
    containers = [("initContainers", c) for c in pod_spec.get("initContainers") or []]
    containers += [("containers", c) for c in pod_spec.get("containers") or []]
    containers += [("ephemeralContainers", c) for c in pod_spec.get("ephemeralContainers") or []]
    for field, container in containers:
        where = f"{field}[{container.get('name')}]"
        sc = container.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{where}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: securityContext.allowPrivilegeEscalation must be false")
        non_root = sc.get("runAsNonRoot", pod_non_root)
        if non_root is not True:
            problems.append(f"{where}: runAsNonRoot must be true (pod or container)")
        if sc.get("runAsUser") == 0:
            problems.append(f"{where}: runAsUser must not be 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: seccompProfile.type must be RuntimeDefault or Localhost (pod or container)")
        capabilities = sc.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            problems.append(f"{where}: capabilities.drop must include ALL")
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            problems.append(f"{where}: capabilities.add {sorted(added)} is not allowed")
        if sc.get("procMount", "Default") != "Default":
            problems.append(f"{where}: procMount must be Default")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"{where}: hostPort {port['hostPort']}")
    return problems
