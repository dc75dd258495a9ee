# SPDX-License-Identifier: MIT
"""Can this interpreter build and run mlap2p_torch?  (python/torch.mk)

Prints nothing and exits 0 when it can; else prints the Debian packages
that are missing, space separated, and exits 1:

    python3-torch   import torch.distributed fails
    libtorch-dev    torch's C++ headers (torch/extension.h) are absent
    pybind11-dev    pybind11's headers are absent
"""

import os
import sys
import sysconfig


def missing():
    try:
        import torch.distributed  # noqa: F401
    except Exception:
        return ["python3-torch"]
    out = []
    # cpp_extension warns on stderr that there is no CUDA: not our business.
    err = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            from torch.utils.cpp_extension import include_paths
            dirs = include_paths()
    finally:
        os.dup2(err, 2)
        os.close(err)
    if not any(os.path.exists(os.path.join(d, "torch", "extension.h"))
               for d in dirs):
        out.append("libtorch-dev")
    dirs = dirs + [sysconfig.get_paths()["include"], "/usr/include",
                   "/usr/local/include"]
    if not any(os.path.exists(os.path.join(d, "pybind11", "pybind11.h"))
               for d in dirs):
        out.append("pybind11-dev")
    return out


if __name__ == "__main__":
    m = missing()
    if m:
        print(" ".join(m))
    sys.exit(1 if m else 0)
