/* key.c: the peers' shared key: the file's checks (owner, mode, size) and its hash. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/peer/internal.h"

#define KEY_FILE_MIN 16
#define KEY_FILE_MAX 4096

/* Sets *cause to "peer-key PATH: why" (formatted). Returns -1. */
__attribute__((format(printf, 3, 4)))
static int refuse(char **cause, const char *path, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (asprintf(cause, "peer-key %s: %s", path, why) < 0)
        *cause = NULL;
    return -1;
}

/* Reads and checks the key file; returns 0 with key filled, or -1 with *cause. */
int pd_peer_key_load(const char *path, uint8_t key[PD_PEER_KEY_BYTES], char **cause)
{
    if (path[0] == '\0')
        return refuse(cause, "(none)", "peers need a key file: set peer-key");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return refuse(cause, path, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        return refuse(cause, path, "%s", strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(cause, path, "not a regular file");
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return refuse(cause, path, "owned by uid %u, not the daemon's uid %u", (unsigned) st.st_uid,
                      (unsigned) geteuid());
    }
    if ((st.st_mode & 077) != 0) {
        close(fd);
        return refuse(cause, path, "mode %04o lets group or others at it: chmod 600 it",
                      (unsigned) (st.st_mode & 07777));
    }
    unsigned char buf[KEY_FILE_MAX];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = read(fd, buf + got, sizeof buf - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            close(fd);
            return refuse(cause, path, "%s", strerror(err));
        }
        if (r == 0)
            break;
        got += (size_t) r;
    }
    close(fd);
    if (got < KEY_FILE_MIN)
        return refuse(cause, path, "holds %zu bytes, fewer than %d", got, KEY_FILE_MIN);
    crypto_generichash(key, PD_PEER_KEY_BYTES, buf, got, NULL, 0);
    sodium_memzero(buf, sizeof buf);
    return 0;
}
