/* What kernel UDP alone carries between two hosts, the ceiling softrdma's UDP backend runs under
 * (scripts/vm-bench.sh runs it between the VMs beside rxe and softrdma): the sender sends datagrams
 * of one RoCE packet's size (1,044 B: path MTU 1024 plus BTH, RETH and ICRC) as fast as the kernel
 * takes them, 62 per sendto through UDP GSO, as softrdma's sender batches a 64 KiB message; the
 * receiver only counts the bytes (UDP GRO, one recv per coalesced run). No ICRC, no copy into
 * registered memory, no acknowledgements: nothing softrdma or rxe must do on top.
 *
 *   udp-ceiling recv PORT               prints "received R MB/s" after 1 s without a datagram
 *                                       (exits 1 if none came within 60 s)
 *   udp-ceiling send PORT SECONDS ADDR  prints "offered R MB/s"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

enum { DATAGRAM = 1044, PER_SEND = 62 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int fail(const char *what) {
    perror(what);
    return 1;
}

/* A whole decimal number in [lo, hi] from `arg`, or -1 with the reason printed. */
static long number(const char *what, const char *arg, long lo, long hi) {
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "udp-ceiling: %s must be a number from %ld to %ld, not \"%s\"\n", what, lo, hi, arg);
        return -1;
    }
    return v;
}

int main(int argc, char **argv) {
    static char buf[65536];
    int one = 1, bufsize = 4 << 20;
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (argc == 3 && !strcmp(argv[1], "recv")) {
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        struct timeval wait = {60, 0}, idle = {1, 0};
        long port = number("PORT", argv[2], 1, 65535);
        if (port < 0) return 2;
        a.sin_port = htons((unsigned short)port);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0) return fail("udp-ceiling: bind");
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
        if (setsockopt(s, IPPROTO_UDP, UDP_GRO, &one, sizeof one) < 0) return fail("udp-ceiling: UDP_GRO");
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
        long long bytes = 0;
        double first = 0, last = 0;
        for (;;) {
            ssize_t n = recv(s, buf, sizeof buf, 0);
            if (n < 0 && first == 0) {
                fprintf(stderr, "udp-ceiling: nothing received in %ld s\n", (long)wait.tv_sec);
                return 1;
            }
            if (n < 0) break;
            if (first == 0) {
                setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
                first = now();
            }
            bytes += n;
            last = now();
        }
        if (last <= first) {
            fprintf(stderr, "udp-ceiling: one datagram run only: no rate\n");
            return 1;
        }
        printf("udp-ceiling: received %.2f MB/s (%lld bytes in %.2f s)\n", bytes / (last - first) / 1e6,
               bytes, last - first);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "send")) {
        int s = socket(AF_INET, SOCK_DGRAM, 0), seg = DATAGRAM;
        long port = number("PORT", argv[2], 1, 65535), seconds = number("SECONDS", argv[3], 1, 3600);
        double start;
        long long bytes = 0;
        if (port < 0 || seconds < 0) return 2;
        a.sin_port = htons((unsigned short)port);
        if (inet_pton(AF_INET, argv[4], &a.sin_addr) != 1) {
            fprintf(stderr, "udp-ceiling: ADDR must be an IPv4 address, not \"%s\"\n", argv[4]);
            return 2;
        }
        if (s < 0) return fail("udp-ceiling: socket");
        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
        if (setsockopt(s, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof seg) < 0) return fail("udp-ceiling: UDP_SEGMENT");
        memset(buf, 0x5a, sizeof buf);
        for (start = now(); now() - start < seconds;) {
            ssize_t n = sendto(s, buf, (size_t)DATAGRAM * PER_SEND, 0, (struct sockaddr *)&a, sizeof a);
            if (n > 0) bytes += n;
        }
        printf("udp-ceiling: offered %.2f MB/s\n", bytes / (now() - start) / 1e6);
        return 0;
    }
    fprintf(stderr, "usage: udp-ceiling recv PORT | udp-ceiling send PORT SECONDS ADDR\n");
    return 2;
}
