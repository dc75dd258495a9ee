// SPDX-License-Identifier: GPL-2.0
/*
 * The installed library is usable on its own: `make -C lib install` into a
 * DESTDIR under the build directory, then a program that includes only the
 * installed headers and links with `pkg-config --cflags --libs mlap2p`
 * builds, links and runs.  Also: the shared object exports nothing but the
 * seed's names and mlap2p_*, every symbol versioned, with the soname the
 * version source gives.
 *
 * Needs the source tree, make, cc and pkg-config; skips without them (as
 * in the VM).  MLAP2P_SRCDIR names the tree when the binary is elsewhere.
 */
#include <libgen.h>
#include <limits.h>

#include "helpers.h"
#include "kselftest_harness.h"

struct tree {
	char top[512];		/* source tree */
	char build[512];	/* build directory ($B) */
	char dest[600];		/* DESTDIR */
};

static bool is_tree(const char *dir)
{
	char p[600];

	snprintf(p, sizeof(p), "%.512s/Makefile.common", dir);
	if (access(p, R_OK))
		return false;
	snprintf(p, sizeof(p), "%.512s/lib/Makefile", dir);
	return !access(p, R_OK);
}

static bool have(const char *tool)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

/* 0, or a reason to skip in @why. */
static int find_tree(struct tree *t, char *why, size_t len)
{
	char exe[512], dir[512];
	const char *env = getenv("MLAP2P_SRCDIR");
	ssize_t n;
	int up;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return snprintf(why, len, "no /proc/self/exe"), -1;
	exe[n] = '\0';
	/* $B/test*\/lib_install_test: $B is two levels up. */
	snprintf(dir, sizeof(dir), "%s", exe);
	snprintf(t->build, sizeof(t->build), "%s", dirname(dirname(dir)));

	if (env) {
		snprintf(t->top, sizeof(t->top), "%s", env);
	} else {
		snprintf(t->top, sizeof(t->top), "%s", t->build);
		for (up = 0; up < 4 && !is_tree(t->top); up++)
			snprintf(t->top, sizeof(t->top), "%s",
				 dirname(strcpy(dir, t->top)));
	}
	if (!is_tree(t->top))
		return snprintf(why, len, "no source tree (set MLAP2P_SRCDIR)"), -1;
	if (!have("make") || !have("cc") || !have("pkg-config"))
		return snprintf(why, len, "needs make, cc and pkg-config"), -1;
	snprintf(t->dest, sizeof(t->dest), "%.500s/install-test-%d", t->build,
		 (int)getpid());
	return 0;
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st)
		ksft_print_msg("'%s' exited with %d\n", cmd, st);
	return st;
}

static const char prog[] =
	"#define _POSIX_C_SOURCE 200809L\n"
	"#include <stdio.h>\n"
	"#include <stdlib.h>\n"
	"#include <string.h>\n"
	"#include <mlap2p/mlap2p.h>\n"
	"#include <mlap2p/transport.h>\n"
	"#include <linux/mlap2p.h>\n"
	"int main(void)\n"
	"{\n"
	"	struct mlap2p_unique_id id;\n"
	"	struct mlap2p_comm *comm;\n"
	"	void *p;\n"
	"	if (mlap2p_version(NULL, NULL, NULL) != MLAP2P_VERSION_CODE(\n"
	"	    MLAP2P_VERSION_MAJOR, MLAP2P_VERSION_MINOR, MLAP2P_VERSION_PATCH))\n"
	"		return 2;\n"
	"	/* The library binds its tables to itself: this program, built\n"
	"	 * without -fPIC, reads copies (same contents, own addresses). */\n"
	"	if (strcmp(ncclTransports[0]->name, \"P2P\") ||\n"
	"	    strcmp(ncclTransports[1]->name, netTransport.name) ||\n"
	"	    ncclTransports[1]->canConnect != netTransport.canConnect ||\n"
	"	    p2pTransport.send.proxy)\n"
	"		return 3;\n"
	"	if (sizeof(struct p2pConnectInfo) != 80 ||\n"
	"	    MLAP2P_IPC_HANDLE_SIZE != 64)\n"
	"		return 4;\n"
	"	setenv(\"MLAP2P_RUNTIME\", \"host\", 1);\n"
	"	if (mlap2p_get_unique_id(&id) ||\n"
	"	    mlap2p_comm_init_rank(&comm, 1, &id, 0, 0))\n"
	"		return fprintf(stderr, \"%s\\n\", mlap2p_last_error()), 5;\n"
	"	if (mlap2p_mem_alloc(comm, 1 << 20, &p) || mlap2p_mem_free(comm, p))\n"
	"		return 6;\n"
	"	if (mlap2p_comm_destroy(comm))\n"
	"		return 7;\n"
	"	printf(\"installed libmlap2p %s works\\n\", mlap2p_version_string());\n"
	"	return 0;\n"
	"}\n";

TEST(pkg_config_program)
{
	char why[256], path[640];
	const char *lib;
	struct tree t;
	FILE *f;

	if (find_tree(&t, why, sizeof(why)))
		SKIP(return, "%s", why);
	lib = getenv("MLAP2P_LIB_DIR");
	ASSERT_EQ(0, run("make -s -C %s/lib install TOP=%s B=%s DESTDIR=%s PREFIX=/usr >/dev/null",
			 lib ? lib : t.top, t.top, t.build, t.dest));

	snprintf(path, sizeof(path), "%.600s/prog.c", t.dest);
	f = fopen(path, "we");
	ASSERT_NE(NULL, f);
	fputs(prog, f);
	fclose(f);
	/* Only what was installed: no -I into the tree. */
	EXPECT_EQ(0, run("cd %s && PKG_CONFIG_PATH=%s/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=%s "
			 "cc -std=c11 -Wall -Wextra -Werror -o prog prog.c "
			 "$(PKG_CONFIG_PATH=%s/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=%s pkg-config --cflags --libs mlap2p)",
			 t.dest, t.dest, t.dest, t.dest, t.dest));
	EXPECT_EQ(0, run("cd %s && LD_LIBRARY_PATH=%s/usr/lib ./prog | grep -q 'installed libmlap2p .* works'",
			 t.dest, t.dest));
	/* It links the shared library by its soname. */
	EXPECT_EQ(0, run("readelf -d %s/prog | grep -q 'NEEDED.*libmlap2p.so.1'",
			 t.dest));
	EXPECT_EQ(0, run("test -f %s/usr/include/linux/mlap2p.h -a -f %s/usr/include/mlap2p/version.h -a -L %s/usr/lib/libmlap2p.so -a -f %s/usr/lib/libmlap2p.a",
			 t.dest, t.dest, t.dest, t.dest));
	run("rm -rf %s", t.dest);
}

TEST(exported_symbols)
{
	char why[256], path[640], line[768];
	int n = 0, bad = 0;
	struct tree t;
	FILE *f;

	if (find_tree(&t, why, sizeof(why)))
		SKIP(return, "%s", why);
	if (!have("nm") || !have("readelf"))
		SKIP(return, "needs nm and readelf");
	snprintf(path, sizeof(path), "%.600s/lib/libmlap2p.so.1", t.build);
	if (access(path, R_OK))
		SKIP(return, "no %.200s", path);
	EXPECT_EQ(0, run("readelf -d %s | grep -q 'SONAME.*\\[libmlap2p.so.1\\]'",
			 path));

	snprintf(line, sizeof(line), "nm -D --defined-only %s", path);
	f = popen(line, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		char addr[32], type[4], sym[256];

		if (sscanf(line, "%31s %3s %255s", addr, type, sym) != 3)
			continue;
		if (!strcmp(sym, "MLAP2P_1.0") || !strcmp(sym, "MLAP2P_1.1"))
			continue;
		n++;
		if (!strstr(sym, "@@MLAP2P_1.0") && !strstr(sym, "@MLAP2P_1.")) {
			ksft_print_msg("unversioned: %s\n", sym);
			bad++;
		}
		if (strncmp(sym, "mlap2p_", 7) && strncmp(sym, "nccl", 4) &&
		    strncmp(sym, "pnccl", 5) &&
		    strcmp(sym, "p2pTransport@@MLAP2P_1.0") &&
		    strcmp(sym, "netTransport@@MLAP2P_1.0")) {
			ksft_print_msg("leaks: %s\n", sym);
			bad++;
		}
		/* nccl*: the seed's transport names, or <nccl.h>'s calls
		 * (MLAP2P_1.1, each with its pnccl twin: nccl_symbols.sh). */
		if (!strncmp(sym, "nccl", 4) &&
		    strncmp(sym, "ncclTransport", 13) &&
		    !strstr(sym, "@@MLAP2P_1.1")) {
			ksft_print_msg("leaks: %s\n", sym);
			bad++;
		}
		/* The shared locality rules stay internal. */
		if (!strncmp(sym, "mlap2p_topo_", 12)) {
			ksft_print_msg("leaks: %s\n", sym);
			bad++;
		}
	}
	pclose(f);
	EXPECT_LT(20, n);
	EXPECT_EQ(0, bad);
}

TEST_HARNESS_MAIN
