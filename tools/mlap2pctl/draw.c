// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The picture under "topo": this node's MLAs on their torus or ring,
 * then the pod.  ASCII only.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* Decimal digits of @v. */
static int digits(__u32 v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* "[ 5 ]" or "[ 5*]": '*' marks an MLA holding memory; @w digits wide. */
static void cell(const struct topo_view *v, __u32 mla, int w)
{
	struct topo_dev *td = topo_find((struct topo_view *)v, mla);

	printf("[%*u%c]", w, mla, td && td->used ? '*' : ' ');
}

/* Column of the middle of cell @i of a row of cells @w digits wide. */
static int cell_mid(int indent, __u32 i, int w)
{
	return indent + (int)i * (w + 5) + 1 + w / 2;
}

/*
 * A line with @mark under the middle of each cell of a row of @n cells;
 * @text[i], if given, starts there instead.  No trailing blanks.
 */
static void marks(int indent, __u32 n, int w, const char *mark)
{
	char line[MLAP2P_TOPO_MAX_DEVICES * 10];
	int end = 0, col;
	__u32 i;

	memset(line, ' ', sizeof(line));
	for (i = 0; i < n; i++) {
		col = cell_mid(indent, i, w);
		if (col + 3 >= (int)sizeof(line))
			break;
		if (!strcmp(mark, "x"))
			end = col + snprintf(line + col, 4, "x%u", i);
		else
			end = col + snprintf(line + col, 2, "%s", mark);
		line[end] = ' ';
	}
	printf("%.*s\n", end, line);
}

/* This node's MLAs laid out on their torus coordinates. */
static bool draw_torus(const struct topo_view *v)
{
	__u32 base = v->t.node * v->t.num_devices, w = 0, h = 0, i, x, y;
	__u32 grid[16 * 16];
	int dw = digits(base + v->t.num_devices - 1);

	for (i = 0; i < ARRAY_SIZE(grid); i++)
		grid[i] = MLAP2P_NO_MLA;
	for (i = 0; i < v->t.num_devices; i++) {
		struct topo_dev *td = topo_find((struct topo_view *)v, base + i);

		if (!td || td->d.torus_x >= 16 || td->d.torus_y >= 16)
			return false;
		w = td->d.torus_x + 1 > w ? td->d.torus_x + 1 : w;
		h = td->d.torus_y + 1 > h ? td->d.torus_y + 1 : h;
		grid[td->d.torus_y * 16 + td->d.torus_x] = td->mla;
	}
	if (!w || w * h != v->t.num_devices)
		return false;

	printf("\nnode %u: %ux%u torus; rows and columns wrap around "
	       "(* = memory in use)\n\n", v->t.node, w, h);
	marks(8, w, dw, "x");
	marks(8, w, dw, "^");
	for (y = 0; y < h; y++) {
		if (y)
			marks(8, w, dw, "|");
		printf("  y%-2u <-", y);
		for (x = 0; x < w; x++) {
			if (grid[y * 16 + x] == MLAP2P_NO_MLA)
				return false;
			cell(v, grid[y * 16 + x], dw);
			printf(x + 1 < w ? "--" : "->\n");
		}
	}
	marks(8, w, dw, "v");
	return true;
}

static bool is_neighbour(const struct topo_dev *td, __u32 mla)
{
	__u32 k;

	for (k = 0; k < td->d.num_neighbours; k++)
		if (td->d.neighbours[k] == mla)
			return true;
	return false;
}

/* This node's MLAs as a ring folded in two rows. */
static bool draw_ring(const struct topo_view *v)
{
	__u32 n = v->t.num_devices, base = v->t.node * n, half, i;
	int dw = digits(base + n - 1);

	if (n < 4 || n % 2)
		return false;
	for (i = 0; i < n; i++) {
		struct topo_dev *td = topo_find((struct topo_view *)v, base + i);

		if (!td || !is_neighbour(td, base + (i + 1) % n))
			return false;
	}
	half = n / 2;
	printf("\nnode %u: ring of %u MLAs (* = memory in use)\n\n  ",
	       v->t.node, n);
	for (i = 0; i < half; i++) {
		cell(v, base + i, dw);
		printf(i + 1 < half ? "--" : "\n");
	}
	printf("%*s|%*s|\n  ", cell_mid(2, 0, dw), "",
	       cell_mid(2, half - 1, dw) - cell_mid(2, 0, dw) - 1, "");
	for (i = 0; i < half; i++) {
		cell(v, base + n - 1 - i, dw);
		printf(i + 1 < half ? "--" : "\n");
	}
	return true;
}

static void draw_pod(const struct topo_view *v)
{
	__u32 n, nodes = v->t.pod_nodes, per = v->t.num_devices;

	if (v->t.pod_type == MLAP2P_POD_NONE)
		return;
	printf("\npod: %u nodes (* = this host)\n\n",
	       nodes);
	if (v->t.pod_type == MLAP2P_POD_SWITCH) {
		printf("  [switch]\n");
		for (n = 0; n < nodes; n++)
			printf("    %s-- node %u%c  MLAs %u-%u\n",
			       n + 1 < nodes ? "|" : "`", n,
			       n == v->t.node ? '*' : ' ', n * per,
			       n * per + per - 1);
		return;
	}
	/* Point-to-point: a ring of nodes, MLA i linked to MLA i next door. */
	printf("  nodes ");
	for (n = 0; n < nodes; n++)
		printf("%u%s%s%s", n, n == v->t.node ? "*" : "",
		       n + 1 < nodes ? " = " : "", n % 16 == 15 ? "\n  " : "");
	if (nodes > 2)
		printf(" = 0\n  (a ring; MLA i links MLA i of the next node)\n");
	else
		printf("\n  (MLA i links MLA i of the other node)\n");
}

void draw_topo(const struct topo_view *v)
{
	if (!draw_torus(v) && !draw_ring(v))
		printf("\n(no picture for this wiring)\n");
	draw_pod(v);
}
