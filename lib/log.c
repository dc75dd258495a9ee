// SPDX-License-Identifier: MIT
/*
 * Logging in NCCL's form, driven by the environment:
 *
 *   NCCL_DEBUG        VERSION | WARN | INFO | ABORT | TRACE (unset: silent)
 *   NCCL_DEBUG_SUBSYS INIT,P2P,... ; ALL; a leading ^ inverts the list
 *                     (default INIT,BOOTSTRAP,ENV as NCCL)
 *   NCCL_DEBUG_FILE   a file instead of stderr; %h host, %p pid
 *
 * Lines read "host:pid:tid [core] NCCL INFO ...".  The settings are read
 * once per process (they configure output, not a communicator).  A WARN is
 * always kept as the thread's last error, whether printed or not, so the
 * API can explain an -errno without the library printing on its own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "log.h"
#include "util.h"
#include "mlap2p/mlap2p.h"

static struct {
	int level;
	unsigned long mask;
	FILE *file;
	char host[64];
	pthread_mutex_t lock;	/* serialises whole lines */
} mlap2p_dbg = {
	.level = NCCL_LOG_NONE,
	.mask = NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_once_t mlap2p_dbg_once = PTHREAD_ONCE_INIT;

static __thread char mlap2p_last_err[1024];
static __thread int mlap2p_stashed_errno;
static __thread int mlap2p_log_core = -1;

static const struct {
	const char *name;
	unsigned long bit;
} mlap2p_subsys[] = {
	{ "INIT", NCCL_INIT }, { "COLL", NCCL_COLL }, { "P2P", NCCL_P2P },
	{ "SHM", NCCL_SHM }, { "NET", NCCL_NET }, { "GRAPH", NCCL_GRAPH },
	{ "TUNING", NCCL_TUNING }, { "ENV", NCCL_ENV },
	{ "ALLOC", NCCL_ALLOC }, { "CALL", NCCL_CALL },
	{ "PROXY", NCCL_PROXY }, { "BOOTSTRAP", NCCL_BOOTSTRAP },
	{ "ALL", NCCL_ALL },
};

static void mlap2p_dbg_subsys(const char *s)
{
	char buf[256], *tok, *save = NULL;
	unsigned long mask = 0;
	int invert = 0;
	size_t i;

	if (*s == '^') {
		invert = 1;
		s++;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < ARRAY_SIZE(mlap2p_subsys); i++)
			if (!strcasecmp(tok, mlap2p_subsys[i].name))
				mask |= mlap2p_subsys[i].bit;
	}
	mlap2p_dbg.mask = invert ? ~mask : mask;
}

static void mlap2p_dbg_file(const char *pattern)
{
	char path[512];
	size_t o = 0;
	const char *p;
	FILE *f;

	for (p = pattern; *p && o < sizeof(path) - 32; p++) {
		if (p[0] == '%' && p[1] == 'h') {
			o += (size_t)snprintf(path + o, sizeof(path) - o, "%s",
					      mlap2p_dbg.host);
			p++;
		} else if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(path + o, sizeof(path) - o, "%d",
					      (int)getpid());
			p++;
		} else {
			path[o++] = *p;
		}
	}
	path[o] = '\0';
	f = fopen(path, "we");
	if (f) {
		setvbuf(f, NULL, _IOLBF, 0);
		mlap2p_dbg.file = f;
	}
}

static void mlap2p_dbg_init(void)
{
	static const char *const levels[] = {
		"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE",
	};
	const char *s;
	size_t i;

	if (gethostname(mlap2p_dbg.host, sizeof(mlap2p_dbg.host)))
		strcpy(mlap2p_dbg.host, "localhost");
	mlap2p_dbg.host[sizeof(mlap2p_dbg.host) - 1] = '\0';
	/* NCCL shows the first label only. */
	s = strchr(mlap2p_dbg.host, '.');
	if (s)
		mlap2p_dbg.host[s - mlap2p_dbg.host] = '\0';

	s = getenv("NCCL_DEBUG");
	if (s) {
		for (i = 0; i < ARRAY_SIZE(levels); i++)
			if (!strcasecmp(s, levels[i]))
				mlap2p_dbg.level = (int)i;
	}
	s = getenv("NCCL_DEBUG_SUBSYS");
	if (s && *s)
		mlap2p_dbg_subsys(s);
	s = getenv("NCCL_DEBUG_FILE");
	if (s && *s && mlap2p_dbg.level > NCCL_LOG_NONE)
		mlap2p_dbg_file(s);
	if (!mlap2p_dbg.file)
		mlap2p_dbg.file = stderr;
}

bool mlap2p_log_enabled(int level, unsigned long subsys)
{
	pthread_once(&mlap2p_dbg_once, mlap2p_dbg_init);
	if (level > mlap2p_dbg.level)
		return false;
	/* WARN and VERSION ignore the subsystem mask, as in NCCL. */
	return level <= NCCL_LOG_WARN || (subsys & mlap2p_dbg.mask);
}

void mlap2p_log_set_core(int core)
{
	mlap2p_log_core = core;
}

void mlap2p_log(int level, unsigned long subsys, const char *file, int line,
		const char *fmt, ...)
{
	static const char *const names[] = {
		"", "VERSION", "WARN", "INFO", "ABORT", "TRACE",
	};
	char msg[1024], core[16] = "";
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_WARN)
		snprintf(mlap2p_last_err, sizeof(mlap2p_last_err), "%s", msg);

	if (!mlap2p_log_enabled(level, subsys)) {
		errno = saved;
		return;
	}
	if (mlap2p_log_core >= 0)
		snprintf(core, sizeof(core), " [%d]", mlap2p_log_core);
	pthread_mutex_lock(&mlap2p_dbg.lock);
	if (level == NCCL_LOG_WARN)
		fprintf(mlap2p_dbg.file, "%s:%d:%d%s NCCL WARN %s:%d %s\n",
			mlap2p_dbg.host, (int)getpid(),
			(int)syscall(SYS_gettid), core, file, line, msg);
	else
		fprintf(mlap2p_dbg.file, "%s:%d:%d%s NCCL %s %s\n",
			mlap2p_dbg.host, (int)getpid(),
			(int)syscall(SYS_gettid), core, names[level], msg);
	fflush(mlap2p_dbg.file);
	pthread_mutex_unlock(&mlap2p_dbg.lock);
	errno = saved;
}

void mlap2p_errno_stash(int err)
{
	mlap2p_stashed_errno = err;
}

int mlap2p_errno_take(ncclResult_t res)
{
	int err = mlap2p_stashed_errno;

	mlap2p_stashed_errno = 0;
	if (res == ncclSuccess)
		return 0;
	if (err < 0)
		return err;
	switch (res) {
	case ncclInvalidArgument:
	case ncclInvalidUsage:
		return -EINVAL;
	case ncclRemoteError:
		return -ECONNRESET;
	case ncclInProgress:
		return -EINPROGRESS;
	case ncclSystemError:
		return -EIO;
	case ncclUnhandledCudaError:
		return -ENXIO;
	default:
		return -EPROTO;
	}
}

int mlap2p_err(int err)
{
	if (err < 0)
		errno = -err;
	return err;
}

MLAP2P_EXPORT const char *mlap2p_last_error(void)
{
	return mlap2p_last_err;
}

MLAP2P_EXPORT const char *mlap2p_strerror(int err)
{
	const char *s;

	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "Success";
	case ENODEV:
		return "No mlap2p device (load the mlap2p module, or use MLAP2P_RUNTIME=host)";
	case ETIMEDOUT:
		return "Timed out waiting for a rank (mlap2p_last_error() names it)";
	case ESRCH:
		return "A peer process has exited";
	case ECANCELED:
		return "The communicator was aborted";
	case EHOSTUNREACH:
		return "No transport between these ranks (P2P cannot reach and NET is unavailable)";
	case ENOTCONN:
		return "Not connected to that peer";
	case EPROTO:
		return "The ranks disagree (different library versions or configurations)";
	}
	s = strerrordesc_np(err);
	return s ? s : "Unknown error";
}
