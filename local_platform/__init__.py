"""The local platform: real Kafka and a real Kubernetes control plane, built from package registries.

These machines have no container runtime and no internet, only package registries. This package builds
(Go module proxy, Maven Central) and runs the real parts on loopback, caches every build outside the
repository (see `cache`), and stops every process it starts by its PID. It is what `make run` and the
pytest session fixtures stand on.
"""
