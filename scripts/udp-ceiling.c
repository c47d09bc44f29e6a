/* What kernel UDP alone carries between two hosts, the ceiling softrdma's UDP backend runs under
 * (scripts/vm-bench.sh runs it between the VMs beside rxe and softrdma): the sender sends datagrams
 * of one RoCE packet's size (1,044 B: path MTU 1024 plus BTH, RETH and ICRC) as fast as the kernel
 * takes them, 62 per sendto through UDP GSO, as softrdma's sender batches a 64 KiB message; the
 * receiver only counts the bytes (UDP GRO, one recv per coalesced run). No ICRC, no copy into
 * registered memory, no acknowledgements: nothing softrdma or rxe must do on top.
 *
 * With `icrc` at both ends it is the floor of any user-space RoCE stack that verifies ICRCs instead:
 * the sender computes a CRC-32 over each datagram (the ICRC's polynomial, table-driven: under QEMU's
 * TCG a table beats pclmulqdq 1.7x) and stores it in the last 4 bytes; the receiver computes it
 * again, compares, and copies each datagram's 1,024-byte payload into a 64 MiB region, as a RoCE
 * receiver places a WRITE. Still no acknowledgements, headers, PSNs or completions.
 *
 *   udp-ceiling recv [icrc] PORT               prints "received R MB/s" after 1 s without a datagram
 *                                              (exits 1 if none came within 60 s)
 *   udp-ceiling send [icrc] PORT SECONDS ADDR  prints "offered R MB/s"
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

enum { DATAGRAM = 1044, PER_SEND = 62, PAYLOAD = 1024, HEADERS = DATAGRAM - PAYLOAD - 4 };

/* CRC-32 (reflected 0xEDB88320), 16 bytes per step through 16 tables. */
static unsigned table[16][256];

static void crc_init(void) {
    for (unsigned i = 0; i < 256; i++) {
        unsigned c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        table[0][i] = c;
    }
    for (int t = 1; t < 16; t++)
        for (unsigned i = 0; i < 256; i++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static unsigned crc32(const unsigned char *p, size_t n) {
    unsigned c = 0xffffffffu;
    for (; n >= 16; p += 16, n -= 16) {
        unsigned w;
        memcpy(&w, p, 4);
        c ^= w;
        c = table[15][c & 0xff] ^ table[14][(c >> 8) & 0xff] ^ table[13][(c >> 16) & 0xff] ^ table[12][c >> 24] ^
            table[11][p[4]] ^ table[10][p[5]] ^ table[9][p[6]] ^ table[8][p[7]] ^ table[7][p[8]] ^
            table[6][p[9]] ^ table[5][p[10]] ^ table[4][p[11]] ^ table[3][p[12]] ^ table[2][p[13]] ^
            table[1][p[14]] ^ table[0][p[15]];
    }
    while (n--) c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

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
    crc_init();
    if (crc32((const unsigned char *)"123456789", 9) != 0xCBF43926u) {
        fprintf(stderr, "udp-ceiling: CRC-32 self-check failed\n");
        return 2;
    }
    int icrc = argc >= 3 && !strcmp(argv[2], "icrc");
    if (icrc) {
        argv[2] = argv[1];
        argv++;
        argc--;
    }
    if (argc == 3 && !strcmp(argv[1], "recv")) {
        static unsigned char mr[64 << 20];
        size_t placed = 0;
        long long bad = 0;
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
            for (ssize_t off = 0; icrc && off + DATAGRAM <= n; off += DATAGRAM) {
                unsigned want;
                memcpy(&want, buf + off + DATAGRAM - 4, 4);
                if (crc32((const unsigned char *)buf + off, DATAGRAM - 4) != want) bad++;
                memcpy(mr + placed, buf + off + HEADERS, PAYLOAD);
                placed = (placed + PAYLOAD) % sizeof mr;
            }
            last = now();
        }
        if (last <= first) {
            fprintf(stderr, "udp-ceiling: one datagram run only: no rate\n");
            return 1;
        }
        printf("udp-ceiling: received %.2f MB/s (%lld bytes in %.2f s)", bytes / (last - first) / 1e6, bytes,
               last - first);
        if (icrc) printf(", ICRC checked and payload copied, %lld bad", bad);
        printf("\n");
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
            for (int d = 0; icrc && d < PER_SEND; d++) {
                unsigned char *g = (unsigned char *)buf + (size_t)d * DATAGRAM;
                unsigned c = crc32(g, DATAGRAM - 4);
                memcpy(g + DATAGRAM - 4, &c, 4);
            }
            ssize_t n = sendto(s, buf, (size_t)DATAGRAM * PER_SEND, 0, (struct sockaddr *)&a, sizeof a);
            if (n > 0) bytes += n;
        }
        printf("udp-ceiling: offered %.2f MB/s\n", bytes / (now() - start) / 1e6);
        return 0;
    }
    fprintf(stderr, "usage: udp-ceiling recv [icrc] PORT | udp-ceiling send [icrc] PORT SECONDS ADDR\n");
    return 2;
}
