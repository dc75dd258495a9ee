/* TEMPORARY until branch coll lands: stubs so the library links. */
#if !__has_include("mlap2p/coll.h")
#include <errno.h>
#include "coll_tmp.h"
int mlap2p_all_reduce(struct mlap2p_comm *c, const void *s, void *r,
		      size_t n, int d, int o)
{ (void)c; (void)s; (void)r; (void)n; (void)d; (void)o; return -EOPNOTSUPP; }
int mlap2p_broadcast(struct mlap2p_comm *c, const void *s, void *r,
		     size_t n, int d, int o)
{ (void)c; (void)s; (void)r; (void)n; (void)d; (void)o; return -EOPNOTSUPP; }
int mlap2p_reduce(struct mlap2p_comm *c, const void *s, void *r, size_t n,
		  int d, int o, int t)
{ (void)c; (void)s; (void)r; (void)n; (void)d; (void)o; (void)t; return -EOPNOTSUPP; }
int mlap2p_all_gather(struct mlap2p_comm *c, const void *s, void *r,
		      size_t n, int d)
{ (void)c; (void)s; (void)r; (void)n; (void)d; return -EOPNOTSUPP; }
int mlap2p_reduce_scatter(struct mlap2p_comm *c, const void *s, void *r,
			  size_t n, int d, int o)
{ (void)c; (void)s; (void)r; (void)n; (void)d; (void)o; return -EOPNOTSUPP; }
int mlap2p_all_to_all(struct mlap2p_comm *c, const void *s, void *r,
		      size_t n, int d)
{ (void)c; (void)s; (void)r; (void)n; (void)d; return -EOPNOTSUPP; }
#else
typedef int mlap2p_coll_tmp_empty;
#endif
