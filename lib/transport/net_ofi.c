// SPDX-License-Identifier: MIT
/*
 * NET: libfabric, loaded with dlopen on first use, and the probe of the
 * local provider (lib/transport/net.c has the design).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/net_int.h"
#include "param.h"
#include "proto/proto.h"
#include "rt/rt.h"
#include "socket.h"
#include "util.h"

/* ------------------------------------------------------------------ */
/* libfabric, loaded on first use                                     */
/* ------------------------------------------------------------------ */

/*
 * Only these five are real symbols; everything else in libfabric's API is
 * an inline call through the objects' ops tables, so nothing else needs
 * resolving and libmlap2p does not link against libfabric.
 */
struct net_ofi_api net_ofi;
static pthread_once_t net_ofi_once = PTHREAD_ONCE_INIT;

static void net_ofi_load(void)
{
	static const char *const names[] = { "libfabric.so.1", "libfabric.so" };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(names) && !net_ofi.dl; i++)
		net_ofi.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!net_ofi.dl) {
		snprintf(net_ofi.why, sizeof(net_ofi.why),
			 "cannot load libfabric.so.1 (%s); install libfabric1",
			 dlerror());
		return;
	}
	*(void **)&net_ofi.getinfo = dlsym(net_ofi.dl, "fi_getinfo");
	*(void **)&net_ofi.freeinfo = dlsym(net_ofi.dl, "fi_freeinfo");
	*(void **)&net_ofi.dupinfo = dlsym(net_ofi.dl, "fi_dupinfo");
	*(void **)&net_ofi.fabric = dlsym(net_ofi.dl, "fi_fabric");
	*(void **)&net_ofi.strerror = dlsym(net_ofi.dl, "fi_strerror");
	if (!net_ofi.getinfo || !net_ofi.freeinfo || !net_ofi.dupinfo ||
	    !net_ofi.fabric || !net_ofi.strerror) {
		snprintf(net_ofi.why, sizeof(net_ofi.why),
			 "libfabric.so.1 lacks fi_getinfo/fi_fabric");
		dlclose(net_ofi.dl);
		net_ofi.dl = NULL;
	}
}

const char *net_strerror(int err)
{
	if (err < 0)
		err = -err;
	return net_ofi.strerror ? net_ofi.strerror(err) : strerror(err);
}

/* libfabric's -FI_E* are -errno for the errno range; keep the rest EIO. */
int net_errno(ssize_t ret)
{
	if (ret >= 0)
		return 0;
	if (ret <= -FI_ERRNO_OFFSET)
		return -EIO;
	return (int)ret;
}

/* ------------------------------------------------------------------ */
/* Provider choice                                                    */
/* ------------------------------------------------------------------ */

/* Whether NET may connect at all (MLAP2P_NET_DISABLE). */
int net_disabled(void)
{
	long v = 0;

	if (mlap2p_env_int("MLAP2P_NET_DISABLE", 0, 1, 0, &v))
		return 1;	/* a bad value: refuse, the WARN says why */
	return (int)v;
}

/* The local address NET binds to: the bootstrap's interface. */
int net_local_node(char *node, size_t len)
{
	union mlap2p_sockaddr a;
	const void *ip;
	int ret;

	ret = mlap2p_sock_local_addr(&a);
	if (ret)
		return ret;
	ip = a.sa.sa_family == AF_INET ? (const void *)&a.sin.sin_addr :
					 (const void *)&a.sin6.sin6_addr;
	if (!inet_ntop(a.sa.sa_family, ip, node, (socklen_t)len))
		return -errno;
	return 0;
}

const char *net_provider_hint(void)
{
	const char *p = getenv("MLAP2P_NET_PROVIDER");

	if (p && *p)
		return p;
	/* FI_PROVIDER filters inside libfabric; do not contradict it. */
	p = getenv("FI_PROVIDER");
	if (p && *p)
		return NULL;
	return NET_DEFAULT_PROVIDER;
}

/*
 * fi_getinfo for an RDM endpoint with tagged messages on @node.  On
 * failure @why says what was asked for.
 */
int net_getinfo(const char *node, struct fi_info **out, char *why,
		size_t whyLen)
{
	const char *prov = net_provider_hint();
	struct fi_info *hints;
	int ret;

	pthread_once(&net_ofi_once, net_ofi_load);
	if (!net_ofi.dl) {
		snprintf(why, whyLen, "%s", net_ofi.why);
		return -ENOENT;
	}
	hints = net_ofi.dupinfo(NULL);
	if (!hints)
		return -ENOMEM;
	hints->caps = FI_TAGGED | FI_SEND | FI_RECV;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->av_type = FI_AV_TABLE;
	if (prov)
		hints->fabric_attr->prov_name = strdup(prov);
	ret = net_ofi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
			      node, NULL, FI_SOURCE, hints, out);
	net_ofi.freeinfo(hints);	/* frees prov_name too */
	if (ret) {
		snprintf(why, whyLen,
			 "no libfabric provider %s%s%sfor an RDM endpoint with tagged messages on %s: %s",
			 prov ? "\"" : "", prov ? prov : "",
			 prov ? "\" " : "", node, net_strerror(ret));
		return net_errno(ret);
	}
	return 0;
}

/*
 * canConnect's question, once per process and configuration: does this
 * host have a provider?  The answer (and its reason) is cached by the
 * environment it was asked under.
 */
static struct {
	pthread_mutex_t lock;
	char key[256];
	int ret;
	char prov[NET_PROV_MAX];
	char why[384];
} net_probe = { .lock = PTHREAD_MUTEX_INITIALIZER };

int net_probe_local(char *prov, size_t provLen)
{
	char node[INET6_ADDRSTRLEN], key[256];
	const char *p = getenv("FI_PROVIDER"), *hint;
	struct fi_info *info = NULL;
	int ret;

	ret = net_local_node(node, sizeof(node));
	if (ret)
		return ret;
	hint = net_provider_hint();
	snprintf(key, sizeof(key), "%s|%s|%s", node, hint ? hint : "",
		 p ? p : "");
	pthread_mutex_lock(&net_probe.lock);
	if (strcmp(key, net_probe.key)) {
		net_probe.why[0] = '\0';
		net_probe.prov[0] = '\0';
		net_probe.ret = net_getinfo(node, &info, net_probe.why,
					    sizeof(net_probe.why));
		if (!net_probe.ret) {
			snprintf(net_probe.prov, sizeof(net_probe.prov), "%s",
				 info->fabric_attr->prov_name);
			net_ofi.freeinfo(info);
		}
		snprintf(net_probe.key, sizeof(net_probe.key), "%s", key);
		if (net_probe.ret)
			INFO(NCCL_INIT | NCCL_NET, "NET: %s", net_probe.why);
	}
	ret = net_probe.ret;
	snprintf(prov, provLen, "%s", net_probe.prov);
	pthread_mutex_unlock(&net_probe.lock);
	return ret;
}
