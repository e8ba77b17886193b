/* main.c: pagedd, the paged daemon: options, configuration, daemonizing, readiness, serving. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/util/knobs.h"
#include "daemon/settings.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "daemon/notify.h"
#include "daemon/server.h"
#include "lib/core/sock.h"
#include "paths.h"

#define DEFAULT_CONFIG PAGED_SYSCONFDIR "/paged.conf"

/* getopt_long's value for --check-config, apart from every key's (1000 up) and letter. */
#define OPT_CHECK_CONFIG 2

/* The command line's settings, kept to apply over the file again on every reload. */
struct overrides {
    int n;
    const char *key[64];
    const char *value[64];
    int check_config;              /* --check-config: print the settings and exit */
};

/* Prints usage to f; returns nothing. */
static void usage(FILE *f)
{
    int n;
    const struct pd_config_key *keys = pd_config_keys(&n);
    fprintf(f, "Usage: pagedd [OPTION]...\n"
               "The paged daemon: a shared KV-cache manager with an attention service.\n\n");
    for (int i = 0; i < n; i++) {
        char lhs[64], shortform[8] = "    ";
        if (keys[i].short_opt)
            snprintf(shortform, sizeof shortform, "-%c, ", keys[i].short_opt);
        snprintf(lhs, sizeof lhs, "%s--%s%s%s", shortform, keys[i].name, keys[i].has_arg ? "=" : "",
                 keys[i].has_arg ? keys[i].arg_name : "");
        fprintf(f, "  %-36s %s\n", lhs, keys[i].help);
    }
    fprintf(f, "  %-36s %s\n  %-36s %s\n  %-36s %s\n\n", "    --check-config",
            "read the configuration, print the settings in effect and exit", "-h, --help",
            "print this help and exit", "-V, --version", "print the version and exit");
    fprintf(f, "Every option is also a key of the configuration file (key = value), except\n"
               "config, ready-fd, check-config, help and version. Command-line options win over\n"
               "the file.\n"
               "FILES: %s\n", DEFAULT_CONFIG);
}

/* Makes a relative path absolute against the current directory, in place; returns 0 or -1
 * when it does not fit. The daemon changes to / once detached. */
static int absolutize(char *path, size_t size)
{
    if (path[0] == '\0' || path[0] == '/')
        return 0;
    char cwd[PD_PATH_MAX], out[PD_PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL)
        return -1;
    int n = snprintf(out, sizeof out, "%s/%s", cwd, path);
    if (n < 0 || (size_t) n >= size)
        return -1;
    memcpy(path, out, (size_t) n + 1);
    return 0;
}

/* Builds the configuration: defaults, then the file, then the command line. The reload
 * function of the server. Returns 0 or -1 with *cause. */
static int load_config(void *ctx, struct pd_config *cfg, char **cause)
{
    const struct overrides *ov = ctx;
    pd_config_defaults(cfg, DEFAULT_CONFIG);
    /* The command line may name the file: find it first. */
    for (int i = 0; i < ov->n; i++)
        if (strcmp(ov->key[i], "config") == 0 && pd_config_set(cfg, "config", ov->value[i], 0, cause) < 0)
            return -1;
    if (pd_config_load_file(cfg, cfg->config, cfg->config_explicit, cause) < 0)
        return -1;
    for (int i = 0; i < ov->n; i++)
        if (pd_config_set(cfg, ov->key[i], ov->value[i], 0, cause) < 0)
            return -1;
    if (cfg->socket[0] == '\0' && pcore_sock_default_path(cfg->socket, sizeof cfg->socket) < 0) {
        *cause = strdup("the default socket path is too long: set --socket");
        return -1;
    }
    if (absolutize(cfg->socket, sizeof cfg->socket) < 0 || absolutize(cfg->pid_file, sizeof cfg->pid_file) < 0
        || absolutize(cfg->config, sizeof cfg->config) < 0 || absolutize(cfg->log_file, sizeof cfg->log_file) < 0) {
        *cause = strdup("a path is too long once made absolute");
        return -1;
    }
    return 0;
}

/* Returns a path option's value made absolute against the directory pagedd started in, since
 * a reload reads the command line again from /; other values, and a path too long, as given. */
static const char *absolute_arg(const char *key, const char *value)
{
    static const char *const paths[] = { "socket", "config", "pid-file", "log-file" };
    char buf[PD_PATH_MAX];
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(key, paths[i]) == 0 && snprintf(buf, sizeof buf, "%s", value) < (int) sizeof buf
            && absolutize(buf, sizeof buf) == 0) {
            char *copy = strdup(buf);
            return copy != NULL ? copy : value;
        }
    return value;
}

/* Parses the command line into overrides; exits for --help, --version and bad options.
 * Returns nothing. */
static void parse_args(int argc, char **argv, struct overrides *ov)
{
    int n;
    const struct pd_config_key *keys = pd_config_keys(&n);
    struct option longopts[64];
    char shortopts[128] = "+hV";
    size_t sl = strlen(shortopts);
    int k = 0;
    for (int i = 0; i < n && k < 59; i++) {
        longopts[k++] = (struct option) { keys[i].name, keys[i].has_arg ? required_argument : no_argument,
                                          NULL, 1000 + i };
        if (keys[i].short_opt && sl + 3 < sizeof shortopts) {
            shortopts[sl++] = (char) keys[i].short_opt;
            if (keys[i].has_arg)
                shortopts[sl++] = ':';
            shortopts[sl] = '\0';
        }
    }
    longopts[k++] = (struct option) { "help", no_argument, NULL, 'h' };
    longopts[k++] = (struct option) { "version", no_argument, NULL, 'V' };
    longopts[k++] = (struct option) { "check-config", no_argument, NULL, OPT_CHECK_CONFIG };
    longopts[k] = (struct option) { NULL, 0, NULL, 0 };
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int idx = -1;
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c == 'V') {
            printf("pagedd (paged) %s\nprotocol version %u\n", PACKAGE_VERSION, PCORE_PROTO_VERSION);
            exit(0);
        }
        if (c == OPT_CHECK_CONFIG) {
            ov->check_config = 1;
            continue;
        }
        if (c >= 1000 && c < 1000 + n)
            idx = c - 1000;
        else
            for (int i = 0; i < n; i++)
                if (keys[i].short_opt == c)
                    idx = i;
        if (idx < 0) {
            fprintf(stderr, "Try 'pagedd --help' for more information.\n");
            exit(2);
        }
        if (ov->n == 64) {
            fprintf(stderr, "pagedd: too many options\n");
            exit(2);
        }
        ov->key[ov->n] = keys[idx].name;
        ov->value[ov->n] = keys[idx].has_arg ? absolute_arg(keys[idx].name, optarg) : "yes";
        ov->n++;
    }
    if (optind < argc) {
        fprintf(stderr, "pagedd: unexpected argument '%s'\nTry 'pagedd --help' for more information.\n",
                argv[optind]);
        exit(2);
    }
}

/*
 * Detaches from the terminal: forks twice with a pipe between the original process and the
 * daemon. The original process waits on the pipe and exits 0 when the daemon reports it
 * serves, 1 with the daemon's message when it failed. Returns the pipe's write end in the
 * daemon; never returns in the original process.
 */
static int daemonize(void)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        fprintf(stderr, "pagedd: pipe: %s\n", strerror(errno));
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pagedd: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid > 0) {
        close(pfd[1]);
        char msg[1024];
        size_t got = 0;
        for (;;) {
            ssize_t r = read(pfd[0], msg + got, sizeof msg - 1 - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t) r;
            if (got == sizeof msg - 1)
                break;
        }
        waitpid(pid, NULL, 0);
        if (got > 0 && msg[0] == '\0')
            exit(0);
        msg[got] = '\0';
        fprintf(stderr, "pagedd: %s\n", got > 0 ? msg : "the daemon exited before it was ready");
        exit(1);
    }
    close(pfd[0]);
    if (setsid() < 0)
        _exit(1);
    pid = fork();
    if (pid < 0)
        _exit(1);
    if (pid > 0)
        _exit(0);
    if (chdir("/") < 0)
        _exit(1);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        close(null);
    }
    return pfd[1];
}

/* Reports the outcome of startup: to the waiting parent (msg NULL for success), the
 * --ready-fd, and systemd. Returns nothing. */
static void report_ready(int parent_fd, int ready_fd, const char *error)
{
    if (parent_fd >= 0) {
        if (error == NULL) {
            if (write(parent_fd, "", 1) < 0) {
                /* The parent is gone: nobody to tell. */
            }
        } else if (write(parent_fd, error, strlen(error)) < 0) {
            /* Likewise. */
        }
        close(parent_fd);
    }
    if (ready_fd >= 0) {
        if (error == NULL && write(ready_fd, "READY\n", 6) < 0) {
            /* The reader is gone. */
        }
        close(ready_fd);
    }
    if (error == NULL)
        pd_notify_ready();
}

/* Writes the pid file; returns 0 or -1 with *cause. */
static int write_pid_file(const char *path, char **cause)
{
    char tmp[PD_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long) getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%ld\n", (long) getpid()) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
        if (asprintf(cause, "cannot write pid file %s: %s", path, strerror(errno)) < 0)
            *cause = NULL;
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Opens the log file cfg names, or, when a daemon about to detach would log to syslog and
 * nothing listens on syslog's socket, says on stderr that its log would be lost (syslog may
 * come up later: glibc connects again at each line). Returns 0, or -1 after a message when
 * the file cannot be opened. */
static int open_log(const struct pd_config *cfg)
{
    if (cfg->log_file[0] != '\0') {
        if (pd_log_open_file(cfg->log_file) == 0)
            return 0;
        fprintf(stderr, "pagedd: cannot open the log file %s: %s\n", cfg->log_file, strerror(errno));
        return -1;
    }
    if (!cfg->foreground && !pd_log_syslog_reachable())
        fprintf(stderr, "pagedd: warning: no syslog socket (%s): once detached, the log is lost until a syslog "
                "daemon listens there; --log-file=FILE or --foreground keeps it\n", _PATH_LOG);
    return 0;
}

/* Prints the settings in effect as paged.conf lines, after a comment naming where they came
 * from, for --check-config. Returns the exit status: 0, or 1 when standard output failed. */
static int check_config(const struct pd_config *cfg)
{
    printf("# pagedd %s: the defaults, then %s%s, then the command line\n", PACKAGE_VERSION, cfg->config,
           access(cfg->config, F_OK) == 0 ? "" : " (absent)");
    if (pd_config_write(cfg, stdout) < 0) {
        fprintf(stderr, "pagedd: cannot write the settings: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* Runs the daemon; returns its exit status. */
int main(int argc, char **argv)
{
    static struct overrides ov;
    struct pd_config cfg;
    char *cause = NULL;
    pd_log_open("pagedd", 0);
    parse_args(argc, argv, &ov);
    if (load_config(&ov, &cfg, &cause) < 0) {
        fprintf(stderr, "pagedd: %s\n", cause != NULL ? cause : "bad configuration");
        free(cause);
        return 1;
    }
    /* The environment's knobs, once, before the backend and the engine read them. */
    if (pd_knobs_load(&cause) < 0) {
        fprintf(stderr, "pagedd: environment: %s\n", cause != NULL ? cause : "a knob is refused");
        free(cause);
        return 1;
    }
    if (ov.check_config)
        return check_config(&cfg);
    pd_log_set_level(cfg.log_level);
    if (open_log(&cfg) < 0)
        return 1;
    int parent_fd = -1;
    if (!cfg.foreground) {
        parent_fd = daemonize();
        if (cfg.log_file[0] == '\0')
            pd_log_open("pagedd", 1);
    }
    pd_knobs_log();
    struct pd_server *srv = pd_server_create(&cfg, load_config, &ov, &cause);
    if (srv == NULL || (cfg.pid_file[0] != '\0' && write_pid_file(cfg.pid_file, &cause) < 0)) {
        const char *msg = cause != NULL ? cause : "cannot start";
        if (cfg.foreground)
            fprintf(stderr, "pagedd: %s\n", msg);
        else
            pd_log(PD_LOG_ERROR, "%s", msg);
        report_ready(parent_fd, cfg.ready_fd, msg);
        pd_server_destroy(srv);
        free(cause);
        return 1;
    }
    pd_log(PD_LOG_INFO, "pagedd %s ready (pid %ld)", PACKAGE_VERSION, (long) getpid());
    report_ready(parent_fd, cfg.ready_fd, NULL);
    if (!cfg.foreground) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, STDERR_FILENO);
            close(null);
        }
    }
    /* A test aid: one allocation the clients' requests cause fails (heap.h). */
    const int armed = pd_heap_arm() != 0;
    pd_server_run(srv);
    if (armed)
        pd_log(PD_LOG_INFO, "%llu allocations counted (PAGEDD_FAIL_ALLOC_AT)", pd_heap_counted());
    if (cfg.pid_file[0] != '\0')
        unlink(cfg.pid_file);
    pd_server_destroy(srv);
    pd_log(PD_LOG_INFO, "stopped");
    pd_log_close();
    return 0;
}
