/* lanes-t.c: reading which transports a peer's endpoint uses out of UCX's description of it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "daemon/peer/internal.h"
#include "tests/tap/basic.h"

/* What UCX 1.13 prints for two daemons on one host connected over loopback. */
static const char tcp_only[] =
    "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
    "#                 lane[0]: cm rdmacm\n"
    "#                 lane[1]:  1:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup\n"
    "#                 lane[2]:  2:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] rma_bw#1\n"
    "#\n#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)\n";

/* Lanes of an InfiniBand host with GPUs: RDMA and cuda_ipc carry the gets. */
static const char rdma[] =
    "#                 lane[0]: cm rdmacm\n"
    "#                 lane[1]:  3:rc_mlx5/mlx5_0:1 md[2]     -> md[2]/ib/sysdev[0] rma_bw#0 am am_bw#0 wireup\n"
    "#                 lane[2]:  5:cuda_ipc/cuda md[4]        -> md[4]/cuda_ipc/sysdev[255] rma_bw#1\n"
    "#                 lane[3]:  3:rc_mlx5/mlx5_0:1 md[2]     -> md[2]/ib/sysdev[0] rma_bw#2\n";

/* Shared memory between processes of one host: AM over posix, gets over cma. */
static const char shm[] =
    "#                 lane[0]:  0:posix/memory md[0]      -> md[0]/posix/sysdev[255] am am_bw#0\n"
    "#                 lane[1]:  4:cma/memory md[3]        -> md[3]/cma/sysdev[255] rma_bw#0\n";

/* Only AM lanes, over TCP. */
static const char am_only[] = "#   lane[0]:  1:tcp/lo.0 md[1]  -> md[1]/tcp/sysdev[255] am am_bw#0 wireup\n";

/* Runs the cases. */
int main(void)
{
    plan(9);
    char out[96];
    is_int(1, pd_peer_parse_lanes(tcp_only, out, sizeof out), "loopback: only TCP");
    is_string("tcp/lo.0 tcp/eth0.0", out, "loopback: both TCP lanes that carry gets, the cm lane skipped");
    is_int(0, pd_peer_parse_lanes(rdma, out, sizeof out), "RDMA and cuda_ipc: not TCP only");
    is_string("rc_mlx5/mlx5_0:1 cuda_ipc/cuda", out, "RDMA and cuda_ipc: each once, in lane order");
    is_int(0, pd_peer_parse_lanes(shm, out, sizeof out), "shared memory: not TCP only");
    is_string("cma/memory", out, "shared memory: the lane that carries gets");
    is_int(1, pd_peer_parse_lanes(am_only, out, sizeof out), "no RMA lane: the AM lanes count, TCP");
    is_int(0, pd_peer_parse_lanes("# UCP endpoint\n#  lane[0]: cm rdmacm\n", out, sizeof out) + (out[0] != '\0'),
           "no data lane: nothing, and not TCP only");
    char small[12];
    pd_peer_parse_lanes(rdma, small, sizeof small);
    is_string("", small, "a name longer than the room is left out, never cut");
    return 0;
}
