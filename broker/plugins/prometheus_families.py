# ruff: noqa: E501  (the HELP texts are RabbitMQ's, one family a line)
"""RabbitMQ 3.10.8's Prometheus metric families: name, TYPE and HELP as its rabbitmq_prometheus
plugin writes them (recorded by tests/data/prometheus/record.py from the live plugin), one family
a line: `<name> <type> <HELP text>`.

`AGGREGATED` are /metrics' and /metrics/per-object's families in their order (the few only one
of the two has are in `AGGREGATED_ONLY` and `PER_OBJECT_ONLY`); `DETAILED` are /metrics/detailed's
by `family=` value (each answer also has rabbitmq_build_info, rabbitmq_identity_info and the
telemetry_scrape_* summaries).
"""

from __future__ import annotations

Family = tuple[str, str, str]
"""(name as in `# TYPE`, type as in `# TYPE`, HELP text)."""


def _table(text: str) -> tuple[Family, ...]:
    rows = (line.split(" ", 2) for line in text.strip().splitlines())
    return tuple((name, typ, help_text) for name, typ, help_text in rows)


AGGREGATED: tuple[Family, ...] = _table(
    """
erlang_mnesia_held_locks gauge Number of held locks.
erlang_mnesia_lock_queue gauge Number of transactions waiting for a lock.
erlang_mnesia_transaction_participants gauge Number of participant transactions.
erlang_mnesia_transaction_coordinators gauge Number of coordinator transactions.
erlang_mnesia_failed_transactions counter Number of failed (i.e. aborted) transactions.
erlang_mnesia_committed_transactions counter Number of committed transactions.
erlang_mnesia_logged_transactions counter Number of transactions logged.
erlang_mnesia_restarted_transactions counter Total number of transaction restarts.
erlang_mnesia_memory_usage_bytes gauge Total number of bytes allocated by all mnesia tables
erlang_mnesia_tablewise_memory_usage_bytes gauge Number of bytes allocated per mnesia table
erlang_mnesia_tablewise_size gauge Number of rows present per table
process_start_time_seconds gauge Start time of the process since unix epoch in seconds.
rabbitmq_alarms_file_descriptor_limit untyped is 1 if file descriptor limit alarm is in effect
rabbitmq_alarms_free_disk_space_watermark untyped is 1 if free disk space watermark alarm is in effect
rabbitmq_alarms_memory_used_watermark untyped is 1 if VM memory watermark alarm is in effect
rabbitmq_connections_opened_total counter Total number of connections opened
rabbitmq_connections_closed_total counter Total number of connections closed or terminated
rabbitmq_channels_opened_total counter Total number of channels opened
rabbitmq_channels_closed_total counter Total number of channels closed
rabbitmq_queues_declared_total counter Total number of queues declared
rabbitmq_queues_created_total counter Total number of queues created
rabbitmq_queues_deleted_total counter Total number of queues deleted
rabbitmq_process_open_fds gauge Open file descriptors
rabbitmq_process_open_tcp_sockets gauge Open TCP sockets
rabbitmq_process_resident_memory_bytes gauge Memory used in bytes
rabbitmq_disk_space_available_bytes gauge Disk space available in bytes
rabbitmq_erlang_processes_used gauge Erlang processes used
rabbitmq_erlang_gc_runs_total counter Total number of Erlang garbage collector runs
rabbitmq_erlang_gc_reclaimed_bytes_total counter Total number of bytes of memory reclaimed by Erlang garbage collector
rabbitmq_erlang_scheduler_context_switches_total counter Total number of Erlang scheduler context switches
rabbitmq_process_max_fds gauge Open file descriptors limit
rabbitmq_process_max_tcp_sockets gauge Open TCP sockets limit
rabbitmq_resident_memory_limit_bytes gauge Memory high watermark in bytes
rabbitmq_disk_space_available_limit_bytes gauge Free disk space low watermark in bytes
rabbitmq_erlang_processes_limit gauge Erlang processes limit
rabbitmq_erlang_scheduler_run_queue gauge Erlang scheduler run queue
rabbitmq_erlang_net_ticktime_seconds gauge Inter-node heartbeat interval
rabbitmq_erlang_uptime_seconds gauge Node uptime
rabbitmq_io_read_ops_total counter Total number of I/O read operations
rabbitmq_io_read_bytes_total counter Total number of I/O bytes read
rabbitmq_io_write_ops_total counter Total number of I/O write operations
rabbitmq_io_write_bytes_total counter Total number of I/O bytes written
rabbitmq_io_sync_ops_total counter Total number of I/O sync operations
rabbitmq_io_seek_ops_total counter Total number of I/O seek operations
rabbitmq_io_reopen_ops_total counter Total number of times files have been reopened
rabbitmq_schema_db_ram_tx_total counter Total number of Schema DB memory transactions
rabbitmq_schema_db_disk_tx_total counter Total number of Schema DB disk transactions
rabbitmq_msg_store_read_total counter Total number of Message Store read operations
rabbitmq_msg_store_write_total counter Total number of Message Store write operations
rabbitmq_queue_index_read_ops_total counter Total number of Queue Index read operations
rabbitmq_queue_index_write_ops_total counter Total number of Queue Index write operations
rabbitmq_io_read_time_seconds_total counter Total I/O read time
rabbitmq_io_write_time_seconds_total counter Total I/O write time
rabbitmq_io_sync_time_seconds_total counter Total I/O sync time
rabbitmq_io_seek_time_seconds_total counter Total I/O seek time
rabbitmq_raft_term_total counter Current Raft term number
rabbitmq_raft_log_snapshot_index gauge Raft log snapshot index
rabbitmq_raft_log_last_applied_index gauge Raft log last applied index
rabbitmq_raft_log_commit_index gauge Raft log commit index
rabbitmq_raft_log_last_written_index gauge Raft log last written index
rabbitmq_raft_entry_commit_latency_seconds gauge Time taken for a log entry to be committed
rabbitmq_auth_attempts_total counter Total number of authorization attempts
rabbitmq_auth_attempts_succeeded_total counter Total number of successful authentication attempts
rabbitmq_auth_attempts_failed_total counter Total number of failed authentication attempts
rabbitmq_queue_messages_ready gauge Messages ready to be delivered to consumers
rabbitmq_queue_messages_unacked gauge Messages delivered to consumers but not yet acknowledged
rabbitmq_queue_messages gauge Sum of ready and unacknowledged messages - total queue depth
rabbitmq_queue_process_reductions_total counter Total number of queue process reductions
rabbitmq_queue_consumers gauge Consumers on a queue
rabbitmq_queue_consumer_capacity gauge Consumer capacity
rabbitmq_queue_consumer_utilisation gauge Same as consumer capacity
rabbitmq_queue_process_memory_bytes gauge Memory in bytes used by the Erlang queue process
rabbitmq_queue_messages_ram gauge Ready and unacknowledged messages stored in memory
rabbitmq_queue_messages_ram_bytes gauge Size of ready and unacknowledged messages stored in memory
rabbitmq_queue_messages_ready_ram gauge Ready messages stored in memory
rabbitmq_queue_messages_unacked_ram gauge Unacknowledged messages stored in memory
rabbitmq_queue_messages_persistent gauge Persistent messages
rabbitmq_queue_messages_persistent_bytes gauge Size in bytes of persistent messages
rabbitmq_queue_messages_bytes gauge Size in bytes of ready and unacknowledged messages
rabbitmq_queue_messages_ready_bytes gauge Size in bytes of ready messages
rabbitmq_queue_messages_unacked_bytes gauge Size in bytes of all unacknowledged messages
rabbitmq_queue_messages_paged_out gauge Messages paged out to disk
rabbitmq_queue_messages_paged_out_bytes gauge Size in bytes of messages paged out to disk
rabbitmq_queue_head_message_timestamp gauge Timestamp of the first message in the queue, if any
rabbitmq_queue_disk_reads_total counter Total number of times queue read messages from disk
rabbitmq_queue_disk_writes_total counter Total number of times queue wrote messages to disk
rabbitmq_channel_consumers gauge Consumers on a channel
rabbitmq_channel_messages_unacked gauge Delivered but not yet acknowledged messages
rabbitmq_channel_messages_unconfirmed gauge Published but not yet confirmed messages
rabbitmq_channel_messages_uncommitted gauge Messages received in a transaction but not yet committed
rabbitmq_channel_acks_uncommitted gauge Message acknowledgements in a transaction not yet committed
rabbitmq_consumer_prefetch gauge Limit of unacknowledged messages for each consumer
rabbitmq_channel_prefetch gauge Total limit of unacknowledged messages for all consumers on a channel
rabbitmq_channel_messages_published_total counter Total number of messages published into an exchange on a channel
rabbitmq_channel_messages_confirmed_total counter Total number of messages published into an exchange and confirmed on the channel
rabbitmq_channel_messages_unroutable_returned_total counter Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable
rabbitmq_channel_messages_unroutable_dropped_total counter Total number of messages published as non-mandatory into an exchange and dropped as unroutable
rabbitmq_channel_process_reductions_total counter Total number of channel process reductions
rabbitmq_channel_get_ack_total counter Total number of messages fetched with basic.get in manual acknowledgement mode
rabbitmq_channel_get_total counter Total number of messages fetched with basic.get in automatic acknowledgement mode
rabbitmq_channel_messages_delivered_ack_total counter Total number of messages delivered to consumers in manual acknowledgement mode
rabbitmq_channel_messages_delivered_total counter Total number of messages delivered to consumers in automatic acknowledgement mode
rabbitmq_channel_messages_redelivered_total counter Total number of messages redelivered to consumers
rabbitmq_channel_messages_acked_total counter Total number of messages acknowledged by consumers
rabbitmq_channel_get_empty_total counter Total number of times basic.get operations fetched no message
rabbitmq_connection_incoming_bytes_total counter Total number of bytes received on a connection
rabbitmq_connection_outgoing_bytes_total counter Total number of bytes sent on a connection
rabbitmq_connection_process_reductions_total counter Total number of connection process reductions
rabbitmq_connection_incoming_packets_total counter Total number of packets received on a connection
rabbitmq_connection_outgoing_packets_total counter Total number of packets sent on a connection
rabbitmq_connection_pending_packets gauge Number of packets waiting to be sent on a connection
rabbitmq_connection_channels gauge Channels on a connection
rabbitmq_queue_messages_published_total counter Total number of messages published to queues
rabbitmq_connections gauge Connections currently open
rabbitmq_channels gauge Channels currently open
rabbitmq_consumers gauge Consumers currently connected
rabbitmq_queues gauge Queues available
rabbitmq_build_info untyped RabbitMQ & Erlang/OTP version info
rabbitmq_identity_info untyped RabbitMQ node & cluster identity info
rabbitmq_global_messages_redelivered_total counter Total number of messages redelivered to consumers
rabbitmq_global_messages_received_total counter Total number of messages received from publishers
rabbitmq_global_messages_dead_lettered_maxlen_total counter Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx
rabbitmq_global_consumers gauge Current number of consumers
rabbitmq_global_stream_error_frame_too_large_total counter Total number of commands failed with frame too large
rabbitmq_global_stream_error_access_refused_total counter Total number of commands failed with access refused
rabbitmq_global_messages_delivered_consume_auto_ack_total counter Total number of messages delivered to consumers using basic.consume with automatic acknowledgment
rabbitmq_global_messages_dead_lettered_rejected_total counter Total number of messages dead-lettered due to basic.reject or basic.nack
rabbitmq_global_messages_acknowledged_total counter Total number of messages acknowledged by consumers
rabbitmq_global_messages_unroutable_dropped_total counter Total number of messages published as non-mandatory into an exchange and dropped as unroutable
rabbitmq_global_stream_error_precondition_failed_total counter Total number of commands failed with precondition failed
rabbitmq_global_messages_delivered_get_manual_ack_total counter Total number of messages delivered to consumers using basic.get with manual acknowledgment
rabbitmq_global_stream_error_unknown_frame_total counter Total number of commands failed with unknown frame
rabbitmq_global_stream_error_sasl_error_total counter Total number of commands failed with sasl error
rabbitmq_global_messages_unroutable_returned_total counter Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable
rabbitmq_global_messages_dead_lettered_confirmed_total counter Total number of messages dead-lettered and confirmed by target queues
rabbitmq_global_stream_error_sasl_challenge_total counter Total number of commands failed with sasl challenge
rabbitmq_global_messages_routed_total counter Total number of messages routed to queues or streams
rabbitmq_global_messages_delivered_get_auto_ack_total counter Total number of messages delivered to consumers using basic.get with automatic acknowledgment
rabbitmq_global_messages_delivered_consume_manual_ack_total counter Total number of messages delivered to consumers using basic.consume with manual acknowledgment
rabbitmq_global_messages_get_empty_total counter Total number of times basic.get operations fetched no message
rabbitmq_global_stream_error_subscription_id_does_not_exist_total counter Total number of commands failed with subscription id does not exist
rabbitmq_global_publishers gauge Current number of publishers
rabbitmq_global_stream_error_vhost_access_failure_total counter Total number of commands failed with vhost access failure
rabbitmq_global_stream_error_stream_does_not_exist_total counter Total number of commands rejected with stream does not exist error
rabbitmq_global_stream_error_sasl_authentication_failure_loopback_total counter Total number of commands failed with sasl authentication failure loopback
rabbitmq_global_messages_confirmed_total counter Total number of messages confirmed to publishers
rabbitmq_global_stream_error_stream_not_available_total counter Total number of commands failed with stream not available
rabbitmq_global_messages_dead_lettered_delivery_limit_total counter Total number of messages dead-lettered due to delivery-limit exceeded
rabbitmq_global_stream_error_authentication_failure_total counter Total number of commands failed with authentication failure
rabbitmq_global_stream_error_publisher_does_not_exist_total counter Total number of commands failed with publisher does not exist
rabbitmq_global_stream_error_internal_error_total counter Total number of commands failed with internal error
rabbitmq_global_messages_received_confirm_total counter Total number of messages received from publishers expecting confirmations
rabbitmq_global_messages_dead_lettered_expired_total counter Total number of messages dead-lettered due to message TTL exceeded
rabbitmq_global_stream_error_stream_already_exists_total counter Total number of commands failed with stream already exists
rabbitmq_global_messages_delivered_total counter Total number of messages delivered to consumers
rabbitmq_global_stream_error_sasl_mechanism_not_supported_total counter Total number of commands failed with sasl mechanism not supported
rabbitmq_global_stream_error_subscription_id_already_exists_total counter Total number of commands failed with subscription id already exists
telemetry_scrape_encoded_size_bytes summary Scrape size, encoded
telemetry_scrape_size_bytes summary Scrape size, not encoded
telemetry_scrape_duration_seconds summary Scrape duration
erlang_vm_dist_recv_bytes gauge Number of bytes received by the socket.
erlang_vm_dist_recv_cnt gauge Number of packets received by the socket.
erlang_vm_dist_recv_max_bytes gauge Size of the largest packet, in bytes, received by the socket.
erlang_vm_dist_recv_avg_bytes gauge Average size of packets, in bytes, received by the socket.
erlang_vm_dist_recv_dvi_bytes gauge Average packet size deviation, in bytes, received by the socket.
erlang_vm_dist_send_bytes gauge Number of bytes sent from the socket.
erlang_vm_dist_send_cnt gauge Number of packets sent from the socket.
erlang_vm_dist_send_max_bytes gauge Size of the largest packet, in bytes, sent from the socket.
erlang_vm_dist_send_avg_bytes gauge Average size of packets, in bytes, sent from the socket.
erlang_vm_dist_send_pend_bytes gauge Number of bytes waiting to be sent by the socket.
erlang_vm_dist_port_input_bytes gauge The total number of bytes read from the port.
erlang_vm_dist_port_output_bytes gauge The total number of bytes written to the port.
erlang_vm_dist_port_memory_bytes gauge The total number of bytes allocated for this port by the runtime system. The port itself can have allocated memory that is not included.
erlang_vm_dist_port_queue_size_bytes gauge The total number of bytes queued by the port using the ERTS driver queue implementation.
erlang_vm_dist_proc_memory_bytes gauge The size in bytes of the process. This includes call stack, heap, and internal structures.
erlang_vm_dist_proc_heap_size_words gauge The size in words of the youngest heap generation of the process. This generation includes the process stack. This information is highly implementation-dependent, and can change if the implementation changes.
erlang_vm_dist_proc_min_heap_size_words gauge The minimum heap size for the process.
erlang_vm_dist_proc_min_bin_vheap_size_words gauge The minimum binary virtual heap size for the process.
erlang_vm_dist_proc_stack_size_words gauge The stack size, in words, of the process.
erlang_vm_dist_proc_total_heap_size_words gauge The total size, in words, of all heap fragments of the process. This includes the process stack and any unreceived messages that are considered to be part of the heap.
erlang_vm_dist_proc_message_queue_len gauge The number of messages currently in the message queue of the process.
erlang_vm_dist_proc_reductions gauge The number of reductions executed by the process.
erlang_vm_dist_proc_status gauge The current status of the distribution process. The status is represented as a numerical value where `exiting=1', `suspended=2', `runnable=3', `garbage_collecting=4', `running=5' and `waiting=6'.
erlang_vm_dist_node_state gauge The current state of the distribution link. The state is represented as a numerical value where `pending=1', `up_pending=2' and `up=3'.
erlang_vm_dist_node_queue_size_bytes gauge The number of bytes in the output distribution queue. This queue sits between the Erlang code and the port driver.
erlang_vm_memory_atom_bytes_total gauge The total amount of memory currently allocated for atoms. This memory is part of the memory presented as system memory.
erlang_vm_memory_bytes_total gauge The total amount of memory currently allocated. This is the same as the sum of the memory size for processes and system.
erlang_vm_memory_dets_tables gauge Erlang VM DETS Tables count.
erlang_vm_memory_ets_tables gauge Erlang VM ETS Tables count.
erlang_vm_memory_processes_bytes_total gauge The total amount of memory currently allocated for the Erlang processes.
erlang_vm_memory_system_bytes_total gauge The total amount of memory currently allocated for the emulator that is not directly related to any Erlang process. Memory presented as processes is not included in this memory.
erlang_vm_msacc_aux_seconds_total counter Total time in seconds spent handling auxiliary jobs.
erlang_vm_msacc_check_io_seconds_total counter Total time in seconds spent checking for new I/O events.
erlang_vm_msacc_emulator_seconds_total counter Total time in seconds spent executing Erlang processes.
erlang_vm_msacc_gc_seconds_total counter Total time in seconds spent doing garbage collection. When extra states are enabled this is the time spent doing non-fullsweep garbage collections.
erlang_vm_msacc_other_seconds_total counter Total time in seconds spent doing unaccounted things.
erlang_vm_msacc_port_seconds_total counter Total time in seconds spent executing ports.
erlang_vm_msacc_sleep_seconds_total counter Total time in seconds spent sleeping.
erlang_vm_msacc_alloc_seconds_total counter Total time in seconds spent managing memory. Without extra states this time is spread out over all other states.
erlang_vm_msacc_bif_seconds_total counter Total time in seconds spent in BIFs. Without extra states this time is part of the 'emulator' state.
erlang_vm_msacc_busy_wait_seconds_total counter Total time in seconds spent busy waiting. Without extra states this time is part of the 'other' state.
erlang_vm_msacc_ets_seconds_total counter Total time in seconds spent executing ETS BIFs. Without extra states this time is part of the 'emulator' state.
erlang_vm_msacc_gc_full_seconds_total counter Total time in seconds spent doing fullsweep garbage collection. Without extra states this time is part of the 'gc' state.
erlang_vm_msacc_nif_seconds_total counter Total time in seconds spent in NIFs. Without extra states this time is part of the 'emulator' state.
erlang_vm_msacc_send_seconds_total counter Total time in seconds spent sending messages (processes only). Without extra states this time is part of the 'emulator' state.
erlang_vm_msacc_timers_seconds_total counter Total time in seconds spent managing timers. Without extra states this time is part of the 'other' state.
erlang_vm_statistics_bytes_output_total counter Total number of bytes output to ports.
erlang_vm_statistics_bytes_received_total counter Total number of bytes received through ports.
erlang_vm_statistics_context_switches counter Total number of context switches since the system started.
erlang_vm_statistics_dirty_cpu_run_queue_length gauge Length of the dirty CPU run-queue.
erlang_vm_statistics_dirty_io_run_queue_length gauge Length of the dirty IO run-queue.
erlang_vm_statistics_garbage_collection_number_of_gcs counter Garbage collection: number of GCs.
erlang_vm_statistics_garbage_collection_bytes_reclaimed counter Garbage collection: bytes reclaimed.
erlang_vm_statistics_garbage_collection_words_reclaimed counter Garbage collection: words reclaimed.
erlang_vm_statistics_reductions_total counter Total reductions.
erlang_vm_statistics_run_queues_length gauge Length of normal run-queues.
erlang_vm_statistics_runtime_milliseconds counter The sum of the runtime for all threads in the Erlang runtime system. Can be greater than wall clock time.
erlang_vm_statistics_wallclock_time_milliseconds counter Information about wall clock. Same as erlang_vm_statistics_runtime_milliseconds except that real time is measured.
erlang_vm_dirty_cpu_schedulers gauge The number of scheduler dirty CPU scheduler threads used by the emulator.
erlang_vm_dirty_cpu_schedulers_online gauge The number of dirty CPU scheduler threads online.
erlang_vm_dirty_io_schedulers gauge The number of scheduler dirty I/O scheduler threads used by the emulator.
erlang_vm_ets_limit gauge The maximum number of ETS tables allowed.
erlang_vm_logical_processors gauge The detected number of logical processors configured in the system.
erlang_vm_logical_processors_available gauge The detected number of logical processors available to the Erlang runtime system.
erlang_vm_logical_processors_online gauge The detected number of logical processors online on the system.
erlang_vm_port_count gauge The number of ports currently existing at the local node.
erlang_vm_port_limit gauge The maximum number of simultaneously existing ports at the local node.
erlang_vm_process_count gauge The number of processes currently existing at the local node.
erlang_vm_process_limit gauge The maximum number of simultaneously existing processes at the local node.
erlang_vm_schedulers gauge The number of scheduler threads used by the emulator.
erlang_vm_schedulers_online gauge The number of schedulers online.
erlang_vm_smp_support untyped 1 if the emulator has been compiled with SMP support, otherwise 0.
erlang_vm_threads untyped 1 if the emulator has been compiled with thread support, otherwise 0.
erlang_vm_thread_pool_size gauge The number of async threads in the async thread pool used for asynchronous driver calls.
erlang_vm_time_correction untyped 1 if time correction is enabled, otherwise 0.
erlang_vm_wordsize_bytes gauge The size of Erlang term words in bytes.
erlang_vm_atom_count gauge The number of atom currently existing at the local node.
erlang_vm_atom_limit gauge The maximum number of simultaneously existing atom at the local node.
erlang_vm_allocators gauge Allocated (carriers_size) and used (blocks_size) memory for the different allocators in the VM. See erts_alloc(3).
rabbitmq_auth_attempts_detailed_total counter Total number of authorization attempts with source info
rabbitmq_auth_attempts_detailed_succeeded_total counter Total number of successful authorization attempts with source info
rabbitmq_auth_attempts_detailed_failed_total counter Total number of failed authorization attempts with source info
"""
)

AGGREGATED_ONLY: frozenset[str] = frozenset(
    [
        "process_start_time_seconds",
        "rabbitmq_alarms_file_descriptor_limit",
        "rabbitmq_alarms_free_disk_space_watermark",
        "rabbitmq_alarms_memory_used_watermark",
    ]
)
PER_OBJECT_ONLY: frozenset[str] = frozenset(
    [
        "rabbitmq_auth_attempts_detailed_failed_total",
        "rabbitmq_auth_attempts_detailed_succeeded_total",
        "rabbitmq_auth_attempts_detailed_total",
    ]
)


def _detailed(names: str) -> tuple[Family, ...]:
    """/metrics/detailed's families of these aggregated ones (named without `rabbitmq_`): the same
    TYPE and HELP under `rabbitmq_detailed_`."""
    known = {name: (typ, help_text) for name, typ, help_text in AGGREGATED}
    return tuple((f"rabbitmq_detailed_{n}", *known[f"rabbitmq_{n}"]) for n in names.split())


DETAILED: dict[str, tuple[Family, ...]] = {
    "auth_attempt_detailed_metrics": _detailed(
        "auth_attempts_detailed_total auth_attempts_detailed_succeeded_total auth_attempts_detailed_failed_total"
    ),
    "auth_attempt_metrics": _detailed(
        "auth_attempts_total auth_attempts_succeeded_total auth_attempts_failed_total"
    ),
    "channel_exchange_metrics": _detailed(
        "channel_messages_published_total channel_messages_confirmed_total channel_messages_unroutable_returned_total channel_messages_unroutable_dropped_total"
    ),
    "channel_metrics": _detailed(
        "channel_consumers channel_messages_unacked channel_messages_unconfirmed channel_messages_uncommitted channel_acks_uncommitted consumer_prefetch channel_prefetch"
    ),
    "channel_process_metrics": _detailed("channel_process_reductions_total"),
    "channel_queue_exchange_metrics": _detailed("queue_messages_published_total"),
    "channel_queue_metrics": _detailed(
        "channel_get_ack_total channel_get_total channel_messages_delivered_ack_total channel_messages_delivered_total channel_messages_redelivered_total channel_messages_acked_total channel_get_empty_total"
    ),
    "connection_churn_metrics": _detailed(
        "connections_opened_total connections_closed_total channels_opened_total channels_closed_total queues_declared_total queues_created_total queues_deleted_total"
    ),
    "connection_coarse_metrics": _detailed(
        "connection_incoming_bytes_total connection_outgoing_bytes_total connection_process_reductions_total"
    ),
    "connection_metrics": _detailed(
        "connection_incoming_packets_total connection_outgoing_packets_total connection_pending_packets connection_channels"
    ),
    "exchange_bindings": _table(
        """
rabbitmq_cluster_exchange_bindings gauge Number of bindings for an exchange. This value is cluster-wide.
"""
    ),
    "exchange_names": _table(
        """
rabbitmq_cluster_exchange_name gauge Enumerates exchanges without any additional info. This value is cluster-wide. A cheaper alternative to `exchange_bindings`
"""
    ),
    "node_coarse_metrics": _detailed(
        "process_open_fds process_open_tcp_sockets process_resident_memory_bytes disk_space_available_bytes erlang_processes_used erlang_gc_runs_total erlang_gc_reclaimed_bytes_total erlang_scheduler_context_switches_total"
    ),
    "node_metrics": _detailed(
        "process_max_fds process_max_tcp_sockets resident_memory_limit_bytes disk_space_available_limit_bytes erlang_processes_limit erlang_scheduler_run_queue erlang_net_ticktime_seconds erlang_uptime_seconds"
    ),
    "node_persister_metrics": _detailed(
        "io_read_ops_total io_read_bytes_total io_write_ops_total io_write_bytes_total io_sync_ops_total io_seek_ops_total io_reopen_ops_total schema_db_ram_tx_total schema_db_disk_tx_total msg_store_read_total msg_store_write_total queue_index_read_ops_total queue_index_write_ops_total io_read_time_seconds_total io_write_time_seconds_total io_sync_time_seconds_total io_seek_time_seconds_total"
    ),
    "queue_coarse_metrics": _detailed(
        "queue_messages_ready queue_messages_unacked queue_messages queue_process_reductions_total"
    ),
    "queue_consumer_count": _detailed("queue_consumers"),
    "queue_metrics": _detailed(
        "queue_consumers queue_consumer_capacity queue_consumer_utilisation queue_process_memory_bytes queue_messages_ram queue_messages_ram_bytes queue_messages_ready_ram queue_messages_unacked_ram queue_messages_persistent queue_messages_persistent_bytes queue_messages_bytes queue_messages_ready_bytes queue_messages_unacked_bytes queue_messages_paged_out queue_messages_paged_out_bytes queue_head_message_timestamp queue_disk_reads_total queue_disk_writes_total"
    ),
    "ra_metrics": _detailed(
        "raft_term_total raft_log_snapshot_index raft_log_last_applied_index raft_log_commit_index raft_log_last_written_index raft_entry_commit_latency_seconds"
    ),
    "vhost_status": _table(
        """
rabbitmq_cluster_vhost_status gauge Whether a given vhost is running
"""
    ),
}
