# SPDX-License-Identifier: MIT
"""Build mlap2p_torch ahead of time (make torch; make install installs it).

Where libmlap2p is: MLAP2P_INCLUDE (colon-separated include directories,
the one holding nccl.h among them) and MLAP2P_LIBDIR, as the top-level
Makefile sets them for the tree; else pkg-config mlap2p-nccl.  Run it with
the interpreter that has torch: Debian's /usr/bin/python3.
"""

import os
import shlex
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths


def _pkg_config(*args):
    out = subprocess.run(["pkg-config", *args, "mlap2p-nccl"], check=True,
                         capture_output=True, text=True).stdout
    return shlex.split(out)


def _paths():
    inc = os.environ.get("MLAP2P_INCLUDE")
    if inc:
        libdir = os.environ.get("MLAP2P_LIBDIR")
        return inc.split(":"), [libdir] if libdir else []
    incs = [f[2:] for f in _pkg_config("--cflags-only-I") if f.startswith("-I")]
    libs = [f[2:] for f in _pkg_config("--libs-only-L") if f.startswith("-L")]
    return incs, libs


include_dirs, library_dirs = _paths()
# torch's headers as system headers: they do not build warning-free with
# -Wextra, ours must (-isystem wins over the -I cpp_extension adds).
system_dirs = [f for d in include_paths() for f in ("-isystem", d)]

setup(
    name="mlap2p_torch",
    version=os.environ.get("MLAP2P_VERSION", "0"),
    description="libmlap2p as a torch.distributed backend",
    packages=["mlap2p_torch"],
    ext_modules=[
        CppExtension(
            "mlap2p_torch._C",
            ["mlap2p_torch/csrc/ProcessGroupMlap2p.cpp",
             "mlap2p_torch/csrc/module.cpp"],
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=["mlap2p"],
            extra_compile_args=system_dirs + ["-O2", "-Wall", "-Wextra",
                                              "-Werror"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
)
