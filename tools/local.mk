# tools/local.mk: what tools/ builds: the pagedd spawner, pactl, paged-demo, and the `make demo` target.
# SPDX-License-Identifier: MIT

# The pagedd spawner paged-bench, paged-demo and the tests (tests/tap/pagedd.c) share; its
# users link lib/core/libpagedcore.la after it.
noinst_LTLIBRARIES += tools/common/libspawn.la
tools_common_libspawn_la_SOURCES = tools/common/spawn.h tools/common/spawn.c

# pactl: the control utility. It speaks the control protocol (lib/core/proto.h) through
# lib/core/sock directly, as a control-only client, so it needs libpagedcore but not libpaged.
bin_PROGRAMS += tools/pactl
tools_pactl_SOURCES = \
	tools/pactl.h \
	tools/pactl.c \
	tools/pactl_conn.h \
	tools/pactl_conn.c \
	tools/pactl_fetch.h \
	tools/pactl_fetch.c \
	tools/pactl_fmt.h \
	tools/pactl_fmt.c \
	tools/pactl_items.h \
	tools/pactl_items.c \
	tools/pactl_json.h \
	tools/pactl_json.c \
	tools/pactl_pool.h \
	tools/pactl_pool.c \
	tools/pactl_cmd_status.c \
	tools/pactl_cmd_list.c \
	tools/pactl_cmd_info.c \
	tools/pactl_cmd_stat.c \
	tools/pactl_cmd_subscribe.c \
	tools/pactl_cmd_kill_client.c \
	tools/pactl_cmd_evict.c \
	tools/pactl_cmd_pin.c \
	tools/pactl_cmd_ttl.c \
	tools/pactl_cmd_peers.c \
	tools/pactl_cmd_devices.c \
	tools/pactl_prefix.h \
	tools/pactl_prefix.c \
	tools/pactl_cmd_destroy.c
tools_pactl_LDADD = lib/core/libpagedcore.la

# paged-demo: the first thing a new user runs. Its workers use the public API (libpaged)
# and the core's clock; the check against the CPU reference links the reference kernels.
bin_PROGRAMS += tools/paged-demo
tools_paged_demo_SOURCES = \
	tools/paged-demo.c \
	tools/demo/barrier.h \
	tools/demo/barrier.c \
	tools/demo/crew.h \
	tools/demo/crew.c \
	tools/demo/live.h \
	tools/demo/live.c \
	tools/demo/model.h \
	tools/demo/model.c \
	tools/demo/progress.h \
	tools/demo/progress.c \
	tools/demo/shadow.h \
	tools/demo/shadow.c \
	tools/demo/stage.h \
	tools/demo/stage.c \
	tools/demo/story.h \
	tools/demo/story.c \
	tools/demo/worker.h \
	tools/demo/worker.c
tools_paged_demo_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tools_paged_demo_LDADD = lib/libpaged.la kernels/libpagedcpu.la tools/common/libspawn.la \
	lib/core/libpagedcore.la
if HAVE_CUDA
# On the cuda backend the workers stage their tensors in device memory (tools/demo/stage.c),
# with the static runtime, so paged-demo still starts where there is no driver.
tools_paged_demo_LDADD += $(CUDA_LIBS)
endif

# `make demo`: the installed paged-demo, run from the build tree with the build tree's
# daemon and pactl.
demo: tools/paged-demo$(EXEEXT) daemon/pagedd$(EXEEXT) tools/pactl$(EXEEXT)
	$(AM_V_at)tools/paged-demo --pagedd $(abs_top_builddir)/daemon/pagedd \
	  --pactl $(abs_top_builddir)/tools/pactl
.PHONY: demo
