"""The values `make run NODE=real` installs the chart with (local_platform.chart_release) pass the chart's strict
schema and give the operator what the real node needs: the node's network, the local API server's address, the
Kafka aliases, the dev image never pulled, and the webhook called by URL on loopback."""

from local_platform import chart_release

from .conftest import one


def test_the_real_nodes_values_render_the_operator_on_the_nodes_network(render):
    values = chart_release.values(
        api_port=26443, metrics_port=28080, webhook_port=28443, extra_env={"REPRISE_KAFKA_BOOTSTRAP_ALIASES": "x=y"}
    )
    docs = render(values)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    container = pod["containers"][0]
    assert container["image"] == "reprise:dev" and container["imagePullPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and env["KUBERNETES_SERVICE_PORT"] == "26443"
    assert env["REPRISE_KAFKA_BOOTSTRAP_ALIASES"] == "x=y"
    webhook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]
    assert webhook["url"].startswith("https://127.0.0.1:28443")
