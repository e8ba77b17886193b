# man/local.mk: the man pages, mdoc, installed by make install and linted by tests/tools/man-t.sh.
# SPDX-License-Identifier: MIT

# The programs' pages: installed under the programs' names, so --program-prefix,
# --program-suffix and --program-transform-name rename them with their programs.
dist_man_MANS += \
	man/pactl.1 \
	man/paged-demo.1 \
	man/paged-bench.1 \
	man/pagedd.8

# The library's, the configuration's and the concepts' pages keep their names whatever the
# programs are called (automake's notrans_).
notrans_dist_man_MANS = \
	man/libpaged.3 \
	man/paged_client_connect.3 \
	man/paged_pool_create.3 \
	man/paged_arena_base.3 \
	man/paged_prep.3 \
	man/paged_decode.3 \
	man/paged_seq_create.3 \
	man/paged_stats.3 \
	man/paged_pool_stats.3 \
	man/paged_prefix_pin.3 \
	man/paged_events_open.3 \
	man/paged_stream_wait.3 \
	man/paged_strerror.3 \
	man/paged.conf.5 \
	man/paged.7

# One-line .so pages, so that every function of a family finds its page. Their requests name
# man3/PAGE, as installed; the links man/man1 ... man/man8 to man/ itself make them resolve in
# a checkout too (`man -l paged_append.3` in man/, `man -M man paged_append` at the top). The
# links are not distributed: the tarball's tar follows links, and these make a loop.
notrans_dist_man_MANS += \
	man/paged_alloc.3 \
	man/paged_append.3 \
	man/paged_arena_alloc.3 \
	man/paged_arena_mark.3 \
	man/paged_arena_release.3 \
	man/paged_client_backend.3 \
	man/paged_client_device.3 \
	man/paged_client_devices.3 \
	man/paged_client_close.3 \
	man/paged_client_connect_err.3 \
	man/paged_client_error.3 \
	man/paged_client_fd.3 \
	man/paged_client_id.3 \
	man/paged_copy.3 \
	man/paged_copy_to.3 \
	man/paged_dtype_name.3 \
	man/paged_dtype_size.3 \
	man/paged_events_close.3 \
	man/paged_events_error.3 \
	man/paged_events_fd.3 \
	man/paged_events_next.3 \
	man/paged_field_name.3 \
	man/paged_fork.3 \
	man/paged_free.3 \
	man/paged_hash_blocks.3 \
	man/paged_inflight.3 \
	man/paged_lookup.3 \
	man/paged_nop.3 \
	man/paged_op_name.3 \
	man/paged_pool_attach.3 \
	man/paged_pool_attach_shard.3 \
	man/paged_pool_destroy.3 \
	man/paged_pool_detach.3 \
	man/paged_pool_get_info.3 \
	man/paged_pool_map.3 \
	man/paged_pool_set_ttl.3 \
	man/paged_prefill.3 \
	man/paged_prefix_evict.3 \
	man/paged_prefix_stats.3 \
	man/paged_prefix_unpin.3 \
	man/paged_publish.3 \
	man/paged_reap.3 \
	man/paged_seq_adopt_prefix.3 \
	man/paged_seq_blocks.3 \
	man/paged_seq_destroy.3 \
	man/paged_seq_extend.3 \
	man/paged_seq_fork.3 \
	man/paged_seq_len.3 \
	man/paged_seq_publish.3 \
	man/paged_stream_signal.3 \
	man/paged_submit.3 \
	man/paged_version.3 \
	man/paged_wait.3