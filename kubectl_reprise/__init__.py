"""`kubectl reprise`: a kubectl plugin to plan, follow and steer Reprise replays from a terminal.

kubectl runs any `kubectl-reprise` executable on the PATH as `kubectl reprise`. The plugin talks to the API
server with the same client library and kubeconfig rules as the operator, and reads Kafka with the
operator's own admin and planning code, so what it shows is what the operator decides.
"""
