// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * regions: the live regions, all of them, one by id or one MLA's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

struct region_list {
	struct region_row *rows;
	size_t nr, cap;
};

int region_parse(struct nlattr *nest, struct region_row *row)
{
	struct nlattr *r[MLAP2P_A_REGION_MAX + 1];
	int ret;

	ret = nla_parse_nested(r, MLAP2P_A_REGION_MAX, nest, region_policy);
	if (ret < 0)
		return nle_to_errno(ret);
	if (!r[MLAP2P_A_REGION_ID])
		return -EPROTO;
	memset(row, 0, sizeof(*row));
	row->id = nla_get_u64(r[MLAP2P_A_REGION_ID]);
	row->device = get_u32(r[MLAP2P_A_REGION_DEVICE], 0);
	row->size = get_u64(r[MLAP2P_A_REGION_SIZE], 0);
	row->pid = get_u32(r[MLAP2P_A_REGION_OWNER_PID], 0);
	row->importers = get_u32(r[MLAP2P_A_REGION_IMPORTERS], 0);
	row->mappings = get_u32(r[MLAP2P_A_REGION_MAPPINGS], 0);
	row->exported = r[MLAP2P_A_REGION_EXPORTED] != NULL;
	return 0;
}

static int region_reply(struct ctl *c, struct genlmsghdr *g,
			struct nlattr **tb, void *arg)
{
	struct region_list *l = arg;

	(void)c;
	(void)g;
	if (!tb[MLAP2P_A_REGION])
		return 0;
	if (l->nr == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct region_row *p = realloc(l->rows, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->rows = p;
		l->cap = cap;
	}
	return region_parse(tb[MLAP2P_A_REGION], &l->rows[l->nr++]);
}

/* "id=N" selects one region (GET_REGION doit), "device=N" one MLA's. */
struct region_filter {
	bool by_id, by_device;
	__u64 id;
	__u32 device;
};

static int region_filter_fill(struct nl_msg *msg, void *arg)
{
	struct region_filter *f = arg;
	struct nlattr *nest;

	if (!f->by_id && !f->by_device)
		return 0;
	nest = nla_nest_start(msg, MLAP2P_A_REGION);
	if (!nest)
		return -EMSGSIZE;
	if (f->by_id && nla_put_u64(msg, MLAP2P_A_REGION_ID, f->id))
		return -EMSGSIZE;
	if (f->by_device && nla_put_u32(msg, MLAP2P_A_REGION_DEVICE,
					f->device))
		return -EMSGSIZE;
	nla_nest_end(msg, nest);
	return 0;
}

static int region_filter_parse(int argc, char **argv, struct region_filter *f)
{
	__u32 v;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "id=", 3) && !f->by_id &&
		    !parse_u64(argv[i] + 3, &f->id)) {
			f->by_id = true;
		} else if (!strncmp(argv[i], "device=", 7) && !f->by_device &&
			   !parse_u32(argv[i] + 7, &v)) {
			f->device = v;
			f->by_device = true;
		} else {
			return CMD_USAGE;
		}
	}
	return 0;
}

static void print_regions(struct ctl *c, const struct region_list *l)
{
	char size[32];
	size_t i;

	if (c->json)
		printf("[");
	else
		printf("%8s %5s %10s %8s %9s %8s %s\n", "id", "MLA", "size",
		       "pid", "importers", "mappings", "exported");
	for (i = 0; i < l->nr; i++) {
		const struct region_row *r = &l->rows[i];

		if (c->json) {
			printf("%s{\"id\":%" PRIu64 ",\"device\":%u,\"size\":%"
			       PRIu64 ",\"owner_pid\":%u,\"importers\":%u,"
			       "\"mappings\":%u,\"exported\":%s}",
			       i ? "," : "", (uint64_t)r->id, r->device,
			       (uint64_t)r->size, r->pid, r->importers,
			       r->mappings, r->exported ? "true" : "false");
			continue;
		}
		printf("%8" PRIu64 " %5u %10s %8u %9u %8u %s\n",
		       (uint64_t)r->id, r->device,
		       fmt_bytes(r->size, size, sizeof(size)), r->pid,
		       r->importers, r->mappings, r->exported ? "yes" : "no");
	}
	if (c->json)
		printf("]\n");
}

int cmd_regions(struct ctl *c, int argc, char **argv)
{
	struct region_filter f = { 0 };
	struct region_list l = { 0 };
	bool intr = false;
	int ret, try;

	ret = region_filter_parse(argc, argv, &f);
	if (ret)
		return ret;
	for (try = 0; try < DUMP_RETRIES; try++) {
		l.nr = 0;
		ret = genl_request(c, MLAP2P_CMD_GET_REGION,
				   f.by_id ? 0 : NLM_F_DUMP,
				   region_filter_fill, &f, region_reply, &l,
				   &intr);
		if (ret || !intr)
			break;
	}
	if (!ret && intr)
		fprintf(stderr, "mlap2pctl: %s: regions kept changing during "
			"the dump; showing the last one\n", c->cmd);
	if (!ret)
		print_regions(c, &l);
	free(l.rows);
	return ret;
}
