#!/bin/sh
# shards-devices-t.sh: shards-t with the cpu backend serving two devices (PAGEDD_CPU_DEVICES):
# the pool's shards on devices 0 and 1, each rank's client on its shard's device.
# SPDX-License-Identifier: MIT
PAGEDD_CPU_DEVICES=2
export PAGEDD_CPU_DEVICES
exec "${top_builddir:-.}/tests/client/shards-t"
