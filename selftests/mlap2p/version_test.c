// SPDX-License-Identifier: GPL-2.0
/*
 * One version, everywhere.  Makefile.common's MLAP2P_VERSION is the only
 * source; lib/Makefile turns it into <mlap2p/version.h>, Kbuild into the
 * module's MODULE_VERSION, tools/Makefile into `mlap2pctl --version`.  This
 * test holds each of them against the header this test was built with:
 *
 *  - the shared library, loaded by its soname libmlap2p.so.<MAJOR> (so the
 *    soname itself is checked): DT_SONAME, mlap2p_version() (its three
 *    numbers and the version code it returns) and mlap2p_version_string();
 *  - the loaded module: /sys/module/mlap2p/version;
 *  - GET_INFO: the ABI version equals the uapi header's, its major equals
 *    the package major (an incompatible kernel ABI is a new soname), and
 *    its minor is not newer than the package minor;
 *  - `mlap2pctl --version`.
 *
 * Each part skips when what it needs is absent: the library is looked up
 * the way the dynamic linker does (LD_LIBRARY_PATH, ld.so.cache), then in
 * $MLAP2P_LIBDIR, then in ../lib beside this program (the build tree);
 * mlap2pctl in $MLAP2PCTL, then PATH, then ../tools.  pkg-config's view is
 * checked on the host by scripts/install-check, which has the .pc file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>

#include "mlap2p_util.h"
#include "kselftest_harness.h"

#if __has_include(<mlap2p/version.h>)
#include <mlap2p/version.h>
#define HAVE_VERSION_H 1
#else
#define HAVE_VERSION_H 0
#define MLAP2P_VERSION_MAJOR 0
#define MLAP2P_VERSION_MINOR 0
#define MLAP2P_VERSION_PATCH 0
#define MLAP2P_VERSION_STRING ""
#endif

#define STR_(x) #x
#define STR(x) STR_(x)
#define SONAME "libmlap2p.so." STR(MLAP2P_VERSION_MAJOR)

/* Directory of this program, for the build-tree fallbacks. */
static int self_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

static void *open_library(char *where, size_t len)
{
	const char *env = getenv("MLAP2P_LIBDIR");
	char dir[PATH_MAX], path[PATH_MAX + 32];
	struct link_map *map;
	void *h;

	h = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h && env && *env &&
	    snprintf(path, sizeof(path), "%s/%s", env, SONAME) < (int)sizeof(path))
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h && !self_dir(dir, sizeof(dir)) &&
	    snprintf(path, sizeof(path), "%s/../lib/%s", dir, SONAME) < (int)sizeof(path))
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h && !dlinfo(h, RTLD_DI_LINKMAP, &map))
		snprintf(where, len, "%s", map->l_name);
	return h;
}

/* DT_SONAME of a loaded object, or NULL. */
static const char *loaded_soname(void *h)
{
	const char *strtab = NULL;
	struct link_map *map;
	ElfW(Dyn) *d;
	long off = -1;

	if (dlinfo(h, RTLD_DI_LINKMAP, &map))
		return NULL;
	for (d = map->l_ld; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_STRTAB)
			strtab = (const char *)d->d_un.d_ptr; /* relocated */
		else if (d->d_tag == DT_SONAME)
			off = (long)d->d_un.d_val;
	}
	return strtab && off >= 0 ? strtab + off : NULL;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = -1;

	if (!f)
		return -errno;
	if (fgets(buf, (int)len, f)) {
		buf[strcspn(buf, "\n")] = '\0';
		ret = 0;
	}
	fclose(f);
	return ret;
}

TEST(header_is_consistent)
{
	char s[32];

	if (!HAVE_VERSION_H)
		SKIP(return, "no <mlap2p/version.h>: build the library first");
	snprintf(s, sizeof(s), "%d.%d.%d", MLAP2P_VERSION_MAJOR,
		 MLAP2P_VERSION_MINOR, MLAP2P_VERSION_PATCH);
	EXPECT_STREQ(s, MLAP2P_VERSION_STRING);
}

TEST(library_matches_header)
{
	int (*version)(int *, int *, int *);
	const char *(*version_string)(void);
	int major = -1, minor = -1, patch = -1;
	char where[PATH_MAX] = "";
	const char *soname;
	void *h, *sym;

	if (!HAVE_VERSION_H)
		SKIP(return, "no <mlap2p/version.h>: build the library first");
	h = open_library(where, sizeof(where));
	if (!h)
		SKIP(return, "%s not found (set MLAP2P_LIBDIR)", SONAME);
	TH_LOG("library: %s", where);

	soname = loaded_soname(h);
	ASSERT_NE(NULL, soname);
	EXPECT_STREQ(SONAME, soname);

	sym = dlsym(h, "mlap2p_version");
	ASSERT_NE(NULL, sym);
	version = (int (*)(int *, int *, int *))sym;
	sym = dlsym(h, "mlap2p_version_string");
	ASSERT_NE(NULL, sym);
	version_string = (const char *(*)(void))sym;

	/* It returns the version code, MLAP2P_VERSION_CODE(maj, min, pat). */
	EXPECT_EQ((MLAP2P_VERSION_MAJOR << 16) | (MLAP2P_VERSION_MINOR << 8) |
		  MLAP2P_VERSION_PATCH, version(&major, &minor, &patch));
	EXPECT_EQ(MLAP2P_VERSION_MAJOR, major);
	EXPECT_EQ(MLAP2P_VERSION_MINOR, minor);
	EXPECT_EQ(MLAP2P_VERSION_PATCH, patch);
	EXPECT_STREQ(MLAP2P_VERSION_STRING, version_string());
	dlclose(h);
}

TEST(module_matches_header)
{
	char v[64];
	int ret;

	if (!HAVE_VERSION_H)
		SKIP(return, "no <mlap2p/version.h>: build the library first");
	ret = read_line("/sys/module/mlap2p/version", v, sizeof(v));
	if (ret == -ENOENT)
		SKIP(return, "module not loaded");
	ASSERT_EQ(0, ret);
	EXPECT_STREQ(MLAP2P_VERSION_STRING, v);
}

TEST(abi_matches_header)
{
	struct mlap2p_info info;
	int fd = kt_dev_open();

	if (fd < 0)
		SKIP(return, "%s: %s", MLAP2P_DEVICE_PATH, strerror(errno));
	ASSERT_EQ(0, kt_get_info(fd, &info));
	close(fd);

	TH_LOG("GET_INFO ABI %u.%u, package %s", info.abi_major,
	       info.abi_minor, MLAP2P_VERSION_STRING);
	EXPECT_EQ(MLAP2P_ABI_MAJOR, info.abi_major);
	EXPECT_EQ(MLAP2P_ABI_MINOR, info.abi_minor);
	if (HAVE_VERSION_H) {
		EXPECT_EQ(MLAP2P_VERSION_MAJOR, info.abi_major);
		EXPECT_LE(info.abi_minor, MLAP2P_VERSION_MINOR);
	}
}

/* The first mlap2pctl found: $MLAP2PCTL, PATH, ../tools beside us. */
static int find_ctl(char *buf, size_t len)
{
	const char *env = getenv("MLAP2PCTL");
	const char *path = getenv("PATH");
	char dir[PATH_MAX];

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, X_OK);
	}
	while (path && *path) {
		size_t n = strcspn(path, ":");

		if (n && snprintf(buf, len, "%.*s/mlap2pctl", (int)n, path) < (int)len &&
		    !access(buf, X_OK))
			return 0;
		path += n + (path[n] == ':');
	}
	if (self_dir(dir, sizeof(dir)))
		return -1;
	if (snprintf(buf, len, "%s/../tools/mlap2pctl", dir) >= (int)len)
		return -1;
	return access(buf, X_OK);
}

TEST(mlap2pctl_matches_header)
{
	char ctl[PATH_MAX], cmd[PATH_MAX + 32], out[128] = "", want[64];
	FILE *p;

	if (!HAVE_VERSION_H)
		SKIP(return, "no <mlap2p/version.h>: build the library first");
	if (find_ctl(ctl, sizeof(ctl)))
		SKIP(return, "mlap2pctl not found (set MLAP2PCTL)");
	TH_LOG("mlap2pctl: %s", ctl);

	snprintf(cmd, sizeof(cmd), "'%s' --version", ctl);
	p = popen(cmd, "re");
	ASSERT_NE(NULL, p);
	if (!fgets(out, sizeof(out), p))
		out[0] = '\0';
	EXPECT_EQ(0, pclose(p));
	out[strcspn(out, "\n")] = '\0';
	snprintf(want, sizeof(want), "mlap2pctl %s", MLAP2P_VERSION_STRING);
	EXPECT_STREQ(want, out);
}

TEST_HARNESS_MAIN
