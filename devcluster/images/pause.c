/* The node tier's sandbox ("pause") image's one program: hold the pod's namespaces,
 * reap orphans, exit on TERM or INT. Statically linked; the images build compiles it. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction stop = {.sa_handler = leave}, child = {.sa_handler = reap};
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    child.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &child, NULL);
    for (;;) pause();
    return 0;
}
