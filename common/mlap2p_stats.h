/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The module's counters, each listed once, one line per field of struct
 * mlap2p_stats (kmod/mlap2p.h; a build-time check counts them):
 *
 *	MLAP2P_STAT(name, attr, sysfs, bytes)
 *
 * @name is the counter's field in struct mlap2p_stats, its file in
 * /sys/class/misc/mlap2p/ when @sysfs, and its name in mlap2pctl's
 * output; @attr is the MLAP2P_A_STAT_* attribute GET_STATS carries it in
 * (MLAP2P_A_STAT_UNSPEC: none); @bytes says it counts bytes (mlap2pctl
 * prints it as a size).  live_* are current values, the rest count events
 * since load.
 *
 * No include guard: each user defines MLAP2P_STAT(), includes this file
 * and undefines it: kmod/region.c's mlap2p_stat_descs[] (from which
 * kmod/main.c makes the sysfs files and kmod/genl.c the STATS nest) and
 * tools/mlap2pctl/stats.c's table.  A new counter is a field, a line here
 * and, for GET_STATS, an attribute.
 */
MLAP2P_STAT(live_regions, MLAP2P_A_STAT_LIVE_REGIONS, true, false)
MLAP2P_STAT(live_bytes, MLAP2P_A_STAT_LIVE_BYTES, true, true)
MLAP2P_STAT(live_mappings, MLAP2P_A_STAT_LIVE_MAPPINGS, true, false)
MLAP2P_STAT(live_handles, MLAP2P_A_STAT_UNSPEC, true, false)
MLAP2P_STAT(allocs, MLAP2P_A_STAT_ALLOCS, true, false)
MLAP2P_STAT(frees, MLAP2P_A_STAT_FREES, true, false)
MLAP2P_STAT(exports, MLAP2P_A_STAT_EXPORTS, true, false)
MLAP2P_STAT(opens, MLAP2P_A_STAT_OPENS, true, false)
MLAP2P_STAT(closes, MLAP2P_A_STAT_CLOSES, true, false)
MLAP2P_STAT(rejected, MLAP2P_A_STAT_REJECTED, true, false)
MLAP2P_STAT(hwm_bytes, MLAP2P_A_STAT_HWM_BYTES, true, true)
MLAP2P_STAT(hwm_regions, MLAP2P_A_STAT_HWM_REGIONS, false, false)
MLAP2P_STAT(hwm_mappings, MLAP2P_A_STAT_HWM_MAPPINGS, false, false)
