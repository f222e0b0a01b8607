/* blackhole: a TCP port on 127.0.0.1 that takes connections and never says a word — a hung or black-holed server, for the tests of connect timeouts. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * Usage: blackhole SECONDS
 * Prints the port it listens on, then accepts connections and holds them
 * open without reading or writing, until SECONDS have passed (bounded: a
 * test that forgets it does not leave it behind for long).
 */
int main(int argc, char **argv)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int secs = argc > 1 ? atoi(argv[1]) : 0, held = 0;
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (secs <= 0 || secs > 3600) {
                fprintf(stderr, "usage: blackhole SECONDS (1..3600)\n");
                return 2;
        }
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64) ||
            getsockname(fd, (struct sockaddr *)&a, &len)) {
                perror("blackhole");
                return 1;
        }
        printf("%d\n", ntohs(a.sin_port));
        fflush(stdout);
        time_t end = time(NULL) + secs;
        while (time(NULL) < end) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 200) == 1 && held < 1000 && accept(fd, NULL, NULL) >= 0)
                        held++; /* kept open, never answered */
        }
        return 0;
}
