package io.reprise.kafka.topic;

/** The handover topic is missing, misconfigured or unreachable; the message says which and what to do. */
public class HandoverTopicException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public HandoverTopicException(String message) {
        super(message);
    }

    public HandoverTopicException(String message, Throwable cause) {
        super(message, cause);
    }
}
