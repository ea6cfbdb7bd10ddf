# Sourced by the real node's scripts: podman and buildah with their storage, runtime state and settings in the
# cache (REPRISE_CACHE), never in /var/lib/containers, and with the settings this kind of machine needs.
cache=${REPRISE_CACHE:-$HOME/.cache/reprise}
node_cache="$cache/node"
mkdir -p "$node_cache/containers/tmp"
cat > "$node_cache/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$node_cache/containers/storage"
runroot = "$node_cache/containers/run"
CONF
# runc, because crun refuses a hybrid cgroup layout; ulimits at the current hard limits, because root here lacks
# CAP_SYS_RESOURCE and podman's defaults (nofile 1048576) are above them.
cat > "$node_cache/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
netns = "host"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$node_cache/containers/events.log"
tmp_dir = "$node_cache/containers/tmp"
runtime = "runc"
CONF
export CONTAINERS_STORAGE_CONF="$node_cache/storage.conf" CONTAINERS_CONF="$node_cache/containers.conf"
