/* The pod sandbox's process: holds the pod's namespaces open and does nothing else. Written for the real node
 * of the local platform, where registry.k8s.io (and its pause image) is not reachable. It exits 0 on SIGINT or
 * SIGTERM, reaps any child that ends up with it as PID 1, and otherwise sleeps in pause(). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &on_stop, NULL);
    sigaction(SIGTERM, &on_stop, NULL);
    sigaction(SIGCHLD, &on_child, NULL);
    for (;;) pause();
    return 0;
}
