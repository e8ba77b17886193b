/* pactl-devices-t.c: pactl devices, status and the pools' devices against a daemon of two cpu devices. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tjson.h"
#include "tests/tools/tpactl.h"

/* The daemon, serving two simulated devices (PAGEDD_CPU_DEVICES). */
static struct pagedd daemon_;

/* The bytes of a holder's pool: 1 layer x K,V x 64 blocks x 2 heads x 16 tokens x 64 dims x 2 bytes. */
#define POOL_BYTES (1 * 2 * 64 * 2 * 16 * 64 * 2)

/* Starts a holder of one block of pool (made with shards shards, "0" for none, on device
 * device), its data arena on that device; bails if it does not get ready. Returns it. */
static struct tp_child start_on(const char *name, const char *pool, const char *shards, const char *device)
{
    char line[256] = "";
    char *const argv[] = { tp_holder, daemon_.socket, (char *) name, (char *) pool, "1", "0", "0600",
                           (char *) shards, (char *) device, NULL };
    struct tp_child h = tp_spawn(argv);
    if (tp_read_line(h.out, line, sizeof line, TP_READY_MS) < 0 || strncmp(line, "ready ", 6) != 0)
        bail("holder of pool %s on device %s: %s", pool, device, line);
    return h;
}

/* Runs pactl with up to three arguments after -s SOCKET and returns its output parsed as
 * JSON after -f json, or NULL (free it with tj_free). */
static struct tj *pactl_json(const char *a0, const char *a1, const char *a2)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", a0, a1, a2, NULL);
    struct tj *v = r.status == 0 ? tp_run_json(&r) : NULL;
    tp_run_free(&r);
    return v;
}

/* Returns the object of pool name in a "list pools" JSON document, or NULL. */
static const struct tj *find_pool(const struct tj *list, const char *name)
{
    const struct tj *pools = tj_get(list, "pools");
    for (size_t i = 0; pools != NULL && i < pools->count; i++)
        if (tj_str(tj_at(pools, i), "name") != NULL && strcmp(tj_str(tj_at(pools, i), "name"), name) == 0)
            return tj_at(pools, i);
    return NULL;
}

/* Copies the last column (DEV) of pool name's row in a "list pools" table into dev (size
 * bytes); returns 1, or 0 when there is no such row. */
static int pool_dev(const char *out, const char *name, char *dev, size_t size)
{
    char key[64];
    snprintf(key, sizeof key, "  %s ", name);
    const char *at = strstr(out, key);
    if (at == NULL)
        return 0;
    size_t len = strcspn(at, "\n");
    const char *last = at + len;
    while (last > at && last[-1] != ' ')
        last--;
    snprintf(dev, size, "%.*s", (int) (at + len - last), last);
    return 1;
}

/* Checks status's device count, in both formats. Returns nothing. */
static void test_status(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "status", NULL);
    ok(r.status == 0 && strstr(r.out, "\ndevices        2\n") != NULL, "status text: devices 2");
    tp_run_free(&r);
    struct tj *v = pactl_json("status", NULL, NULL);
    is_int(2, (long long) tj_num(v, "devices"), "status json: devices 2");
    tj_free(v);
}

/* Checks devices before any pool: two rows in text, two objects in JSON. Returns nothing. */
static void test_devices_empty(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "devices", NULL);
    is_int(0, r.status, "devices: exit 0");
    size_t lines = 0;
    for (const char *c = r.out; *c != '\0'; c++)
        lines += *c == '\n';
    ok(lines == 3 && strncmp(r.out, " DEV CUDA  NAME ", 16) == 0, "devices text: a heading and two rows (%zu lines)",
       lines);
    ok(strstr(r.out, "\n   0    -  ") != NULL && strstr(r.out, "\n   1    -  ") != NULL,
       "devices text: rows 0 and 1, no CUDA ordinal on cpu");
    ok(strstr(r.out, " POOLS   POOL MEM       FREE CLIENTS  HEALTH\n") != NULL, "devices text: the columns");
    ok(strstr(r.out, "     0        0 B          -       0  ok\n") != NULL,
       "devices text: no pools, 0 B, FREE '-' on cpu, no clients");
    ok(strstr(r.out, "  ok\n   1 ") != NULL && r.out_len > 3 && strcmp(r.out + r.out_len - 3, "ok\n") == 0,
       "devices text: both healthy");
    tp_run_free(&r);

    struct tj *v = pactl_json("devices", NULL, NULL);
    const struct tj *devs = tj_get(v, "devices");
    ok(devs != NULL && devs->type == TJ_ARRAY && devs->count == 2, "devices json: an array of two");
    for (size_t i = 0; i < 2; i++) {
        const struct tj *d = tj_at(devs, i);
        ok(tj_num(d, "index") == (double) i && tj_num(d, "ordinal") == -1 && tj_get(d, "uuid") != NULL
               && tj_get(d, "uuid")->type == TJ_NULL && tj_get(d, "mem_free") != NULL
               && tj_get(d, "mem_free")->type == TJ_NULL,
           "devices json: device %zu: index %zu, ordinal -1, uuid and mem_free null", i, i);
        ok(tj_num(d, "pools") == 0 && tj_num(d, "pool_bytes") == 0 && tj_get(d, "healthy") != NULL
               && tj_get(d, "healthy")->boolean && tj_str(d, "health") != NULL
               && strcmp(tj_str(d, "health"), "ok") == 0 && tj_str(d, "name") != NULL,
           "devices json: device %zu: no pools, healthy, named", i);
    }
    tj_free(v);
}

/* Checks a pool on device 1 and a sharded pool from device 1: list pools' DEV column and JSON,
 * info, and the devices' pools. Returns nothing. */
static void test_pools(void)
{
    struct tp_child one = start_on("on-one", "one", "0", "1");
    struct tp_child zero = start_on("on-zero", "zero", "0", "0");
    struct tp_child tp = start_on("tp-one", "tp", "2", "1");
    struct tp_run r;
    char dev[32] = "";

    tp_run_pactl(&r, "-s", daemon_.socket, "list", "pools", NULL);
    ok(r.status == 0 && strstr(r.out, "  SIZE  DEV\n") != NULL, "list pools text: a DEV column after SIZE");
    ok(pool_dev(r.out, "one", dev, sizeof dev) && strcmp(dev, "1") == 0, "list pools text: pool one on device 1 "
       "('%s')", dev);
    ok(pool_dev(r.out, "zero", dev, sizeof dev) && strcmp(dev, "0") == 0, "list pools text: pool zero on device 0 "
       "('%s')", dev);
    ok(pool_dev(r.out, "tp", dev, sizeof dev) && strcmp(dev, "1,0") == 0, "list pools text: the sharded pool's "
       "shards on devices 1 and 0 ('%s')", dev);
    tp_run_free(&r);

    struct tj *v = pactl_json("list", "pools", NULL);
    const struct tj *p = find_pool(v, "one");
    const struct tj *devs = tj_get(p, "devices");
    ok(tj_num(p, "device") == 1 && devs != NULL && devs->count == 1 && tj_at(devs, 0)->number == 1,
       "list pools json: pool one: device 1, devices [1]");
    p = find_pool(v, "tp");
    devs = tj_get(p, "devices");
    ok(tj_num(p, "device") == 1 && devs != NULL && devs->count == 2 && tj_at(devs, 0)->number == 1
           && tj_at(devs, 1)->number == 0, "list pools json: pool tp: device 1, devices [1, 0]");
    tj_free(v);

    tp_run_pactl(&r, "-s", daemon_.socket, "info", "one", NULL);
    ok(r.status == 0 && strstr(r.out, "\ndevice         1\n") != NULL, "info text: pool one's device 1");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "info", "tp", NULL);
    ok(r.status == 0 && strstr(r.out, "\ndevices        1,0: one per shard, in shard order\n") != NULL,
       "info text: the sharded pool's devices 1,0");
    tp_run_free(&r);
    v = pactl_json("info", "one", NULL);
    is_int(1, (long long) tj_num(v, "device"), "info json: device 1");
    tj_free(v);

    /* Device 0: pool zero and shard 1 of tp; device 1: pool one and shard 0 of tp. */
    v = pactl_json("devices", NULL, NULL);
    const struct tj *d0 = tj_at(tj_get(v, "devices"), 0), *d1 = tj_at(tj_get(v, "devices"), 1);
    ok(tj_num(d0, "pools") == 2 && tj_num(d1, "pools") == 2, "devices json: two pools or shards on each device "
       "(%g, %g)", tj_num(d0, "pools"), tj_num(d1, "pools"));
    is_int(POOL_BYTES + POOL_BYTES / 2, (long long) tj_num(d1, "pool_bytes"),
           "devices json: device 1 holds pool one and half of tp");
    ok(tj_num(d0, "clients") == 1 && tj_num(d1, "clients") == 2, "devices json: one holder's arena on device 0, "
       "two on 1 (%g, %g)", tj_num(d0, "clients"), tj_num(d1, "clients"));
    tj_free(v);
    tp_run_pactl(&r, "-s", daemon_.socket, "devices", NULL);
    ok(r.status == 0 && strstr(r.out, "     2  768.0 KiB          -       2  ok\n") != NULL,
       "devices text: device 1's pools, memory and clients");
    tp_run_free(&r);

    is_int(0, tp_stop_holder(&tp), "the sharded pool's holder exits 0");
    is_int(0, tp_stop_holder(&zero), "pool zero's holder exits 0");
    is_int(0, tp_stop_holder(&one), "pool one's holder exits 0");
}

/* Runs the checks against one daemon of two cpu devices. */
int main(void)
{
    tp_init(&daemon_);
    /* The cpu backend whatever $PAGED_TEST_BACKEND says, with two devices (the daemon inherits
     * the environment). */
    if (setenv("PAGEDD_CPU_DEVICES", "2", 1) != 0)
        sysbail("setenv");
    const char *const args[] = { "--backend", "cpu", "--threads", "2", "--log-level", "warning", NULL };
    tp_start_daemon(&daemon_, args);

    test_status();
    test_devices_empty();
    test_pools();

    tp_stop_daemon(&daemon_);
    return 0;
}
