/* Ways a confined program has tried to reach a Unix socket outside its sandbox (the re-attack's
 * H3), each printed as one line: the spawn tests run it confined and check that none connects.
 *
 *   unix_escape socket  PATH   socket(AF_UNIX) + connect: the plain way (refused since the start)
 *   unix_escape uring   PATH   io_uring: IORING_OP_SOCKET + IORING_OP_CONNECT, unseen by seccomp
 *   unix_escape dgram   PATH   socketpair(AF_UNIX, SOCK_DGRAM) + sendto(PATH): no socket() at all
 *
 * On a connection it writes "hello\n" and prints what the peer answers ("REACHED <answer>"). */
#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un address(const char *path) {
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    strncpy(sun.sun_path, path, sizeof sun.sun_path - 1);
    return sun;
}

static int talk(int fd) {
    char answer[256];
    if (write(fd, "hello\n", 6) != 6) {
        printf("write failed: %s\n", strerror(errno));
        return 1;
    }
    ssize_t n = read(fd, answer, sizeof answer - 1);
    answer[n > 0 ? n : 0] = 0;
    printf("REACHED %s\n", answer);
    return 0;
}

static int ring_fd;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static int ring_setup(void) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    ring_fd = syscall(__NR_io_uring_setup, 4, &p);
    if (ring_fd < 0) return -errno;
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_CQ_RING);
    sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd,
                IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return -ENOMEM;
    sq_tail = (unsigned *)(sq + p.sq_off.tail);
    sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    sq_array = (unsigned *)(sq + p.sq_off.array);
    cq_head = (unsigned *)(cq + p.cq_off.head);
    cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

/* Submits one entry and waits for its completion; its result. */
static int ring_run(const struct io_uring_sqe *entry) {
    unsigned tail = *sq_tail, index = tail & *sq_mask;
    sqes[index] = *entry;
    sq_array[index] = index;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring_fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) return -errno;
    unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
    int result = cqes[head & *cq_mask].res;
    __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
    return result;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: unix_escape socket|uring|dgram PATH\n");
        return 2;
    }
    const char *mode = argv[1];
    struct sockaddr_un sun = address(argv[2]);
    if (strcmp(mode, "socket") == 0) {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) return printf("socket refused: %s\n", strerror(errno)), 0;
        if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) return printf("connect refused: %s\n", strerror(errno)), 0;
        return talk(fd);
    }
    if (strcmp(mode, "uring") == 0) {
        int ready = ring_setup();
        if (ready < 0) return printf("io_uring refused: %s\n", strerror(-ready)), 0;
        struct io_uring_sqe entry;
        memset(&entry, 0, sizeof entry);
        entry.opcode = IORING_OP_SOCKET;
        entry.fd = AF_UNIX;
        entry.off = SOCK_STREAM;
        int fd = ring_run(&entry);
        if (fd < 0) return printf("IORING_OP_SOCKET refused: %s\n", strerror(-fd)), 0;
        memset(&entry, 0, sizeof entry);
        entry.opcode = IORING_OP_CONNECT;
        entry.fd = fd;
        entry.addr = (uint64_t)(uintptr_t)&sun;
        entry.off = sizeof sun;
        int connected = ring_run(&entry);
        if (connected < 0) return printf("IORING_OP_CONNECT refused: %s\n", strerror(-connected)), 0;
        return talk(fd);
    }
    if (strcmp(mode, "dgram") == 0) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) < 0) return printf("socketpair refused: %s\n", strerror(errno)), 0;
        if (sendto(pair[0], "hello\n", 6, 0, (struct sockaddr *)&sun, sizeof sun) < 0)
            return printf("sendto refused: %s\n", strerror(errno)), 0;
        printf("REACHED sent\n");
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
