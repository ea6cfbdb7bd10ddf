package io.reprise.kafka.replay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/** The Python worker's metric names, served with /healthz and /readyz by the JDK's HTTP server. */
class ReplayMetricsTest {

    @Test
    void theEndpointServesMetricsAndHealth() throws Exception {
        ReplayMetrics metrics = new ReplayMetrics("ns/fix/1", "pod-1");
        metrics.consumed.inc(7);
        metrics.partition("orders", 2, 40L, 100L, "replaying");
        try (ReplayMetrics.Endpoint endpoint = new ReplayMetrics.Endpoint(0, metrics, () -> false)) {
            HttpClient http = HttpClient.newHttpClient();
            String base = "http://127.0.0.1:" + endpoint.port();
            HttpResponse<String> scraped = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, scraped.statusCode());
            String body = scraped.body();
            assertTrue(
                    body.contains("reprise_worker_records_consumed_total{replay=\"ns/fix/1\",member=\"pod-1\"} 7.0"),
                    body);
            assertTrue(
                    body.contains(
                            "reprise_worker_partition_lag{replay=\"ns/fix/1\",member=\"pod-1\",topic=\"orders\",partition=\"2\"} 60.0"),
                    body);
            assertTrue(
                    body.contains(
                            "reprise_worker_partition_state{replay=\"ns/fix/1\",member=\"pod-1\",topic=\"orders\",partition=\"2\"} 0.0"),
                    body);
            assertEquals(
                    200,
                    http.send(
                                    HttpRequest.newBuilder(URI.create(base + "/healthz"))
                                            .build(),
                                    HttpResponse.BodyHandlers.ofString())
                            .statusCode());
            assertEquals(
                    503,
                    http.send(
                                    HttpRequest.newBuilder(URI.create(base + "/readyz"))
                                            .build(),
                                    HttpResponse.BodyHandlers.ofString())
                            .statusCode());
        }
        metrics.forget("orders", 2);
        assertFalse(metrics.render().contains("partition=\"2\""));
    }
}
