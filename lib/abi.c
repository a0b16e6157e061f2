/*
 * lib/abi.c — the run-time layout checks (sc_sizeof, sc_offsetof, sc_type_field, sc_type_name):
 * one table per public structure listing every member in declaration order, public (P) or not
 * (X: reserved and private blocks, and the whole of the opaque struct sc_batcher).
 *
 * Every member is listed, not only the public ones, so that tests/check_api.c can prove that the
 * table accounts for every byte of each structure (members in order, no gap but alignment
 * padding): a member added to the header and not here fails that test. Updating a structure
 * means updating its line here; bindings then see the change through the same table.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "abi.h"

#define M(m, pub) { #m, offsetof(T, m), sizeof(((T *)0)->m), pub }
#define P(m) M(m, 1)
#define X(m) M(m, 0)

#define T struct sc_arena_opts
static const struct member m_arena_opts[] = {
	P(size_bytes), P(huge), P(dir), P(mode), P(gid), P(index_entries), P(ring_count), P(ring_bytes),
	P(obs_entries), P(reader_slots), P(flags), P(l3_index_entries), P(l3_index_refresh_ms), P(segment_bytes),
	P(slots_per_user), X(reserved),
};
#undef T

#define T struct sc_arena_open_opts
static const struct member m_arena_open_opts[] = {
	P(dir), P(flags), P(owner_uid), X(reserved),
};
#undef T

#define T struct sc_arena_file
static const struct member m_arena_file[] = {
	P(path), P(mode), P(uid), P(gid), P(size), X(reserved),
};
#undef T

#define T struct sc_arena_attached
static const struct member m_arena_attached[] = {
	P(pid), P(uid), P(slot), P(other_pidns), P(attached_unix),
};
#undef T

#define T struct sc_holder
static const struct member m_holder[] = {
	P(slot), P(token), P(alive), P(other_pidns), P(pid), P(uid), P(leases), P(leased_bytes), P(reserved_bytes),
};
#undef T

#define T struct sc_arena_info
static const struct member m_arena_info[] = {
	P(name), P(path), P(size_bytes), P(page_size), P(backing), P(layout_version), P(created_unix),
	P(creator_pid), P(mode), P(reader_slots), P(attached_count), P(attached), P(index_entries),
	P(ring_count), P(ring_bytes), P(obs_entries), P(heap_bytes), P(l3_index_entries), P(l3_index_refresh_ms),
	P(flags), P(slots_per_user), P(locked_slots), X(reserved0), X(reserved),
};
#undef T

#define T struct sc_arena_extent
static const struct member m_arena_extent[] = {
	P(base), P(bytes), P(page_size), P(file_offset), P(kind), P(flags), X(reserved),
};
#undef T

#define T struct sc_digest
static const struct member m_digest[] = {
	P(lo), P(hi),
};
#undef T

#define T struct sc_key
static const struct member m_key[] = {
	P(lo), P(hi),
};
#undef T

#define T struct sc_kv_component
static const struct member m_kv_component[] = {
	P(version), P(role), P(token_start), P(token_count), P(k_type), P(v_type), P(k_row_bytes),
	P(v_row_bytes), P(payload_offset), P(payload_bytes), P(flags), X(reserved),
};
#undef T

#define T struct sc_kv_desc
static const struct member m_kv_desc[] = {
	P(version), P(layer_start), P(layer_end), P(layer_count), P(token_start), P(token_count),
	P(k_type), P(v_type), P(k_row_bytes), P(v_row_bytes), P(v_element_bytes), P(k_idx_row_bytes),
	P(payload_bytes), P(flags), P(codec), P(component_count), X(reserved), P(components),
};
#undef T

#define T struct sc_payload
static const struct member m_payload[] = {
	P(kind), P(sec), P(sec_len), P(kv_desc),
};
#undef T

#define T struct sc_location
static const struct member m_location[] = {
	P(token_count), P(kind), P(digest), P(prefix), P(sec_len), P(payload_bytes), P(file_bytes),
	P(has_kv_desc), X(reserved0), P(kv_desc), P(cost_ns), X(reserved),
};
#undef T

#define T struct sc_lease
static const struct member m_lease[] = {
	P(sec), P(sec_len), P(kind), P(origin), P(token_count), P(digest), P(key), P(has_kv_desc),
	X(reserved0), P(kv_desc), P(segments), X(reserved1), X(reserved), X(arena_), X(rec_), X(slot_),
	X(reserved_), X(private_spare_),
};
#undef T

#define T struct sc_l2_entry_info
static const struct member m_l2_entry_info[] = {
	P(key), P(stage_id), P(token_count), P(bytes), P(footprint), P(sec_len), P(digest), P(kind),
	P(origin), P(created_unix_ns), P(frequency), P(has_kv_desc), P(cost_ns), X(reserved),
};
#undef T

#define T struct sc_segment
static const struct member m_segment[] = {
	P(ptr), P(len), P(section), X(reserved),
};
#undef T

#define T struct sc_l2_stats
static const struct member m_l2_stats[] = {
	P(entries), P(bytes), P(logical_bytes), P(budget_bytes), P(hits), P(misses), P(inserts),
	P(evictions), P(admission_rejects), P(refused_bytes), P(leases), P(pending_reclaim_bytes),
	P(free_bytes), P(largest_free_block), P(refused), P(small_entries), P(small_bytes), P(main_entries),
	P(main_bytes), P(moved_to_main), P(ghost_hits), P(physical_bytes), P(saved_bytes), P(segments),
	P(segment_holder_bytes), P(segment_dedup_bytes), P(refused_low_benefit), P(credit_kept), X(reserved),
};
#undef T

#define T struct sc_l2_resv
static const struct member m_l2_resv[] = {
	P(ptr), P(bytes), X(arena_), X(off_), X(asked_),
};
#undef T

#define T struct sc_l3_opts
static const struct member m_l3_opts[] = {
	P(budget_bytes), P(min_free_bytes), P(queue_depth), P(o_direct), P(file_mode), P(flags),
	P(host_id), P(state_dir), P(visibility_ms), P(fd_cache), P(gid), X(reserved),
};
#undef T

#define T struct sc_l3_put_args
static const struct member m_l3_put_args[] = {
	P(model_identity), P(state_identity), P(ns), P(tokens), P(token_count), P(payload),
};
#undef T

#define T struct sc_l3_fill_req
static const struct member m_l3_fill_req[] = {
	P(loc), P(dst), P(dst_bytes), P(flags), P(user_data), P(stage_id), P(result), P(direct),
	P(fill_ns), P(identity), P(cost_ns), X(reserved), X(_next),
};
#undef T

#define T struct sc_l3_stats
static const struct member m_l3_stats[] = {
	P(objects), P(bytes), P(fills), P(fill_bytes), P(fill_ns), P(verify_failures), P(quarantined),
	P(evictions), P(write_refusals), P(puts), P(put_dedup), P(key_collisions), P(budget_bytes), P(dio_mem_align),
	P(dio_offset_align), P(fills_kept), P(logical_bytes), P(physical_bytes), P(saved_bytes), P(segments),
	P(segment_bytes), P(fill_bytes_from_l2), P(identity_mismatches), P(fill_starts), X(reserved),
};
#undef T

#define T struct sc_l3_janitor_status
static const struct member m_l3_janitor_status[] = {
	P(shared), X(reserved0), P(host_id), P(janitor_host), X(reserved1), P(epoch), P(pass_start_ns),
	P(pass_end_ns), P(objects), P(bytes), P(evictions), P(passes), X(reserved),
};
#undef T

#define T struct sc_l3_janitor_report
static const struct member m_l3_janitor_report[] = {
	P(epoch), P(objects), P(bytes), P(evicted), P(evicted_bytes), P(stale_temps), P(accesses),
	P(quarantined), P(dropped), P(skipped_recent), P(pass_ns), X(reserved),
};
#undef T

#define T struct sc_l3_object_info
static const struct member m_l3_object_info[] = {
	P(digest), P(kind), P(token_count), P(payload_bytes), P(file_bytes), P(mtime_ns), P(segments),
	P(segments_missing), X(reserved), P(ns), P(model_identity), P(state_identity), P(valid),
};
#undef T

#define T struct sc_promote_stats
static const struct member m_promote_stats[] = {
	P(observations), P(claims), P(capacity), P(considered), P(promoted), P(evicted), P(expired),
	P(repairs), P(published), P(refused), P(refused_low_benefit), X(reserved),
};
#undef T

#define T struct sc_restore
static const struct member m_restore[] = {
	P(sec), P(sec_len), P(kind), P(token_count), P(digest), P(has_kv_desc), X(reserved0), P(kv_desc),
	P(source), P(promoted), P(promote_why), P(waited), P(direct), P(in_arena), P(from_index), P(locate_ns),
	P(lookup_ns), P(fill_ns), P(total_ns), P(predicted_ns), P(miss_reason), P(miss_detail), X(reserved),
	X(lease_), X(resv_), X(heap_), X(state_),
	X(private_spare_),
};
#undef T

#define T struct sc_l3_index_stats
static const struct member m_l3_index_stats[] = {
	P(capacity), P(refresh_ms), P(positive), P(negative), P(pages), P(free_pages), P(token_verify), P(bound),
	P(hits), P(negative_hits), P(misses), P(fallbacks), P(stale), P(refreshes), P(inserts), P(evictions),
	P(drops), P(full), P(vanished), P(foreign), P(key_collisions), P(key_collisions_l2),
	P(key_collisions_index), P(key_collisions_l3), X(reserved),
};
#undef T

#define T struct sc_commit
static const struct member m_commit[] = {
	P(request_id), P(session_id), P(generated_token_count), P(flags), P(token_count), P(tokens),
	P(ring), P(gen), P(seq),
};
#undef T

#define T struct sc_ring_stat
static const struct member m_ring_stat[] = {
	P(ring), P(state), P(producer_pid), P(gen), P(producer_alive), P(corrupt), P(depth_bytes),
	P(depth_records), P(records), P(delivered), P(ring_full), P(ring_bytes), X(reserved),
};
#undef T

#define T struct sc_batcher_opts
static const struct member m_batcher_opts[] = {
	P(interval_ns), P(capacity), P(flags), X(reserved),
};
#undef T

#define T struct sc_batcher
static const struct member m_batcher[] = {
	X(ring), X(request_id), X(session_id), X(interval_ns), X(last_emit_ns), X(count), X(ring_full),
	X(commits), X(capacity), X(pending), X(state), X(reserved), X(tokens),
};
#undef T

#define T struct sc_restore_opts
static const struct member m_restore_opts[] = {
	P(flags), X(reserved0), P(deadline_ns), P(recompute_ns), X(reserved),
};
#undef T

#define T struct sc_miss_stats
static const struct member m_miss_stats[] = {
	P(l2), P(restore), P(l2_refused), P(deadline), X(reserved),
};
#undef T

#define T struct sc_fsck_report
static const struct member m_fsck_report[] = {
	P(problems), P(repaired), P(dropped), P(entries), P(entry_bytes), P(pending_bytes),
	P(reserved_bytes), P(orphan_bytes), P(heap_used_bytes), P(heap_free_bytes), P(heap_blocks),
	P(leaked_bytes), P(digests_checked), P(digest_failures), P(readers_live), P(readers_dead),
	P(rings), P(ring_problems), P(observations), P(obs_problems), P(lock_repairs), X(reserved),
};
#undef T

#define T struct sc_l3_prefix_info
static const struct member m_l3_prefix_info[] = {
	P(prefix), P(digest), P(token_count), P(object_present), P(created_ns), X(reserved), P(ns),
};
#undef T

#define T struct sc_lookup
static const struct member m_lookup[] = {
	P(tokens), P(l2_tokens), P(l3_tokens), X(reserved0), P(l2_digest), P(l3_digest), P(l2_bytes), P(l3_bytes),
	X(reserved),
};
#undef T

#define T struct sc_event
static const struct member m_event[] = {
	P(type), P(token_count), P(stage_id), P(key), P(digest), P(lost_why), X(reserved0), X(reserved),
};
#undef T

#define T struct sc_events_stats
static const struct member m_events_stats[] = {
	P(records), P(listener), P(listener_pid), P(listener_alive), P(listener_since_ns), P(appended), P(consumed),
	P(pending), P(dropped), P(lost), P(resets), P(seq), X(reserved),
};
#undef T

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define TYPE(t) { "sc_" #t, sizeof(struct sc_##t), _Alignof(struct sc_##t), m_##t, N(m_##t) }

static const struct abi_type types[] = {
	TYPE(arena_opts), TYPE(arena_attached), TYPE(arena_info), TYPE(holder), TYPE(arena_extent), TYPE(digest),
	TYPE(key), TYPE(kv_component), TYPE(kv_desc), TYPE(payload), TYPE(location), TYPE(lease),
	TYPE(segment), TYPE(l2_entry_info), TYPE(l2_stats), TYPE(l2_resv), TYPE(l3_opts), TYPE(l3_put_args),
	TYPE(l3_fill_req), TYPE(l3_stats), TYPE(l3_janitor_status), TYPE(l3_janitor_report), TYPE(l3_object_info),
	TYPE(promote_stats), TYPE(restore), TYPE(l3_index_stats), TYPE(commit), TYPE(ring_stat), TYPE(batcher_opts),
	TYPE(batcher), TYPE(fsck_report), TYPE(arena_open_opts), TYPE(arena_file), TYPE(restore_opts),
	TYPE(miss_stats), TYPE(l3_prefix_info), TYPE(lookup), TYPE(event), TYPE(events_stats),
};

const struct abi_type *abi_type_at(unsigned index)
{
	return index < N(types) ? &types[index] : NULL;
}

const struct abi_type *abi_type_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < N(types); i++)
		if (!strcmp(types[i].name, name))
			return &types[i];
	return NULL;
}

size_t sc_sizeof(const char *type)
{
	const struct abi_type *t = abi_type_find(type);
	return t ? t->size : 0;
}

size_t sc_alignof(const char *type)
{
	const struct abi_type *t = abi_type_find(type);
	return t ? t->align : 0;
}

int64_t sc_offsetof(const char *type, const char *field)
{
	const struct abi_type *t = abi_type_find(type);
	if (!t || !field)
		return -ENOENT;
	for (unsigned i = 0; i < t->nmembers; i++)
		if (t->members[i].pub && !strcmp(t->members[i].name, field))
			return (int64_t)t->members[i].offset;
	return -ENOENT;
}

int sc_type_field(const char *type, unsigned index, const char **name, size_t *offset, size_t *size)
{
	const struct abi_type *t = abi_type_find(type);
	if (!t)
		return -ENOENT;
	for (unsigned i = 0; i < t->nmembers; i++) {
		if (!t->members[i].pub || index--)
			continue;
		if (name)
			*name = t->members[i].name;
		if (offset)
			*offset = t->members[i].offset;
		if (size)
			*size = t->members[i].size;
		return 0;
	}
	return -ENOENT;
}

const char *sc_type_name(unsigned index)
{
	return index < N(types) ? types[index].name : NULL;
}
